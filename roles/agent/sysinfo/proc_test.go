package sysinfo

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/procfs"
)

func fixture(t *testing.T, parts ...string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// procDir writes files (path relative to the root: content) into a fresh
// fake /proc and returns its root.
func procDir(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// The tests below pin what the dashboard relies on procfs for, on the
// fixtures and on the odd kernels the hand-written parsers handled.

func TestCPUTimes(t *testing.T) {
	tests := []struct {
		name    string
		root    string
		want    cpuTimes
		wantErr bool
	}{
		{name: "fixture 1", root: filepath.Join("testdata", "proc1"), want: cpuTimes{busy: 15, total: 96}},
		{name: "fixture 2", root: filepath.Join("testdata", "proc2"), want: cpuTimes{busy: 19, total: 106}},
		{name: "old kernel four columns", root: procDir(t, map[string]string{"stat": "cpu 10 0 5 85\n"}), want: cpuTimes{busy: 0.15, total: 1}},
		{name: "guest not counted twice", root: procDir(t, map[string]string{"stat": "cpu 10 0 0 90 0 0 0 0 10 0\n"}), want: cpuTimes{busy: 0.1, total: 1}},
		{name: "not a number", root: procDir(t, map[string]string{"stat": "cpu 1 x 3 4\n"}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := procfs.NewFS(tt.root)
			if err != nil {
				t.Fatal(err)
			}
			st, err := fs.Stat()
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := cpuTimesOf(st.CPUTotal)
			if math.Abs(got.busy-tt.want.busy) > 1e-9 || math.Abs(got.total-tt.want.total) > 1e-9 {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestMeminfo(t *testing.T) {
	tests := []struct {
		name    string
		root    string
		want    meminfo
		wantErr string
	}{
		{name: "fixture", root: filepath.Join("testdata", "proc1"), want: meminfo{total: 2000000 * 1024, available: 1500000 * 1024}},
		{name: "no MemAvailable", root: filepath.Join("testdata", "oldkernel"), want: meminfo{total: 1000000 * 1024, available: 500000 * 1024}},
		{name: "available above total", root: procDir(t, map[string]string{"meminfo": "MemTotal: 10 kB\nMemAvailable: 20 kB\n"}), want: meminfo{total: 10240, available: 10240}},
		{name: "no MemTotal", root: procDir(t, map[string]string{"meminfo": "MemFree: 10 kB\n"}), wantErr: "no MemTotal"},
		{name: "bad value", root: procDir(t, map[string]string{"meminfo": "MemTotal: ten kB\n"}), wantErr: "meminfo"},
		// procfs v0.16.1 panics on this line; guard makes it an error.
		{name: "line without a value", root: procDir(t, map[string]string{"meminfo": "MemTotal: 10 kB\nMemFree:\n"}), wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NewSampler(tt.root, t.TempDir()).readMeminfo()
			checkErr(t, err, tt.wantErr)
			if err == nil && got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNetDev(t *testing.T) {
	stat := "cpu 1 0 1 8\n"
	tests := []struct {
		name    string
		root    string
		want    netCounters
		wantErr string
	}{
		{name: "fixture skips lo", root: filepath.Join("testdata", "proc1"), want: netCounters{
			"eth0": {1000000, 400000}, "wlan0": {20000, 10000}, "docker0": {0, 0},
		}},
		{name: "name glued to counter", root: procDir(t, map[string]string{"stat": stat, "net/dev": "h1|\nh2|\neth0:123 1 0 0 0 0 0 0 456 1 0 0 0 0 0 0\n"}), want: netCounters{"eth0": {123, 456}}},
		{name: "headers only", root: procDir(t, map[string]string{"stat": stat, "net/dev": "Inter-|   Receive |  Transmit\n face |bytes|bytes\n"}), want: netCounters{}},
		{name: "bad tx", root: procDir(t, map[string]string{"stat": stat, "net/dev": "h1\nh2\neth0: 1 0 0 0 0 0 0 0 x 0 0 0 0 0 0 0\n"}), wantErr: filepath.Join("net", "dev")},
		{name: "line without counters", root: procDir(t, map[string]string{"stat": stat, "net/dev": "h1\nh2\neth0:\n"}), wantErr: filepath.Join("net", "dev")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewSampler(tt.root, t.TempDir()).readCounters()
			checkErr(t, err, tt.wantErr)
			if err != nil {
				return
			}
			got := c.net
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

func TestReadProcessFixture(t *testing.T) {
	page := uint64(os.Getpagesize())
	tests := []struct {
		name    string
		pid     int
		want    ProcessStat
		wantErr string
	}{
		// The fixtures' stat files give utime+stime in USER_HZ (100) ticks
		// and the RSS in pages.
		{name: "other pid", pid: 4242, want: ProcessStat{RSSBytes: 2048 * page, CPUSeconds: 3.8}},
		{name: "self", pid: 0, want: ProcessStat{RSSBytes: 393 * page, CPUSeconds: 18.01}},
		{name: "missing pid names it", pid: 99, wantErr: filepath.Join("proc1", "99")},
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

// FuzzParsers feeds arbitrary bytes to every /proc file the Sampler and
// ReadProcess read, through procfs. Only the absence of panics is checked:
// /proc content is trusted, but a truncated read or an unusual kernel must
// not crash the agent.
func FuzzParsers(f *testing.F) {
	for _, p := range []string{"proc1/stat", "proc1/meminfo", "proc1/net/dev", "proc1/uptime", "proc1/4242/stat"} {
		data, err := os.ReadFile(filepath.Join("testdata", p))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	root := f.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil {
		f.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "4242"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, name := range []string{"stat", "meminfo", "net/dev", "uptime", "4242/stat"} {
			if err := os.WriteFile(filepath.Join(root, name), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s := NewSampler(root, root)
		_, _ = s.readCounters()
		_, _ = s.readMeminfo()
		_, _ = s.readUptime()
		_, _ = ReadProcess(root, 4242)
	})
}
