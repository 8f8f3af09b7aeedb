package detect

import "math"

// ring is a fixed-capacity window of the most recent samples, stored as
// float32: half the memory, and a residual's rounding (6e-8 of it) is far
// below the sampling error of any statistic of the window. Its buffer
// grows by doubling up to exactly the capacity, so a slot that is never
// visited costs nothing and a full one carries no slack. It caches its
// summary (see stats).
type ring struct {
	buf  []float32
	next int32
	size int32
	// stale counts the pushes since stats was computed; valid is false
	// until it is computed once and after a reset.
	stale int32
	valid bool

	stats summary
}

// refreshDivisor sets how stale a window's cached statistics may be: they
// are recomputed once len/refreshDivisor samples arrived since the last
// time (every sample below refreshDivisor samples). Two medians of a
// window are the detector's main cost. Replacing a quarter of a
// stationary window moves its median by about 0.7 of the median's own
// sampling error (the spread of the difference of two estimates sharing
// three quarters of their samples), and a level change reaches the scores
// through the series level at once, not through the windows. Refreshing
// every quarter instead of every eighth took 35-40 % off the detector's
// CPU with the same precision and recall on the recorded series.
const refreshDivisor = 4

func (r *ring) push(x float64) {
	r.stale++
	v := narrow(x)
	if n := len(r.buf); n < int(r.size) {
		if n == cap(r.buf) {
			grown := make([]float32, n, min(int(r.size), max(8, 2*n)))
			copy(grown, r.buf)
			r.buf = grown
		}
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.size
}

// narrow stores x as a float32, clamped to its range: a residual beyond
// ±3.4e38 (readings near MaxMagnitude) keeps its sign and stays finite.
func narrow(x float64) float32 {
	return float32(max(-math.MaxFloat32, min(math.MaxFloat32, x)))
}

// len is the number of samples; a nil ring (a slot's released window)
// has none.
func (r *ring) len() int {
	if r == nil {
		return 0
	}
	return len(r.buf)
}

// samples is the window's samples in no particular order.
func (r *ring) samples() []float32 {
	if r == nil {
		return nil
	}
	return r.buf
}

// summary returns the window's statistics, recomputed when missing or
// when refreshDivisor-th of the window arrived since.
func (r *ring) summary(scratch *[]float64) summary {
	if !r.valid || int(r.stale) >= max(1, len(r.buf)/refreshDivisor) {
		r.stats = summarize(r.buf, scratch)
		r.stale, r.valid = 0, true
	}
	return r.stats
}

// summary is a baseline's statistics. n is the number of samples behind
// the scale estimates (capped at the window for a restored baseline), and
// robust the biweight scale the mad method divides by.
type summary struct {
	mean, std, median, mad, robust float64
	n                              int
}

// packedSummary is a summary kept in float32: 24 bytes instead of 48 for
// each hour slot whose samples were released.
type packedSummary struct {
	mean, std, median, mad, robust float32
	n                              int32
}

func pack(s summary) packedSummary {
	return packedSummary{narrow(s.mean), narrow(s.std), narrow(s.median), narrow(s.mad), narrow(s.robust), int32(s.n)}
}

func (p packedSummary) unpack() summary {
	return summary{mean: float64(p.mean), std: float64(p.std), median: float64(p.median), mad: float64(p.mad), robust: float64(p.robust), n: int(p.n)}
}

// Constants of the robust scale (docs/anomaly.md, "Methods").
const (
	// madToSigma turns a MAD into a standard deviation for Gaussian data.
	madToSigma = 1.4826
	// biweightC is the biweight tuning constant: samples further than
	// biweightC MADs from the median get no weight.
	biweightC = 9.0
	// biweightDOFLoss sets the degrees of freedom of a biweight scale from
	// n samples to n - 6. Its asymptotic efficiency (0.87) overstates
	// them on small windows: simulated on Gaussian samples, the 4σ tail
	// of the new-reading statistic matches Student's t with 4.4 degrees
	// of freedom at n = 10, 9.1 at 15, 15.5 at 20, 28 at 30 and 60 at 60,
	// so n - 6 is on the safe side from 10 to 120 samples.
	biweightDOFLoss = 6
)

// biweightDOF is the degrees of freedom of a biweight scale from n samples.
func biweightDOF(n int) float64 { return float64(max(n-biweightDOFLoss, 1)) }

// summarize computes mean, sample standard deviation, median, MAD and the
// biweight scale of vals. scratch is reused so that a steady state
// allocates nothing.
func summarize[T float32 | float64](vals []T, scratch *[]float64) summary {
	s := (*scratch)[:0]
	for _, v := range vals {
		s = append(s, float64(v))
	}
	*scratch = s
	return summarizeOwned(s)
}

// summarizeOwned is summarize of samples it may reorder and overwrite.
func summarizeOwned(s []float64) summary {
	n := len(s)
	if n == 0 {
		return summary{}
	}
	var sum float64
	for _, v := range s {
		sum += v
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range s {
		d := v - mean
		ss += d * d
	}
	var std float64
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	med := median(s)
	for i, v := range s {
		s[i] = math.Abs(v - med)
	}
	mad := median(s)
	// The biweight depends on each sample's distance from the median
	// only, which s now holds.
	return summary{mean: mean, std: std, median: med, mad: mad, robust: biweightScale(s, 0, mad, std), n: n}
}

// biweightScale is Tukey's biweight midvariance, as a standard deviation.
// Unlike 1.4826·MAD it uses every sample near the median, so it is nearly
// as precise as the standard deviation on small windows and it is not
// pulled down on integer registers, whose MAD jumps between whole
// numbers; samples beyond biweightC MADs (spikes, bursts) get no weight.
// A MAD of zero (the series sits on one value more than half the time)
// leaves only the standard deviation.
func biweightScale[T float32 | float64](vals []T, med, mad, std float64) float64 {
	if mad <= 0 {
		return std
	}
	var num, den float64
	for _, v := range vals {
		d := float64(v) - med
		u := d / (biweightC * mad)
		if u2 := u * u; u2 < 1 {
			w := 1 - u2
			w2 := w * w
			num += d * d * w2 * w2
			den += w * (1 - 5*u2)
		}
	}
	if den <= 0 {
		return madToSigma * mad
	}
	return math.Sqrt(float64(len(vals))*num) / den
}

// median reorders a and returns its median in expected O(n).
func median(a []float64) float64 {
	n := len(a)
	k := n / 2
	hi := selectK(a, k)
	if n%2 == 1 {
		return hi
	}
	// After selection a[:k] holds the k smallest: the lower middle is their max.
	lo := a[0]
	for _, v := range a[1:k] {
		lo = max(lo, v)
	}
	return lo + (hi-lo)/2
}

// selectK partially sorts a so that a[k] is the k-th smallest and every
// element before it is not larger (Hoare's quickselect, middle pivot).
func selectK(a []float64, k int) float64 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] < p {
				i++
			}
			for a[j] > p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return a[k]
		}
	}
	return a[k]
}

