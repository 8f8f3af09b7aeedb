package ingest

import (
	"testing"
	"time"
)

func TestWindowP95(t *testing.T) {
	w := newWindow(100)
	if w.p95ms() != 0 {
		t.Error("empty window should report 0")
	}
	for i := 1; i <= 100; i++ {
		w.observe(time.Duration(i) * time.Millisecond)
	}
	if got := w.p95ms(); got != 95 {
		t.Errorf("p95 = %g, want 95", got)
	}
	for range 100 { // the old samples roll out
		w.observe(time.Millisecond)
	}
	if got := w.p95ms(); got != 1 {
		t.Errorf("p95 after roll-over = %g, want 1", got)
	}
}
