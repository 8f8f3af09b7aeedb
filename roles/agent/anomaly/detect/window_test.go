package detect

import (
	"cmp"
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

func TestScaleFloor(t *testing.T) {
	tests := []struct {
		name   string
		q, mag float64
		want   float64
	}{
		{"resolution wins", 1.5, 100, 0.5},
		{"relative wins", 0, 4, 4e-6},
		{"negative magnitude", 0, -2e6, 2},
		{"absolute at zero", 0, 0, absFloor},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := scaleFloor(tt.q, tt.mag); got != tt.want {
				t.Errorf("scaleFloor(%v, %v) = %v, want %v", tt.q, tt.mag, got, tt.want)
			}
		})
	}
}

// TestTToZ checks Wallace's approximation against tail probabilities of
// Student's t integrated numerically (z of equal upper tail).
func TestTToZ(t *testing.T) {
	tests := []struct{ t, nu, z float64 }{
		{4, 10, 3.021},
		{4, 19, 3.365},
		{6, 19, 4.440},
		{10, 50, 7.378},
		{4, 119, 3.866},
	}
	for _, tt := range tests {
		if got := tToZ(tt.t, tt.nu); math.Abs(got-tt.z) > 0.01*tt.z {
			t.Errorf("tToZ(%v, %v) = %.3f, want %.3f within 1%%", tt.t, tt.nu, got, tt.z)
		}
	}
	if got := tToZ(4, 1e9); math.Abs(got-4) > 1e-3 {
		t.Errorf("tToZ with huge dof = %v, want the t itself", got)
	}
	if got := score(0, 0, 0, 1, 0); got != 0 {
		t.Errorf("score of a zero distance = %v, want 0", got)
	}
}

// TestBiweightScale: on rounded Gaussian data the MAD is pulled down to a
// whole number while the biweight stays near the true σ, and a far
// outlier does not move it.
func TestBiweightScale(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	vals := make([]float64, 2000)
	for i := range vals {
		vals[i] = math.Round(10 + 2*r.NormFloat64())
	}
	vals[0] = 10000
	var sc []float64
	s := summarize(vals, &sc)
	if got := madToSigma * s.mad; math.Abs(got-2) < 0.3 {
		t.Fatalf("1.4826·MAD = %v: the data no longer shows the integer bias", got)
	}
	if math.Abs(s.robust-2) > 0.15 {
		t.Errorf("biweight scale = %v, want 2 ± 0.15", s.robust)
	}
	if got := biweightScale([]float64{3, 3, 3, 4}, 3, 0, 0.5); got != 0.5 {
		t.Errorf("biweight with MAD 0 = %v, want the standard deviation 0.5", got)
	}
}

func TestRing(t *testing.T) {
	r := ring{size: 3}
	for i := range 5 {
		r.push(float64(i))
	}
	got := slices.Sorted(slices.Values(r.buf))
	if !slices.Equal(got, []float32{2, 3, 4}) {
		t.Fatalf("ring holds %v, want the last three", got)
	}
	if cap(r.buf) != 3 {
		t.Errorf("a full ring of 3 has capacity %d, want exactly 3", cap(r.buf))
	}
}

func TestNarrow(t *testing.T) {
	tests := []struct {
		in   float64
		want float32
	}{
		{1.5, 1.5},
		{-2, -2},
		{1e100, math.MaxFloat32},
		{-1e100, -math.MaxFloat32},
		{5e-324, 0},
	}
	for _, tt := range tests {
		if got := narrow(tt.in); got != tt.want {
			t.Errorf("narrow(%g) = %g, want %g", tt.in, got, tt.want)
		}
	}
}

// TestOrderedSummaryMatchesSelection pushes samples with many ties into
// windows of several sizes, summarising at the detector's pace and at
// random, and checks that the order kept by updateOrder is the window
// sorted (equal values oldest first) and that the summary read through it
// equals summarize's: the same median, MAD, mean and standard deviation,
// and the biweight scale but for the rounding of its sum.
func TestOrderedSummaryMatchesSelection(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, size := range []int{1, 2, 3, 10, 60, 120, maxOrdered} {
		for _, every := range []int{0, 1, 7} {
			w := &ring{size: int16(size)}
			var scratch []float64
			var ages []int
			for k := range 5 * size {
				if k < size {
					ages = append(ages, k)
				} else {
					ages[w.next] = k
				}
				w.push(math.Round(r.NormFloat64() * 4))
				if every == 0 {
					if w.summary(&scratch); w.stale != 0 {
						continue // the cached statistics still stand
					}
				} else if r.IntN(every) == 0 {
					w.stats = w.fresh(&scratch)
					w.stale, w.valid = 0, true
				} else {
					continue
				}
				want := slices.Clone(w.order)
				slices.SortStableFunc(want, func(a, b uint8) int {
					if c := cmp.Compare(w.buf[a], w.buf[b]); c != 0 {
						return c
					}
					return cmp.Compare(ages[a], ages[b])
				})
				if !slices.Equal(w.order, want) || len(w.order) != len(w.buf) {
					t.Fatalf("size %d, push %d: order %v, want %v", size, k, w.order, want)
				}
				got, ref := w.stats, summarize(w.buf, &scratch)
				if got.median != ref.median || got.mad != ref.mad || got.mean != ref.mean || got.std != ref.std || got.n != ref.n ||
					math.Abs(got.robust-ref.robust) > 1e-12*ref.robust {
					t.Fatalf("size %d, push %d: %+v, want %+v", size, k, got, ref)
				}
			}
		}
	}
}

