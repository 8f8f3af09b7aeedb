package api

import (
	"log/slog"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/metrics"
)

// BenchmarkLastSeenTouch is the cost lastSeen adds to each telemetry
// message, from the subscriber's parallel workers.
func BenchmarkLastSeenTouch(b *testing.B) {
	s := newLastSeen(nil, slog.New(slog.DiscardHandler), newStatusMetrics(metrics.NewRegistry()), time.Second)
	tenant, agents := "vOaHL7U7SpaPj0eHtIR9XA", []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8"}
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			s.touch(tenant, agents[i%len(agents)])
			i++
		}
	})
}

// TestLastSeenKeepsLatest: touches coalesce to the latest time per agent,
// and a failed flush puts its times back without hiding newer ones.
func TestLastSeenKeepsLatest(t *testing.T) {
	s := newLastSeen(nil, slog.New(slog.DiscardHandler), newStatusMetrics(metrics.NewRegistry()), time.Second)
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }
	s.touch("t", "a")
	now = now.Add(time.Second)
	s.touch("t", "a")
	s.touch("t", "b")
	if len(s.pending) != 2 || !s.pending[seenKey{"t", "a"}].Equal(now) {
		t.Fatalf("pending = %v", s.pending)
	}
	failed := map[seenKey]time.Time{{"t", "a"}: now.Add(-time.Hour), {"t", "c"}: now}
	s.restore(failed)
	if !s.pending[seenKey{"t", "a"}].Equal(now) || !s.pending[seenKey{"t", "c"}].Equal(now) {
		t.Errorf("after restore: %v", s.pending)
	}
}
