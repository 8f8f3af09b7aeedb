package sysinfo

import (
	"context"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Memory is the answer of GET /v1/memory (docs/agent.md, section
// Settings, logs, diagnostics).
type Memory struct {
	Diagnostics   MemoryDiagnostics `json:"diagnostics"`
	RestartPolicy RestartPolicy     `json:"restartPolicy"`
}

// MemoryDiagnostics describes the agent's own memory. The field names are
// those of a JavaScript runtime, kept for the clients of GET /v1/memory;
// they map onto the Go runtime as follows:
//   - HeapUsed is runtime.MemStats.HeapAlloc (bytes of live and
//     not-yet-swept heap objects);
//   - HeapTotal is HeapSys (heap address space obtained from the OS);
//   - External is Sys - HeapSys: stacks, GC metadata, runtime structures
//     and other memory the runtime holds outside the heap;
//   - RSS is the resident set size from /proc, which also covers memory
//     the Go runtime does not manage (cgo, mapped files).
type MemoryDiagnostics struct {
	HeapUsed               uint64 `json:"heapUsed"`
	HeapTotal              uint64 `json:"heapTotal"`
	External               uint64 `json:"external"`
	RSS                    uint64 `json:"rss"`
	LeakSuspected          bool   `json:"leakSuspected"`
	ConsecutiveGrowthCount int    `json:"consecutiveGrowthCount"`
}

// RestartPolicy is derived from the runtime.maxMemoryMb setting.
type RestartPolicy struct {
	Enabled             bool    `json:"enabled"`
	ThresholdMb         float64 `json:"thresholdMb"`
	CriticalThresholdMb float64 `json:"criticalThresholdMb"`
}

// PolicyFor derives the restart policy from maxMemoryMb: disabled at 0 or
// below, otherwise the setting is the threshold and 1.2 times it the
// critical threshold.
func PolicyFor(maxMemoryMb int) RestartPolicy {
	if maxMemoryMb <= 0 {
		return RestartPolicy{}
	}
	return RestartPolicy{
		Enabled:             true,
		ThresholdMb:         float64(maxMemoryMb),
		CriticalThresholdMb: round2(float64(maxMemoryMb) * 1.2),
	}
}

// LeakGrowthThreshold is how many consecutive growths of the live heap
// make a leak suspected.
const LeakGrowthThreshold = 10

// heapSample is one reading of the live heap.
type heapSample struct {
	live     uint64 // bytes marked live by the last completed GC
	gcCycles uint64 // completed GC cycles so far
}

// MemoryMonitor watches the agent's live heap for steady growth and holds
// the restart policy reported by /v1/memory.
type MemoryMonitor struct {
	procRoot string
	interval time.Duration
	read     func() heapSample // replaced by tests

	mu       sync.Mutex
	policy   RestartPolicy
	last     heapSample
	haveLast bool
	growth   int
	leak     bool
}

// NewMemoryMonitor returns a monitor that samples every interval once Run
// is called; procRoot ("/proc" normally) is where RSS is read from.
func NewMemoryMonitor(procRoot string, interval time.Duration, maxMemoryMb int) *MemoryMonitor {
	if interval <= 0 {
		interval = 30 * time.Second
	}
	return &MemoryMonitor{
		procRoot: procRoot,
		interval: interval,
		read:     readHeapSample,
		policy:   PolicyFor(maxMemoryMb),
	}
}

// SetMaxMemoryMb replaces the restart policy after a settings change.
func (m *MemoryMonitor) SetMaxMemoryMb(maxMemoryMb int) {
	m.mu.Lock()
	m.policy = PolicyFor(maxMemoryMb)
	m.mu.Unlock()
}

// Policy returns the current restart policy.
func (m *MemoryMonitor) Policy() RestartPolicy {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.policy
}

// Run samples until ctx is done.
func (m *MemoryMonitor) Run(ctx context.Context) {
	t := time.NewTicker(m.interval)
	defer t.Stop()
	m.observe(m.read())
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			m.observe(m.read())
		}
	}
}

// observe compares the live heap only across completed GC cycles: the
// figure is what the last GC found reachable, so it is free of the
// allocation noise between collections, and without a new GC it has not
// changed at all. Any shrink ends the streak and clears the suspicion,
// because a leak does not give memory back.
func (m *MemoryMonitor) observe(s heapSample) {
	// Before the first GC the live heap reads 0, which is no baseline.
	if s.gcCycles == 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.haveLast {
		m.last, m.haveLast = s, true
		return
	}
	if s.gcCycles == m.last.gcCycles {
		return
	}
	switch {
	case s.live > m.last.live:
		m.growth++
	case s.live < m.last.live:
		m.growth = 0
	}
	m.leak = m.growth >= LeakGrowthThreshold
	m.last = s
}

// Snapshot returns the current diagnostics. It calls
// runtime.ReadMemStats, which briefly stops the world, so it is meant for
// the occasional /v1/memory request rather than the sampling loop.
func (m *MemoryMonitor) Snapshot() (Memory, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	ps, err := ReadProcess(m.procRoot, 0)
	if err != nil {
		return Memory{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return Memory{
		Diagnostics: MemoryDiagnostics{
			HeapUsed:               ms.HeapAlloc,
			HeapTotal:              ms.HeapSys,
			External:               ms.Sys - min(ms.HeapSys, ms.Sys),
			RSS:                    ps.RSSBytes,
			LeakSuspected:          m.leak,
			ConsecutiveGrowthCount: m.growth,
		},
		RestartPolicy: m.policy,
	}, nil
}

// readHeapSample uses runtime/metrics because, unlike ReadMemStats, it
// does not stop the world. Should a future runtime drop the live-heap
// metric, HeapAlloc stands in for it.
func readHeapSample() heapSample {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
	}
	metrics.Read(samples)
	var s heapSample
	if samples[1].Value.Kind() == metrics.KindUint64 {
		s.gcCycles = samples[1].Value.Uint64()
	}
	if samples[0].Value.Kind() == metrics.KindUint64 {
		s.live = samples[0].Value.Uint64()
		return s
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	s.live, s.gcCycles = ms.HeapAlloc, uint64(ms.NumGC)
	return s
}