// TestScorerMatchesScore checks that the scorers' cached factors give
// score's figures to the bit, inside the table and beyond it.
func TestScorerMatchesScore(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := range scorerTable + 20 {
		for range 20 {
			d, scale := math.Abs(r.NormFloat64()*5), 0.1+r.Float64()*3
			if r.IntN(10) == 0 {
				d = 0
			}
			if got, want := meanScorer.score(d, scale, n), score(d, scale, n, 1, float64(n-1)); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("mean, n=%d d=%v scale=%v: %v, want %v", n, d, scale, got, want)
			}
			if got, want := medianScorer.score(d, scale, n), score(d, scale, n, medianInflate, biweightDOF(n)); got != want && !(math.IsNaN(got) && math.IsNaN(want)) {
				t.Fatalf("median, n=%d d=%v scale=%v: %v, want %v", n, d, scale, got, want)
			}
		}
	}
}

// TestResolveMatchesEveryZ checks that resolve, which computes only the z
// values that can matter, flags the same methods and reports the same
// strongest score as computing all three.
func TestResolveMatchesEveryZ(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	scorers := []*scorer{meanScorer, medianScorer, medianScorer}
	for k := range 200000 {
		var stats [3]tStat
		want := 0.0
		wantMask := 0
		threshold := []float64{3, 4, 5, 2.5}[k%4]
		base := math.Abs(r.NormFloat64() * 3)
		for i := range stats {
			if r.IntN(6) == 0 {
				continue // not scored
			}
			d := base
			switch r.IntN(3) {
			case 0:
				d = math.Abs(r.NormFloat64() * 5)
			case 1:
				d = base * (1 + r.NormFloat64()*1e-3)
			}
			if r.IntN(50) == 0 {
				d = 0
			}
			n := []int{20, 60, 120, 300, 19}[r.IntN(5)]
			stats[i] = scorers[i].stat(d, 1, n)
			z := stats[i].z()
			if z > threshold {
				wantMask |= 1 << i
			}
			want = max(want, z)
		}
		mask, got := resolve(&stats, threshold)
		if mask != wantMask || got != want {
			t.Fatalf("case %d: mask %b strongest %v, want %b %v (%+v)", k, mask, got, wantMask, want, stats)
		}
	}
	nan := [3]tStat{{t: 1, nu: 10, wallace: 1, scored: true}, {t: math.NaN(), nu: 10, wallace: 1, scored: true}}
	if _, got := resolve(&nan, 4); !math.IsNaN(got) {
		t.Errorf("a NaN statistic gave strongest %v, want NaN as max gives", got)
	}
}

// TestConstantWindow checks that a window whose samples are all equal is
// summarised as summarize and the ordered summary would, to the bit
// (signs of zeros included), and that its order is the oldest first.
func TestConstantWindow(t *testing.T) {
	values := []float32{0, float32(math.Copysign(0, -1)), 1.5, -3, 1e-45, -1e-45, math.MaxFloat32, -math.MaxFloat32, 1013, 0.1}
	bits := func(s summary) [5]uint64 {
		return [5]uint64{math.Float64bits(s.mean), math.Float64bits(s.std), math.Float64bits(s.median), math.Float64bits(s.mad), math.Float64bits(s.robust)}
	}
	var scratch []float64
	for _, size := range []int{1, 2, 3, 60, 119, 120, maxOrdered, MaxWindowSize} {
		for _, v := range values {
			for _, pushes := range []int{size / 2, size, size + size/3 + 1} {
				if pushes == 0 {
					continue
				}
				w := &ring{size: int16(size)}
				for range pushes {
					w.push(float64(v))
				}
				got := w.fresh(&scratch)
				want := summarize(w.buf, &scratch)
				if bits(got) != bits(want) || got.n != want.n {
					t.Errorf("size %d, %d pushes of %g: %+v, want %+v", size, pushes, v, got, want)
				}
				if size > maxOrdered {
					continue
				}
				o := &ring{buf: w.buf, next: w.next, size: w.size}
				o.buildOrder()
				if ordered := o.orderedSummary(); bits(got) != bits(ordered) {
					t.Errorf("size %d, %d pushes of %g: %+v, ordered summary %+v", size, pushes, v, got, ordered)
				}
				if !slices.Equal(w.order, o.order) {
					t.Errorf("size %d, %d pushes of %g: order %v, want %v", size, pushes, v, w.order, o.order)
				}
			}
		}
	}
}
