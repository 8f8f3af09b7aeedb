// Package sysinfo reads the host and process figures behind the edge
// agent's dashboard (GET /v1/dashboard/stats) and memory diagnostics
// (GET /v1/memory), from /proc (read with github.com/prometheus/procfs) and
// statfs so it stays cheap on small devices. The figures exist on Linux
// only; elsewhere (macOS builds of the binary) the readers return errors
// and the dashboard says so, while the package still compiles.
package sysinfo

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/procfs"
)

// Dashboard is the answer of GET /v1/dashboard/stats (docs/agent.md,
// section Settings, logs, diagnostics).
type Dashboard struct {
	CPUUsage       float64 `json:"cpu_usage"` // percent of all CPUs busy
	MemoryPercent  float64 `json:"memory_percent"`
	MemoryUsed     uint64  `json:"memory_used"` // bytes
	MemoryTotal    uint64  `json:"memory_total"`
	StoragePercent float64 `json:"storage_percent"`
	StorageUsed    uint64  `json:"storage_used"` // bytes
	StorageTotal   uint64  `json:"storage_total"`
	Uptime         int64   `json:"uptime"` // seconds since boot
	Hostname       string  `json:"hostname"`
	Network        Network `json:"network"`
}

// Network is the throughput of all interfaces except loopback.
type Network struct {
	RxBytesPerSec float64 `json:"rx_bytes_per_sec"`
	TxBytesPerSec float64 `json:"tx_bytes_per_sec"`
}

const (
	// firstSettle is the gap between the two samples of the first call, long
	// enough for a meaningful CPU figure and short enough for an HTTP request.
	firstSettle = 200 * time.Millisecond
	// minInterval keeps two dashboards polling at once from producing
	// rates over a few microseconds, which are mostly noise: a call that
	// close to the previous one repeats the previous rates.
	minInterval = 100 * time.Millisecond
)

// counters is one reading of the cumulative figures rates are made from.
type counters struct {
	at  time.Time
	cpu cpuTimes
	net netCounters
}

// Sampler produces Dashboard values. CPU and network figures are rates
// since the previous call, so the Sampler keeps that call's counters.
type Sampler struct {
	procRoot string
	dataDir  string

	// Replaced by tests.
	now    func() time.Time
	settle time.Duration

	mu       sync.Mutex
	prev     *counters
	lastCPU  float64
	lastNet  Network
	haveRate bool

	// CPUPercent's own readings, apart from the dashboard's.
	cpuMu   sync.Mutex
	cpuPrev *counters
	cpuLast float64
}

// NewSampler returns a Sampler reading procRoot ("/proc" normally) and
// reporting storage of the filesystem holding dataDir.
func NewSampler(procRoot, dataDir string) *Sampler {
	return &Sampler{procRoot: procRoot, dataDir: dataDir, now: time.Now, settle: firstSettle}
}

// Sample returns the current figures. The first call waits briefly (bounded
// by ctx) for a second reading so its CPU and network rates are not zero.
func (s *Sampler) Sample(ctx context.Context) (Dashboard, error) {
	var d Dashboard
	mem, err := s.readMeminfo()
	if err != nil {
		return d, err
	}
	d.MemoryTotal = mem.total
	d.MemoryUsed = mem.total - mem.available
	d.MemoryPercent = percent(d.MemoryUsed, d.MemoryTotal)

	if d.Uptime, err = s.readUptime(); err != nil {
		return d, err
	}
	d.Hostname = s.hostname()
	if d.StorageUsed, d.StorageTotal, d.StoragePercent, err = storage(s.dataDir); err != nil {
		return d, err
	}
	if d.CPUUsage, d.Network, err = s.rates(ctx); err != nil {
		return d, err
	}
	return d, nil
}

// rates holds the lock across the first call's short wait so concurrent
// first callers do not each wait and race to store their counters.
func (s *Sampler) rates(ctx context.Context) (float64, Network, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	cur, err := s.readCounters()
	if err != nil {
		return 0, Network{}, err
	}
	if s.prev == nil {
		t := time.NewTimer(s.settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, Network{}, fmt.Errorf("sysinfo: waiting for the second sample: %w", ctx.Err())
		case <-t.C:
		}
		first := cur
		if cur, err = s.readCounters(); err != nil {
			return 0, Network{}, err
		}
		s.prev = &first
	}
	if s.haveRate && cur.at.Sub(s.prev.at) < minInterval {
		return s.lastCPU, s.lastNet, nil
	}
	s.lastCPU, s.lastNet = computeRates(*s.prev, cur)
	s.prev, s.haveRate = &cur, true
	return s.lastCPU, s.lastNet, nil
}

