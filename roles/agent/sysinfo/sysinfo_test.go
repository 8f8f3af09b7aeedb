package sysinfo

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

func readFixtureCounters(t *testing.T, dir string, at time.Time) counters {
	t.Helper()
	s := NewSampler(filepath.Join("testdata", dir), t.TempDir())
	s.now = func() time.Time { return at }
	c, err := s.readCounters()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestComputeRates(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	p1 := readFixtureCounters(t, "proc1", t0)
	p2 := readFixtureCounters(t, "proc2", t0.Add(2*time.Second))

	tests := []struct {
		name   string
		prev   counters
		cur    counters
		cpu    float64
		rx, tx float64
	}{
		// eth0 +200000/+100000, docker0 +5000/+1000, lo ignored, wg0 new.
		{name: "two snapshots", prev: p1, cur: p2, cpu: 40, rx: 102500, tx: 50500},
		{name: "same snapshot", prev: p1, cur: counters{at: t0.Add(time.Second), cpu: p1.cpu, net: p1.net}, cpu: 0, rx: 0, tx: 0},
		{name: "counters went backwards", prev: p2, cur: counters{at: t0.Add(3 * time.Second), cpu: p1.cpu, net: p1.net}, cpu: 0, rx: 0, tx: 0},
		{name: "no time elapsed", prev: p1, cur: counters{at: t0, cpu: p2.cpu, net: p2.net}, cpu: 40, rx: 0, tx: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpu, n := computeRates(tt.prev, tt.cur)
			if cpu != tt.cpu || n.RxBytesPerSec != tt.rx || n.TxBytesPerSec != tt.tx {
				t.Errorf("got cpu %v rx %v tx %v, want %v %v %v", cpu, n.RxBytesPerSec, n.TxBytesPerSec, tt.cpu, tt.rx, tt.tx)
			}
		})
	}
}

