package detect

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestMemoryPerSeries measures the heap a series holds (docs/anomaly.md,
// "Memory"): after one hour and after 24 hours, when every hour slot has
// been filled, for a series sampled at least windowSize times an hour
// (the agent's 1 s polls; 150 readings an hour give the same state) and
// for one sampled once a minute, whose hour slots keep their windows
// across days.
func TestMemoryPerSeries(t *testing.T) {
	const n = 200
	tests := []struct {
		name    string
		hours   int
		perHour int
		budget  int // bytes per series
	}{
		{"dense, 1 hour", 1, 150, 2600},
		{"dense, 24 hours", 24, 150, 5400},
		{"once a minute, 24 hours", 24, 60, 13500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := rand.New(rand.NewPCG(7, 7))
			batch := make([]Observation, n)
			for i := range batch {
				batch[i] = Observation{Metric: "reg" + strconv.Itoa(i), Device: "plc1"}
			}
			before := heapInUse()
			d := newDetector(t, Config{})
			var out []Result
			step := time.Hour / time.Duration(tt.perHour)
			for k := range tt.hours * tt.perHour {
				for j := range batch {
					batch[j].Value = 50 + r.NormFloat64()
					batch[j].At = t0.Add(time.Duration(k) * step)
				}
				out = d.ObserveAppend(out[:0], batch)
			}
			out = nil
			per := (heapInUse() - before) / n
			runtime.KeepAlive(d)
			t.Logf("%d bytes per series", per)
			if per > tt.budget {
				t.Errorf("%d bytes per series, budget %d", per, tt.budget)
			}
		})
	}
}

func heapInUse() int {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int(m.HeapAlloc)
}
