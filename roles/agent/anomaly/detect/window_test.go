package detect

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func refMedian(a []float64) float64 {
	s := slices.Clone(a)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func TestSummarizeMatchesSort(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var scratch []float64
	for _, n := range []int{1, 2, 3, 4, 5, 10, 21, 120, 1000} {
		for range 20 {
			vals := make([]float64, n)
			for i := range vals {
				// Few distinct values exercise equal keys in the selection.
				vals[i] = math.Round(r.NormFloat64() * 3)
			}
			orig := slices.Clone(vals)
			got := summarize(vals, &scratch)
			med := refMedian(vals)
			dev := make([]float64, n)
			for i, v := range vals {
				dev[i] = math.Abs(v - med)
			}
			if got.median != med || got.mad != refMedian(dev) {
				t.Fatalf("n=%d: median %v mad %v, want %v %v", n, got.median, got.mad, med, refMedian(dev))
			}
			if !slices.Equal(vals, orig) {
				t.Fatalf("n=%d: summarize reordered its input", n)
			}
		}
	}
}

func TestDeviation(t *testing.T) {
	tests := []struct {
		name                   string
		x, center, scale, want float64
	}{
		{"plain", 13, 10, 1.5, 2},
		{"constant stays", 5, 5, 0, 0},
		{"constant within eps", 5 + 1e-12, 5, 0, 0},
		{"constant left", 5.001, 5, 0, math.Inf(1)},
		{"large center eps", 1e12 + 1, 1e12, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := deviation(tt.x, tt.center, tt.scale); got != tt.want {
				t.Errorf("deviation(%v, %v, %v) = %v, want %v", tt.x, tt.center, tt.scale, got, tt.want)
			}
		})
	}
}

func TestRing(t *testing.T) {
	r := ring{size: 3}
	for i := range 5 {
		r.push(float64(i))
	}
	got := slices.Sorted(slices.Values(r.buf))
	if !slices.Equal(got, []float64{2, 3, 4}) {
		t.Fatalf("ring holds %v, want the last three", got)
	}
	r.shift(10)
	if got := slices.Sorted(slices.Values(r.buf)); !slices.Equal(got, []float64{12, 13, 14}) {
		t.Fatalf("shifted ring holds %v", got)
	}
}