// copyFixture makes dst a copy of testdata/src so a test can swap
// snapshots under a running Sampler.
func copyFixture(t *testing.T, src, dst string) {
	t.Helper()
	root := filepath.Join("testdata", src)
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if d.Type()&os.ModeSymlink != 0 { // self -> <pid>
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			_ = os.Remove(filepath.Join(dst, rel))
			return os.Symlink(target, filepath.Join(dst, rel))
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestSamplerRatesBetweenCalls(t *testing.T) {
	proc := t.TempDir()
	copyFixture(t, "proc1", proc)
	s := NewSampler(proc, t.TempDir())
	s.settle = time.Millisecond
	var mu sync.Mutex
	now := time.Unix(1700000000, 0)
	s.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	ctx := context.Background()
	d, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Both readings of the first call saw proc1: nothing moved.
	if d.CPUUsage != 0 || d.Network != (Network{}) {
		t.Errorf("first call: cpu %v network %+v", d.CPUUsage, d.Network)
	}
	want := Dashboard{
		MemoryPercent: 25, MemoryUsed: 500000 * 1024, MemoryTotal: 2000000 * 1024,
		Uptime: 12345, Hostname: "edge-gw-01",
	}
	d.StoragePercent, d.StorageUsed, d.StorageTotal = 0, 0, 0
	if d != want {
		t.Errorf("got %+v, want %+v", d, want)
	}

	copyFixture(t, "proc2", proc)
	advance(2 * time.Second)
	if d, err = s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if d.CPUUsage != 40 || d.Network != (Network{RxBytesPerSec: 102500, TxBytesPerSec: 50500}) {
		t.Errorf("second call: cpu %v network %+v", d.CPUUsage, d.Network)
	}
	if d.Uptime != 12347 {
		t.Errorf("uptime %d", d.Uptime)
	}

	// A call right after the previous one repeats its rates instead of
	// dividing by almost nothing.
	advance(10 * time.Millisecond)
	d2, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d2.CPUUsage != d.CPUUsage || d2.Network != d.Network {
		t.Errorf("close call: got cpu %v net %+v, want the previous %v %+v", d2.CPUUsage, d2.Network, d.CPUUsage, d.Network)
	}

	// Nothing changed since proc2: the rate since the last stored sample is zero.
	advance(time.Second)
	if d, err = s.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if d.CPUUsage != 0 || d.Network != (Network{}) {
		t.Errorf("idle call: cpu %v network %+v", d.CPUUsage, d.Network)
	}
}

func TestSamplerFirstCallHonoursContext(t *testing.T) {
	s := NewSampler(filepath.Join("testdata", "proc1"), t.TempDir())
	s.settle = time.Hour
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := s.Sample(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("got %v, want deadline exceeded", err)
	}
}

func TestSamplerErrorsNameTheFile(t *testing.T) {
	tests := []struct {
		name   string
		remove string
	}{
		{name: "meminfo", remove: "meminfo"},
		{name: "uptime", remove: "uptime"},
		{name: "stat", remove: "stat"},
		{name: "net/dev", remove: filepath.Join("net", "dev")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc := t.TempDir()
			copyFixture(t, "proc1", proc)
			if err := os.Remove(filepath.Join(proc, tt.remove)); err != nil {
				t.Fatal(err)
			}
			s := NewSampler(proc, t.TempDir())
			s.settle = 0
			_, err := s.Sample(context.Background())
			if err == nil || !strings.Contains(err.Error(), filepath.Join(proc, tt.remove)) {
				t.Fatalf("error %v does not name %s", err, tt.remove)
			}
		})
	}
	s := NewSampler(filepath.Join("testdata", "proc1"), filepath.Join(t.TempDir(), "missing"))
	if _, err := s.Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Fatalf("statfs error %v does not name the data dir", err)
	}
	proc := t.TempDir()
	copyFixture(t, "proc1", proc)
	if err := os.WriteFile(filepath.Join(proc, "uptime"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := NewSampler(proc, t.TempDir()).Sample(context.Background()); err == nil || !strings.Contains(err.Error(), "parse "+filepath.Join(proc, "uptime")) {
		t.Fatalf("parse error %v does not name the file", err)
	}
}

func TestDashboardJSON(t *testing.T) {
	b, err := json.Marshal(Dashboard{Network: Network{RxBytesPerSec: 1, TxBytesPerSec: 2}})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"cpu_usage", "memory_percent", "memory_used", "memory_total", "storage_percent",
		"storage_used", "storage_total", "uptime", "hostname", "network"} {
		if _, ok := m[k]; !ok {
			t.Errorf("missing %s in %s", k, b)
		}
	}
	if len(m) != 10 {
		t.Errorf("unexpected keys in %s", b)
	}
	n := m["network"].(map[string]any)
	if n["rx_bytes_per_sec"] != 1.0 || n["tx_bytes_per_sec"] != 2.0 || len(n) != 2 {
		t.Errorf("network = %v", n)
	}
}

func TestLiveProc(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("/proc unavailable:", err)
	}
	s := NewSampler("/proc", t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	start := time.Now()
	d, err := s.Sample(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < firstSettle || el > 3*time.Second {
		t.Errorf("first call took %v", el)
	}
	inRange := func(name string, v float64) {
		if v < 0 || v > 100 {
			t.Errorf("%s = %v, want 0..100", name, v)
		}
	}
	inRange("cpu_usage", d.CPUUsage)
	inRange("memory_percent", d.MemoryPercent)
	inRange("storage_percent", d.StoragePercent)
	if d.MemoryTotal < 1<<20 || d.MemoryUsed == 0 || d.MemoryUsed > d.MemoryTotal {
		t.Errorf("memory used %d total %d", d.MemoryUsed, d.MemoryTotal)
	}
	if d.StorageTotal == 0 || d.StorageUsed > d.StorageTotal {
		t.Errorf("storage used %d total %d", d.StorageUsed, d.StorageTotal)
	}
	if d.Uptime <= 0 || d.Hostname == "" {
		t.Errorf("uptime %d hostname %q", d.Uptime, d.Hostname)
	}
	if d.Network.RxBytesPerSec < 0 || d.Network.TxBytesPerSec < 0 {
		t.Errorf("network %+v", d.Network)
	}
	if h, _ := os.Hostname(); h != d.Hostname {
		t.Errorf("hostname %q, os.Hostname %q", d.Hostname, h)
	}

	rss, err := ProcessRSS()
	if err != nil || rss < 1<<20 || rss > 4<<30 {
		t.Errorf("ProcessRSS = %d, %v", rss, err)
	}
	// Burn a little CPU so the cumulative figure is visibly positive.
	for x, end := 0, time.Now().Add(30*time.Millisecond); time.Now().Before(end); x++ {
		_ = x
	}
	cpu, err := ProcessCPU()
	if err != nil || cpu <= 0 || cpu > 3600 {
		t.Errorf("ProcessCPU = %v, %v", cpu, err)
	}
	byPid, err := ReadProcess("/proc", os.Getpid())
	if err != nil || byPid.RSSBytes == 0 || byPid.CPUSeconds < cpu {
		t.Errorf("ReadProcess(own pid) = %+v, %v (self cpu %v)", byPid, err, cpu)
	}
}

// TestCPUPercentNeverWaits: CPUPercent answers 0 until it has two
// readings, then the rate between them, and between reads the last figure.
func TestCPUPercentNeverWaits(t *testing.T) {
	proc := t.TempDir()
	copyFixture(t, "proc1", proc)
	s := NewSampler(proc, t.TempDir())
	now := time.Unix(1700000000, 0)
	s.now = func() time.Time { return now }
	if got := s.CPUPercent(); got != 0 {
		t.Fatalf("first reading: %v", got)
	}
	copyFixture(t, "proc2", proc)
	now = now.Add(500 * time.Millisecond)
	if got := s.CPUPercent(); got != 0 {
		t.Fatalf("within the window: %v, want the last figure 0", got)
	}
	now = now.Add(time.Second)
	if got := s.CPUPercent(); got != 40 {
		t.Fatalf("after the window: %v, want 40", got)
	}
	if err := os.RemoveAll(proc); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Second)
	if got := s.CPUPercent(); got != 40 {
		t.Fatalf("without /proc: %v, want the last figure", got)
	}
}
