package sysinfo

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryMonitorGrowth(t *testing.T) {
	// Each step is (live bytes, completed GC cycles).
	type step struct{ live, gc uint64 }
	growing := func(n int) []step {
		out := []step{{live: 1000, gc: 1}}
		for i := 1; i <= n; i++ {
			out = append(out, step{live: 1000 + uint64(i)*100, gc: uint64(i) + 1})
		}
		return out
	}
	tests := []struct {
		name   string
		steps  []step
		growth int
		leak   bool
	}{
		{name: "first sample is only a baseline", steps: []step{{1000, 1}}, growth: 0},
		{name: "samples before the first GC are skipped", steps: []step{{0, 0}, {1000, 1}, {900, 1}}, growth: 0},
		{name: "nine growths", steps: growing(9), growth: 9, leak: false},
		{name: "ten growths", steps: growing(10), growth: 10, leak: true},
		{name: "shrink resets", steps: append(growing(10), step{live: 500, gc: 20}), growth: 0, leak: false},
		{name: "no GC in between is ignored", steps: append(growing(3), step{live: 99999, gc: 4}, step{live: 99999, gc: 4}), growth: 3},
		{name: "equal live heap keeps the streak", steps: append(growing(3), step{live: 1300, gc: 5}), growth: 3},
		{name: "streak continues after flat", steps: append(append(growing(9), step{live: 1900, gc: 11}), step{live: 2000, gc: 12}), growth: 10, leak: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMemoryMonitor("/proc", time.Second, 0)
			for _, s := range tt.steps {
				m.observe(heapSample{live: s.live, gcCycles: s.gc})
			}
			if m.growth != tt.growth || m.leak != tt.leak {
				t.Errorf("growth %d leak %v, want %d %v", m.growth, m.leak, tt.growth, tt.leak)
			}
		})
	}
}

func TestPolicyFor(t *testing.T) {
	tests := []struct {
		mb   int
		want RestartPolicy
	}{
		{0, RestartPolicy{}},
		{-5, RestartPolicy{}},
		{256, RestartPolicy{Enabled: true, ThresholdMb: 256, CriticalThresholdMb: 307.2}},
		{1000, RestartPolicy{Enabled: true, ThresholdMb: 1000, CriticalThresholdMb: 1200}},
	}
	for _, tt := range tests {
		if got := PolicyFor(tt.mb); got != tt.want {
			t.Errorf("PolicyFor(%d) = %+v, want %+v", tt.mb, got, tt.want)
		}
	}
}

func TestMemoryMonitorRunAndSnapshot(t *testing.T) {
	m := NewMemoryMonitor("/proc", 5*time.Millisecond, 512)
	var n atomic.Uint64
	m.read = func() heapSample {
		i := n.Add(1)
		return heapSample{live: i * 1000, gcCycles: i}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	deadline := time.Now().Add(5 * time.Second)
	for n.Load() < LeakGrowthThreshold+2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after cancel")
	}

	mem, err := m.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	d := mem.Diagnostics
	if !d.LeakSuspected || d.ConsecutiveGrowthCount < LeakGrowthThreshold {
		t.Errorf("steady growth not flagged: %+v", d)
	}
	if d.HeapUsed == 0 || d.HeapTotal < d.HeapUsed || d.RSS == 0 {
		t.Errorf("implausible figures: %+v", d)
	}
	if mem.RestartPolicy != PolicyFor(512) {
		t.Errorf("policy %+v", mem.RestartPolicy)
	}

	m.SetMaxMemoryMb(0)
	if m.Policy().Enabled {
		t.Error("policy still enabled after setting 0")
	}
}

func TestReadHeapSampleLive(t *testing.T) {
	runtime.GC()
	s := readHeapSample()
	if s.live == 0 || s.gcCycles == 0 {
		t.Errorf("live heap 0: %+v", s)
	}
}

func TestMemoryJSON(t *testing.T) {
	b, err := json.Marshal(Memory{RestartPolicy: PolicyFor(100)})
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"diagnostics":{"heapUsed":0,"heapTotal":0,"external":0,"rss":0,"leakSuspected":false,"consecutiveGrowthCount":0},` +
		`"restartPolicy":{"enabled":true,"thresholdMb":100,"criticalThresholdMb":120}}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
}
