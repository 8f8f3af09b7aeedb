package bench

import (
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestCPUSecondsSince(t *testing.T) {
	before := procSample{
		10: {"postgres", 1.00},
		11: {"postgres", 0.50},
		12: {"redis-server", 4.00},
		13: {"mosquitto", 0.90}, // exits before the second sample
		14: {"postgres", 5.00},  // its pid is reused by a new process
	}
	after := procSample{
		10: {"postgres", 1.30},     // +0.30
		11: {"postgres", 0.50},     // +0
		12: {"redis-server", 4.25}, // +0.25
		14: {"mosquitto", 0.07},    // a new process: all 0.07
		15: {"postgres", 0.20},     // started meanwhile: all 0.20
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
	me, err := procfs.Self()
	if err != nil {
		t.Fatal(err)
	}
	st, err := me.Stat()
	if err != nil {
		t.Fatal(err)
	}
	self := st.Comm
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
