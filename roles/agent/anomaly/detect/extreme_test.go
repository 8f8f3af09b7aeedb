package detect

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// TestExtremeValuesStayInRange: whatever finite values arrive, the
// published numbers stay finite and the scores in 0..1.
func TestExtremeValuesStayInRange(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	tests := []struct {
		name    string
		gen     func(i int) float64
		ignored int64
	}{
		{"largest alternating", func(i int) float64 { return MaxMagnitude * float64(1-2*(i%2)) }, 0},
		{"largest random", func(int) float64 { return (r.Float64()*2 - 1) * MaxMagnitude }, 0},
		{"tiny", func(int) float64 { return r.Float64() * 5e-324 }, 0},
		{"mixed scales", func(int) float64 { return math.Pow(10, float64(r.IntN(400)-300)) * float64(1-2*r.IntN(2)) }, 0},
		{"steady then beyond the range", func(i int) float64 {
			if i%10 == 9 {
				return math.MaxFloat64
			}
			return 5
		}, 50},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{})
			for i := range 500 {
				v := tt.gen(i)
				for _, res := range d.Observe([]Observation{{Metric: "m", Value: v, At: t0.Add(time.Duration(i) * time.Second)}}) {
					if !(res.AnomalyScore >= 0 && res.AnomalyScore <= 1) || !(res.TrendStrength >= 0 && res.TrendStrength <= 1) ||
						!(res.ForecastConfidence >= 0 && res.ForecastConfidence <= 1) || math.IsNaN(res.PredictedNext) {
						t.Fatalf("reading %d (%v): %+v", i, v, res)
					}
					if tt := res.TimeToThreshold; tt != nil && (math.IsNaN(tt.EstimatedSeconds) || math.IsNaN(tt.Threshold) || math.IsNaN(tt.Confidence)) {
						t.Fatalf("reading %d (%v): time_to_threshold %+v", i, v, tt)
					}
				}
			}
			if got := d.Stats().Stats.IgnoredValues; got != tt.ignored {
				t.Errorf("%d values ignored, want %d", got, tt.ignored)
			}
			for _, b := range d.Baselines() {
				if b.validate() != nil {
					t.Fatalf("exported baseline %+v would not restore: %v", b, b.validate())
				}
			}
		})
	}
}
