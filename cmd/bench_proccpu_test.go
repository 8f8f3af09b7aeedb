package cmd

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	tests := []struct {
		name, line string
		wantName   string
		wantTicks  uint64
		wantOK     bool
	}{
		{"postgres backend", "4242 (postgres) S 900 900 900 0 -1 4194560 1000 0 0 0 170 35 0 0 20 0 1 0 123 1 1 18446744073709551615", "postgres", 205, true},
		{"name with spaces and parentheses", "7 (a) b (c)) R 1 7 7 0 -1 0 0 0 0 0 3 4 0 0 20 0 1 0 1 1 1", "a) b (c)", 7, true},
		{"truncated line", "7 (redis-server) S 1 7 7 0 -1 0 0 0 0 0 3", "", 0, false},
		{"no name", "7 redis-server S 1", "", 0, false},
		{"times not numbers", "7 (mosquitto) S 1 7 7 0 -1 0 0 0 0 0 x y 0", "", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name, ticks, ok := parseProcStat([]byte(tt.line))
			if name != tt.wantName || ticks != tt.wantTicks || ok != tt.wantOK {
				t.Fatalf("parseProcStat = %q, %d, %v; want %q, %d, %v", name, ticks, ok, tt.wantName, tt.wantTicks, tt.wantOK)
			}
		})
	}
}

func TestCPUSecondsSince(t *testing.T) {
	before := procSample{
		10: {"postgres", 100},
		11: {"postgres", 50},
		12: {"redis-server", 400},
		13: {"mosquitto", 90}, // exits before the second sample
		14: {"postgres", 500}, // its pid is reused by a new process
	}
	after := procSample{
		10: {"postgres", 130},     // +30
		11: {"postgres", 50},      // +0
		12: {"redis-server", 425}, // +25
		14: {"mosquitto", 7},      // a new process: all 7
		15: {"postgres", 20},      // started meanwhile: all 20
	}
	got := after.cpuSecondsSince(before)
	want := map[string]float64{"postgres": 0.5, "redis-server": 0.25, "mosquitto": 0.07}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Fatalf("%s: got %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	if procSample(nil).cpuSecondsSince(before) != nil || after.cpuSecondsSince(nil) != nil {
		t.Fatal("a missing sample must give no figures, not zeros")
	}
}

func TestFormatCPUPerMessage(t *testing.T) {
	got := formatCPUPerMessage(1.5, map[string]float64{"mosquitto": 0.3, "postgres": 1.7}, 10000)
	if want := "edgeplat 150 µs, postgres 170 µs, mosquitto 30 µs, total 350 µs"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := formatCPUPerMessage(1.5, nil, 10000); got != "edgeplat 150 µs" {
		t.Fatalf("without services: got %q", got)
	}
}

// TestSampleProcsSeesABusyProcess runs a shell loop for a while and checks
// that its CPU shows up under its command name, and this process's does not.
func TestSampleProcsSeesABusyProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("/proc is Linux's")
	}
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("Linux without /proc: %v", err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("no sh to run a busy loop with: %v", err)
	}
	// A copy under a name of its own, so no other process on the machine
	// is counted with it.
	busy := t.TempDir() + "/epbusyloop"
	data, err := os.ReadFile(sh)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(busy, data, 0o755); err != nil {
		t.Fatal(err)
	}
	selfStat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	self, _, _ := parseProcStat(selfStat)
	names := []string{"epbusyloop", self}
	before := sampleProcs(names)
	cmd := exec.Command(busy, "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var got map[string]float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
		if got = sampleProcs(names).cpuSecondsSince(before); got["epbusyloop"] >= 0.1 {
			break
		}
	}
	if got["epbusyloop"] < 0.1 {
		t.Fatalf("a busy loop used %v CPU s after up to 10 s (all: %v)", got["epbusyloop"], got)
	}
	if _, ok := sampleProcs(names)[os.Getpid()]; ok {
		t.Fatalf("this process (%s) is sampled; its CPU is reported apart", self)
	}
}
