package detect

import (
	"runtime"
	"strconv"
	"testing"
	"time"
)

// TestMemoryPerSeries measures the heap a series holds (docs/anomaly.md,
// "Memory"): after one hour and after 24 hours, when every hour slot has
// been filled, for a series sampled at least windowSize times an hour
// (the agent's 1 s polls; 121 readings an hour give the same state) and
// for one sampled once a minute, whose hour slots keep their windows
// across days.
func TestMemoryPerSeries(t *testing.T) {
	const n = 250
	tests := []struct {
		name    string
		hours   int
		perHour int
		budget  int // bytes per series
	}{
		{"dense, 1 hour", 1, 121, 2000},
		{"dense, 24 hours", 24, 121, 4000},
		{"once a minute, 24 hours", 24, 60, 12500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
					// Values do not change the state's size; a few
					// distinct ones keep the test quick.
					batch[j].Value = 50 + float64((k+j)%7)
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
