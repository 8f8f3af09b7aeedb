package detect

import (
	"math/rand/v2"
	"strconv"
	"testing"
	"time"
)

// BenchmarkObserve measures the steady path: warm series of noisy readings
// against full windows. "one" is one observation per call; "batch1000" one
// poll of 1000 registers per call, so its ns/op is per 1000 observations;
// both reuse their result slice through ObserveAppend.
func BenchmarkObserve(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	warm := func(b *testing.B, d *Detector, batch []Observation) {
		b.Helper()
		for i := range 2 * DefaultWindowSize {
			for j := range batch {
				batch[j].Value = 50 + r.NormFloat64()
				batch[j].At = t0.Add(time.Duration(i) * time.Second)
			}
			d.Observe(batch)
		}
	}
	b.Run("one", func(b *testing.B) {
		d := newDetector(b, Config{})
		batch := []Observation{{Metric: "temp", Device: "plc1"}}
		warm(b, d, batch)
		vals := make([]float64, 1024)
		for i := range vals {
			vals[i] = 50 + r.NormFloat64()
		}
		var out []Result
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			batch[0].Value = vals[i%len(vals)]
			out = d.ObserveAppend(out[:0], batch)
		}
	})
	b.Run("batch1000", func(b *testing.B) {
		d := newDetector(b, Config{})
		batch := make([]Observation, 1000)
		for i := range batch {
			batch[i] = Observation{Metric: "reg" + strconv.Itoa(i), Device: "plc1"}
		}
		warm(b, d, batch)
		var out []Result
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			for j := range batch {
				batch[j].Value = 50 + r.NormFloat64()
				batch[j].At = t0.Add(time.Duration(i) * time.Second)
			}
			out = d.ObserveAppend(out[:0], batch)
		}
	})
}
