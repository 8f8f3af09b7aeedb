package sysinfo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func fixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestParseCPUStat(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    cpuTimes
		wantErr string
	}{
		{name: "fixture 1", data: fixture(t, "proc1", "stat"), want: cpuTimes{busy: 1500, total: 9600}},
		{name: "fixture 2", data: fixture(t, "proc2", "stat"), want: cpuTimes{busy: 1900, total: 10600}},
		{name: "old kernel four columns", data: []byte("cpu 10 0 5 85\n"), want: cpuTimes{busy: 15, total: 100}},
		{name: "guest not counted twice", data: []byte("cpu 10 0 0 90 0 0 0 0 10 0\n"), want: cpuTimes{busy: 10, total: 100}},
		{name: "no aggregate line", data: []byte("cpu0 1 2 3 4\n"), wantErr: "no aggregate cpu line"},
		{name: "too few fields", data: []byte("cpu 1 2 3\n"), wantErr: "want at least 5"},
		{name: "not a number", data: []byte("cpu 1 x 3 4\n"), wantErr: "cpu field 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUStat(tt.data)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    meminfo
		wantErr string
	}{
		{name: "fixture", data: fixture(t, "proc1", "meminfo"), want: meminfo{total: 2000000 * 1024, available: 1500000 * 1024}},
		{name: "no MemAvailable", data: fixture(t, "oldkernel", "meminfo"), want: meminfo{total: 1000000 * 1024, available: 500000 * 1024}},
		{name: "available above total", data: []byte("MemTotal: 10 kB\nMemAvailable: 20 kB\n"), want: meminfo{total: 10240, available: 10240}},
		{name: "no MemTotal", data: []byte("MemFree: 10 kB\n"), wantErr: "no MemTotal"},
		{name: "bad value", data: []byte("MemTotal: ten kB\n"), wantErr: "MemTotal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseMeminfo(tt.data)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseNetDev(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    netCounters
		wantErr string
	}{
		{name: "fixture skips lo", data: fixture(t, "proc1", "net", "dev"), want: netCounters{
			"eth0": {1000000, 400000}, "wlan0": {20000, 10000}, "docker0": {0, 0},
		}},
		{name: "name glued to counter", data: []byte("h1|\nh2|\neth0:123 1 0 0 0 0 0 0 456 1 0 0 0 0 0 0\n"), want: netCounters{"eth0": {123, 456}}},
		{name: "headers only", data: []byte("Inter-|   Receive |  Transmit\n face |bytes|bytes\n"), want: netCounters{}},
		{name: "short line", data: []byte("eth0: 1 2 3\n"), wantErr: "interface eth0"},
		{name: "bad tx", data: []byte("eth0: 1 0 0 0 0 0 0 0 x 0 0 0 0 0 0 0\n"), wantErr: "tx bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseNetDev(tt.data)
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if got[k] != v {
					t.Errorf("%s: got %v, want %v", k, got[k], v)
				}
			}
		})
	}
}

func TestParseUptime(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    int64
		wantErr string
	}{
		{name: "fixture", data: fixture(t, "proc1", "uptime"), want: 12345},
		{name: "just booted", data: []byte("0.50 0.90\n"), want: 0},
		{name: "empty", data: nil, wantErr: "empty"},
		{name: "garbage", data: []byte("abc 1\n"), wantErr: "uptime"},
		{name: "negative", data: []byte("-1 1\n"), wantErr: "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseUptime(tt.data)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestParsePidStat(t *testing.T) {
	tail := " S 1 1 1 0 -1 0 0 0 0 0 11 22 0 0 20 0 1 0 5 100 10"
	tests := []struct {
		name         string
		data         []byte
		utime, stime uint64
		wantErr      string
	}{
		{name: "parentheses and spaces in name", data: fixture(t, "proc1", "4242", "stat"), utime: 250, stime: 130},
		{name: "plain name", data: fixture(t, "proc1", "self", "stat"), utime: 1234, stime: 567},
		{name: "name is a closing paren", data: []byte("9 ())" + tail), utime: 11, stime: 22},
		{name: "name looks like fields", data: []byte("9 (a) R 1 2 3)" + tail), utime: 11, stime: 22},
		{name: "empty name", data: []byte("9 ()" + tail), utime: 11, stime: 22},
		{name: "no paren", data: []byte("9 agent S 1"), wantErr: "no ')'"},
		{name: "truncated", data: []byte("9 (a) S 1 1 1"), wantErr: "want at least 13"},
		{name: "bad utime", data: []byte("9 (a) S 1 1 1 0 -1 0 0 0 0 0 u 22"), wantErr: "utime"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, s, err := parsePidStat(tt.data)
			checkErr(t, err, tt.wantErr)
			if err == nil && (u != tt.utime || s != tt.stime) {
				t.Errorf("got utime %d stime %d, want %d %d", u, s, tt.utime, tt.stime)
			}
		})
	}
}

func TestParseStatm(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		want    uint64
		wantErr string
	}{
		{name: "fixture", data: fixture(t, "proc1", "4242", "statm"), want: 2048},
		{name: "one field", data: []byte("100\n"), wantErr: "want at least 2"},
		{name: "bad", data: []byte("100 x\n"), wantErr: "resident"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatm(tt.data)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %d, want %d", got, tt.want)
			}
		})
	}
}

func TestReadProcessFixture(t *testing.T) {
	page := uint64(os.Getpagesize())
	tests := []struct {
		name    string
		pid     int
		want    ProcessStat
		wantErr string
	}{
		{name: "other pid", pid: 4242, want: ProcessStat{RSSBytes: 2048 * page, CPUSeconds: 380 / float64(clockTicks())}},
		{name: "self", pid: 0, want: ProcessStat{RSSBytes: 393 * page, CPUSeconds: 1801 / float64(clockTicks())}},
		{name: "missing pid names the file", pid: 99, wantErr: filepath.Join("proc1", "99", "statm")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ReadProcess(filepath.Join("testdata", "proc1"), tt.pid)
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestAuxvValue(t *testing.T) {
	data, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		t.Skip("/proc/self/auxv unavailable:", err)
	}
	if hz := auxvValue(data, atClkTck); hz == 0 || hz > 10000 {
		t.Errorf("AT_CLKTCK = %d", hz)
	}
	if got := auxvValue(data[:0], atClkTck); got != 0 {
		t.Errorf("empty auxv gave %d", got)
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("unexpected error: %v", err)
	case want != "" && err == nil:
		t.Fatalf("no error, want one containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q does not contain %q", err, want)
	}
}

func FuzzParsers(f *testing.F) {
	for _, p := range []string{"proc1/stat", "proc1/meminfo", "proc1/net/dev", "proc1/uptime", "proc1/4242/stat", "proc1/4242/statm"} {
		data, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Only the absence of panics is checked: /proc content is trusted
		// but a truncated read or an unusual kernel must not crash the agent.
		_, _ = parseCPUStat(data)
		_, _ = parseMeminfo(data)
		_, _ = parseNetDev(data)
		_, _ = parseUptime(data)
		_, _, _ = parsePidStat(data)
		_, _ = parseStatm(data)
		_ = auxvValue(data, atClkTck)
	})
}
