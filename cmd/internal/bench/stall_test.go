package bench

import (
	"strings"
	"testing"
	"time"
)

func TestStallDetector(t *testing.T) {
	type obs struct {
		at       time.Duration // since the start
		progress float64
		stalled  bool
	}
	tests := []struct {
		name  string
		after time.Duration
		obs   []obs
	}{
		{"moving", 30 * time.Second, []obs{{0, 1, false}, {20 * time.Second, 2, false}, {45 * time.Second, 3, false}, {70 * time.Second, 4, false}}},
		{"stops", 30 * time.Second, []obs{{0, 1, false}, {10 * time.Second, 5, false}, {30 * time.Second, 5, false}, {40 * time.Second, 5, true}}},
		{"moves again after a pause", 30 * time.Second, []obs{{0, 5, false}, {29 * time.Second, 5, false}, {31 * time.Second, 6, false}, {60 * time.Second, 6, false}, {61 * time.Second, 6, true}}},
		{"off", 0, []obs{{0, 5, false}, {time.Hour, 5, false}}},
		{"first reading never a stall", time.Nanosecond, []obs{{time.Hour, 0, false}}},
	}
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := stallDetector{after: tc.after}
			for i, o := range tc.obs {
				if got := d.observe(t0.Add(o.at), o.progress); got != o.stalled {
					t.Fatalf("observation %d (%s, %g): stalled = %v, want %v", i, o.at, o.progress, got, o.stalled)
				}
			}
		})
	}
}

func TestStallErrorNamesCauseAndFix(t *testing.T) {
	for _, dropped := range []float64{0, 1234} {
		msg := stallError(30*time.Second, 10000, 8600, 430000, 500000, dropped).Error()
		for _, want := range []string{"stalled", "30s", "430000 of 500000 rows", "max_queued_messages", "max_inflight_messages", "docs/benchmarks.md", "--stall-after 0"} {
			if !strings.Contains(msg, want) {
				t.Errorf("dropped %g: error lacks %q: %s", dropped, want, msg)
			}
		}
		if dropped > 0 && !strings.Contains(msg, "1234 messages dropped") {
			t.Errorf("error does not give the broker's count: %s", msg)
		}
	}
}