// Scale floor (docs/anomaly.md, "Scale floor"): a scale estimate is never
// taken below a third of the series' resolution, so that one step of an
// integer register scores about 3 and stays under the medium threshold
// while two steps pass it, nor below relFloor of the magnitude of the
// value (float32 registers jitter by 6e-8 of it), nor below absFloor.
const (
	relFloor = 1e-6
	absFloor = 1e-12
)

// scaleFloor is the smallest scale a score divides by, for values of
// magnitude mag on a series of resolution q (0 when unknown).
func scaleFloor(q, mag float64) float64 {
	return max(q/3, relFloor*math.Abs(mag), absFloor)
}

// score is the method score of a distance d from a center estimated from
// n samples, with scale estimated with dof degrees of freedom, in standard
// normal units: the t statistic of a new observation (its distance over
// the prediction spread, which includes the center's own uncertainty
// inflate/n) turned into the z of equal tail probability. On a small
// window a 4σ distance is far likelier than under a normal law; the
// conversion keeps the false-alarm rate of a threshold the same whatever
// the window holds.
func score(d, scale float64, n int, inflate, dof float64) float64 {
	if d == 0 {
		return 0
	}
	t := d / (scale * math.Sqrt(1+inflate/float64(n)))
	return tToZ(t, dof)
}

// tToZ is Wallace's (1959) normal approximation of Student's t with nu
// degrees of freedom: the z of equal tail probability, within 1% for
// nu ≥ 5 over the range that matters here (docs/anomaly.md).
func tToZ(t, nu float64) float64 {
	if nu <= 0 {
		return 0
	}
	return (8*nu + 1) / (8*nu + 3) * math.Sqrt(nu*math.Log1p(t*t/nu))
}
