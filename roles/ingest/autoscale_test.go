package ingest

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func TestScalerDecide(t *testing.T) {
	cfg := config.Autoscale{MinWorkers: 2, MaxWorkers: 4, LagTargetMS: 5000, LagScaleUpMS: 2000, LagCriticalMS: 10000,
		ScaleDownStableChecks: 3, CooldownMS: 3000, DBBlockPct: 80}
	t0 := time.Unix(1_700_000_000, 0)
	calm := signals{lagMS: 100, poolPct: 10}
	tests := []struct {
		name    string
		steps   []signals
		every   time.Duration
		workers int
		want    []int
	}{
		{"lag scales up, one per cycle, respecting the cooldown", []signals{{lagMS: 3000}, {lagMS: 3000}, {lagMS: 3000}}, time.Second, 2, []int{1, 0, 0}},
		{"after the cooldown it scales again", []signals{{lagMS: 3000}, {lagMS: 3000}}, 4 * time.Second, 2, []int{1, 1}},
		{"critical lag ignores the cooldown", []signals{{lagMS: 3000}, {lagMS: 20000}}, time.Second, 2, []int{1, 1}},
		{"never above the maximum", []signals{{lagMS: 20000}}, time.Second, 4, []int{0}},
		{"a saturated pool blocks scaling up", []signals{{lagMS: 3000, poolPct: 90}}, time.Second, 2, []int{0}},
		{"a deep stream scales up", []signals{{depthPct: 70}}, time.Second, 2, []int{1}},
		{"stream store memory scales up", []signals{{memPct: 80}}, time.Second, 2, []int{1}},
		{"scale down only after stable checks", []signals{calm, calm, calm, calm}, 4 * time.Second, 3, []int{0, 0, -1, 0}},
		{"never below the minimum", []signals{calm, calm, calm}, 4 * time.Second, 2, []int{0, 0, 0}},
		{"a busy sample resets the calm count", []signals{calm, calm, {lagMS: 1000}, calm, calm}, 4 * time.Second, 3, []int{0, 0, 0, 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScaler(cfg)
			s.lastChange = t0.Add(-time.Hour)
			now := t0
			w := tt.workers
			for i, sig := range tt.steps {
				got := s.decide(now, sig, w)
				if got != tt.want[i] {
					t.Fatalf("step %d: decide = %d, want %d", i, got, tt.want[i])
				}
				w += got
				now = now.Add(tt.every)
			}
		})
	}
}