// computeRates turns two readings into CPU percent and bytes per second.
// Counters that went backwards (an interface re-created, a 32-bit counter
// wrapped) contribute nothing rather than a huge bogus rate.
func computeRates(prev, cur counters) (float64, Network) {
	var cpu float64
	if cur.cpu.total > prev.cpu.total && cur.cpu.busy >= prev.cpu.busy {
		cpu = round2((cur.cpu.busy - prev.cpu.busy) / (cur.cpu.total - prev.cpu.total) * 100)
		cpu = math.Min(cpu, 100)
	}
	var n Network
	secs := cur.at.Sub(prev.at).Seconds()
	if secs <= 0 {
		return cpu, n
	}
	var rx, tx uint64
	for name, c := range cur.net {
		p, ok := prev.net[name]
		if !ok {
			continue
		}
		if c[0] >= p[0] {
			rx += c[0] - p[0]
		}
		if c[1] >= p[1] {
			tx += c[1] - p[1]
		}
	}
	n.RxBytesPerSec = round2(float64(rx) / secs)
	n.TxBytesPerSec = round2(float64(tx) / secs)
	return cpu, n
}

// readCounters reads /proc/stat and /proc/net/dev through procfs. Errors
// name the file, since a fixture root or a locked-down /proc is the usual
// cause.
func (s *Sampler) readCounters() (counters, error) {
	c := counters{at: s.now()}
	fs, err := procfs.NewFS(s.procRoot)
	if err != nil {
		return c, fmt.Errorf("sysinfo: %w", err)
	}
	st, err := guard(fs.Stat)
	if err != nil {
		return c, fmt.Errorf("sysinfo: read %s: %w", filepath.Join(s.procRoot, "stat"), err)
	}
	c.cpu = cpuTimesOf(st.CPUTotal)
	nd, err := guard(fs.NetDev)
	if err != nil {
		return c, fmt.Errorf("sysinfo: read %s: %w", filepath.Join(s.procRoot, "net", "dev"), err)
	}
	c.net = netCountersOf(nd)
	return c, nil
}

func (s *Sampler) readMeminfo() (meminfo, error) {
	fs, err := procfs.NewFS(s.procRoot)
	if err != nil {
		return meminfo{}, fmt.Errorf("sysinfo: %w", err)
	}
	path := filepath.Join(s.procRoot, "meminfo")
	mi, err := guard(fs.Meminfo)
	if err != nil {
		return meminfo{}, fmt.Errorf("sysinfo: read %s: %w", path, err)
	}
	m, err := meminfoOf(mi)
	if err != nil {
		return meminfo{}, fmt.Errorf("sysinfo: parse %s: %w", path, err)
	}
	return m, nil
}

func (s *Sampler) readUptime() (int64, error) {
	path := filepath.Join(s.procRoot, "uptime")
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: %w", err)
	}
	up, err := parseUptime(data)
	if err != nil {
		return 0, fmt.Errorf("sysinfo: parse %s: %w", path, err)
	}
	return up, nil
}

// hostname prefers the kernel's UTS name under procRoot so fixtures can
// supply one; a missing file is not worth failing the dashboard for.
func (s *Sampler) hostname() string {
	if data, err := os.ReadFile(filepath.Join(s.procRoot, "sys", "kernel", "hostname")); err == nil {
		if h := strings.TrimSpace(string(data)); h != "" {
			return h
		}
	}
	h, _ := os.Hostname()
	return h
}

// storage reports the filesystem holding dir the way df does: used is
// total minus free, and the percentage is of the space available to
// unprivileged users (used+avail), so reserved root blocks do not make a
// full disk look 95 % used.
func storage(dir string) (used, total uint64, pct float64, err error) {
	st, err := statfs(dir)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("sysinfo: statfs %s: %w", dir, err)
	}
	total = st.blocks * st.blockSize
	free := st.free * st.blockSize
	avail := st.avail * st.blockSize
	used = total - min(free, total)
	return used, total, percent(used, used+avail), nil
}

// fsStat is the part of statfs(2) storage needs, in one type for every OS:
// the kernel structures differ in field names and widths.
type fsStat struct {
	blockSize           uint64 // unit of the three counts
	blocks, free, avail uint64
}

func percent(part, whole uint64) float64 {
	if whole == 0 {
		return 0
	}
	return round2(float64(part) / float64(whole) * 100)
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }

// cpuWindow is the shortest span CPUPercent measures over.
const cpuWindow = time.Second

// CPUPercent returns the machine's CPU use over the last second or so,
// without waiting: the compression rule asks on every publish, so /proc is
// read at most once per cpuWindow and the last figure is returned between
// reads. It returns 0 until two readings exist, and the last figure when
// /proc cannot be read.
func (s *Sampler) CPUPercent() float64 {
	s.cpuMu.Lock()
	defer s.cpuMu.Unlock()
	now := s.now()
	if s.cpuPrev != nil && now.Sub(s.cpuPrev.at) < cpuWindow {
		return s.cpuLast
	}
	cur, err := s.readCounters()
	if err != nil {
		return s.cpuLast
	}
	if s.cpuPrev != nil {
		s.cpuLast, _ = computeRates(*s.cpuPrev, cur)
	}
	s.cpuPrev = &cur
	return s.cpuLast
}
