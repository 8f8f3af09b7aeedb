package detect

import (
	"bytes"
	"cmp"
	"math"
	"math/bits"
	"slices"
	"unsafe"
)

// ring is a fixed-capacity window of the most recent samples, stored as
// float32: half the memory, and a residual's rounding (6e-8 of it) is far
// below the sampling error of any statistic of the window. Its buffer
// grows by doubling up to exactly the capacity, so a slot that is never
// visited costs nothing and a full one carries no slack. It caches its
// summary (see stats).
type ring struct {
	buf []float32
	// order indexes buf in ascending order of value, equal values oldest
	// first, so that the median and the MAD need no selection (see
	// orderedSummary). It is built when the window is first summarised,
	// brought up to date at each summary (updateOrder), and released with
	// parkOrder when the series leaves the window's hour; nil for windows
	// larger than maxOrdered.
	order []uint8
	// next and size fit 16 bits (MaxWindowSize): with stale, the series
	// holding the ring of changes fits a smaller allocation size class.
	next int16
	size int16
	// stale counts the pushes since stats was computed, up to
	// math.MaxInt16 (any count from a quarter of the window on means the
	// same); valid is false until it is computed once.
	stale int16
	valid bool

	stats summary
}

// maxOrdered is the largest window kept in order: a byte indexes it.
// Larger windows (windowSize up to MaxWindowSize) select their medians
// instead.
const maxOrdered = 256

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
	if r.stale < math.MaxInt16 {
		r.stale++
	}
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
	// Not a modulo: an integer division per sample costs more than the
	// rest of the push.
	if r.next++; r.next == r.size {
		r.next = 0
	}
}

// updateOrder brings order up to date with the stale pushes since it was
// last updated: the entries of the samples they overwrote are dropped, the
// new samples sorted (insertion sort, a quarter of the window) and merged
// in. That is two passes over the window per summary, where keeping the
// order at every push cost two binary searches per sample and selecting
// the medians two selections per summary.
func (r *ring) updateOrder() {
	n := len(r.buf)
	p := int(r.stale)
	if r.order == nil || 2*p > n {
		r.buildOrder()
		return
	}
	buf := r.buf
	// The p newest samples, oldest first, sit at start, start+1, ...
	// (circularly): a window that is not full has next at 0. They are
	// sorted as keys, the value's order-preserving bits above the age t
	// above the index, so that equal values stay oldest first and the
	// sort compares integers in registers instead of loading samples
	// through indices.
	start := (int(r.next) + n - p) % n
	var keys [maxOrdered/2 + 1]uint64
	nk := keys[:p]
	for t := range nk {
		i := start + t
		if i >= n {
			i -= n
		}
		k := uint64(sortKey(buf[i]))<<16 | uint64(t)<<8 | uint64(i)
		u := t
		for u > 0 && nk[u-1] > k {
			nk[u] = nk[u-1]
			u--
		}
		nk[u] = k
	}
	const signShift = bits.UintSize - 1
	ord := r.order
	kept := 0
	for _, i := range ord {
		// A signed shift by the width less one is the sign: -1 for a
		// negative value, else 0.
		d := int(i) - start
		d += n & (d >> signShift) // wrapped, without a branch
		// Written unconditionally and counted without a branch (d-p is
		// negative for an overwritten sample): a quarter of the entries
		// go, at random places.
		ord[kept] = i
		kept += 1 + (d-p)>>signShift
	}
	if cap(ord) < n {
		grown := make([]uint8, kept, cap(buf))
		copy(grown, ord[:kept])
		ord = grown
	}
	ord = ord[:n]
	// Merge from the back; an equal value already kept is older, so it
	// stays first.
	i, j := kept-1, p-1
	var iv float32
	if i >= 0 {
		iv = buf[ord[i]]
	}
	jx := uint8(nk[j])
	jv := buf[jx]
	for w := n - 1; j >= 0; w-- {
		if i >= 0 && iv > jv {
			ord[w] = ord[i]
			if i--; i >= 0 {
				iv = buf[ord[i]]
			}
			continue
		}
		ord[w] = jx
		if j--; j >= 0 {
			jx = uint8(nk[j])
			jv = buf[jx]
		}
	}
	r.order = ord
}

// sortKey maps a float32 to bits in the same order (zeros of either sign
// equal); samples are never NaN.
func sortKey(v float32) uint32 {
	if v == 0 {
		v = 0 // -0 to +0
	}
	b := math.Float32bits(v)
	if b>>31 != 0 {
		return ^b
	}
	return b | 1<<31
}

// buildOrder sorts the window's indices by value, equal values oldest
// first.
func (r *ring) buildOrder() {
	n := len(r.buf)
	ord := make([]uint8, n, cap(r.buf))
	// Oldest first: a full window's oldest sample is at next.
	start := 0
	if n == int(r.size) {
		start = int(r.next)
	}
	for i := range ord {
		ord[i] = uint8((start + i) % n)
	}
	buf := r.buf
	slices.SortStableFunc(ord, func(a, b uint8) int { return cmp.Compare(buf[a], buf[b]) })
	r.order = ord
}

// parkOrder releases the order of a window that takes no samples for now
// (its hour has passed): a series read once a minute keeps up to 24
// windows, only the current one ordered. The next summary rebuilds it.
func (r *ring) parkOrder() {
	if r != nil {
		r.order = nil
	}
}

// narrow stores x as a float32, clamped to its range: a residual beyond
// ±3.4e38 (readings near MaxMagnitude) keeps its sign and stays finite.
func narrow(x float64) float32 {
	// Two comparisons that never fire on a sane reading, rather than the
	// built-in min and max, whose handling of NaN and signed zeros costs
	// a dozen instructions per sample (a NaN or a zero passes unchanged
	// either way).
	if x > math.MaxFloat32 {
		x = math.MaxFloat32
	} else if x < -math.MaxFloat32 {
		x = -math.MaxFloat32
	}
	return float32(x)
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
// when refreshDivisor-th of the window arrived since. They are the
// ring's own, valid until the next push: a pointer spares a reading two
// copies.
func (r *ring) summary(scratch *[]float64) *summary {
	if !r.valid || int(r.stale) >= max(1, len(r.buf)/refreshDivisor) {
		r.stats = r.fresh(scratch)
		r.stale, r.valid = 0, true
	}
	return &r.stats
}

// fresh computes the window's statistics now, from its order when the
// window is small enough to keep one. Only summary calls it: updateOrder
// relies on stale counting the pushes since the order was last updated.
func (r *ring) fresh(scratch *[]float64) summary {
	if len(r.buf) > 0 && constant(r.buf) {
		// A register that never changes (a setpoint, a status word, the
		// changes of a steady counter) needs no order maintenance and no
		// pass over its samples: its statistics are known.
		if r.size <= maxOrdered {
			r.ageOrder()
		}
		return constantSummary(r.buf[0], len(r.buf))
	}
	if r.size > maxOrdered || len(r.buf) == 0 {
		return summarize(r.buf, scratch)
	}
	r.updateOrder()
	return r.orderedSummary()
}

// constant reports whether the samples, at least one, all have the same
// bits.
func constant(buf []float32) bool {
	// Every sample has the bits of the one before it: the window's bytes
	// equal themselves shifted by a sample, which one vectorised
	// comparison tells, instead of a loop over the samples.
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(buf))), 4*len(buf))
	return bytes.Equal(b[4:], b[:len(b)-4])
}

// constantSummary is summarize's result, to the bit, for n samples of v:
// the sum of n copies of a float32 is exact in float64 (n < 2^29), so the
// mean is v, and every distance is zero. Only the signs of zeros need
// care: the sums start from +0, and an even n's median and MAD are
// midpoints, lo + (hi-lo)/2, which turn -0 into +0.
func constantSummary(v float32, n int) summary {
	x := float64(v)
	mean := x
	if x == 0 {
		mean = 0
	}
	med := x
	if n%2 == 0 {
		med = x + (x-x)/2
	}
	return summary{mean: mean, median: med, n: n}
}

// identity holds every index of an ordered window in its own place, the
// source ageOrder copies from.
var identity = func() (a [maxOrdered]uint8) {
	for i := range a {
		a[i] = uint8(i)
	}
	return a
}()

// ageOrder sets order to the samples oldest first, which is their order
// by value when they are all equal.
func (r *ring) ageOrder() {
	n := len(r.buf)
	ord := r.order
	if cap(ord) < n {
		ord = make([]uint8, n, cap(r.buf))
	}
	ord = ord[:n]
	// A full window's oldest sample is at next.
	start := 0
	if n == int(r.size) {
		start = int(r.next)
	}
	copy(ord, identity[start:n])
	copy(ord[n-start:], identity[:start])
	r.order = ord
}

// orderedSummary is summarize of the window read through its order: the
// median is the middle entry, and the MAD is found by walking outward
// from it, since distances from the median grow in both directions. The
// sums run over buf as summarize's do, so the figures are the same but
// for the rounding of the biweight's sum, which summarize adds up in the
// order its selection left.
func (r *ring) orderedSummary() summary {
	buf, ord := r.buf, r.order
	n := len(buf)
	var sum float64
	for _, v := range buf {
		sum += float64(v)
	}
	mean := sum / float64(n)
	k := n / 2
	med := float64(buf[ord[k]])
	if n%2 == 0 {
		lo := float64(buf[ord[k-1]])
		med = lo + (med-lo)/2
	}
	// Below j the samples are under the median, from j on not: the k-th
	// smallest distance (and the one before it, for an even n) is met
	// walking outward from j.
	j := k
	for j > 0 && float64(buf[ord[j-1]]) >= med {
		j--
	}
	for j < n && float64(buf[ord[j]]) < med {
		j++
	}
	i := j - 1
	// The next distance on each side, +Inf past the end.
	inf := math.Inf(1)
	dl, dr := inf, inf
	if i >= 0 {
		dl = med - float64(buf[ord[i]])
	}
	if j < n {
		dr = float64(buf[ord[j]]) - med
	}
	var prev, cur float64
	for range k + 1 {
		prev = cur
		if dl <= dr {
			cur, dl = dl, inf
			if i--; i >= 0 {
				dl = med - float64(buf[ord[i]])
			}
		} else {
			cur, dr = dr, inf
			if j++; j < n {
				dr = float64(buf[ord[j]]) - med
			}
		}
	}
	mad := cur
	if n%2 == 0 {
		mad = prev + (cur-prev)/2
	}
	std, robust := spreads(buf, mean, med, mad)
	return summary{mean: mean, std: std, median: med, mad: mad, robust: robust, n: n}
}

// spreads is meanStd's standard deviation and biweightScale in one pass
// over vals, with the same operations in the same order, so the same
// figures.
func spreads(vals []float32, mean, med, mad float64) (std, robust float64) {
	var ss float64
	var b biweight
	c := biweightC * mad
	if mad > 0 {
		for _, v := range vals {
			dm := float64(v) - mean
			ss += dm * dm
			b = b.add(float64(v)-med, c)
		}
	} else {
		for _, v := range vals {
			dm := float64(v) - mean
			ss += dm * dm
		}
	}
	n := len(vals)
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	if mad <= 0 {
		return std, std
	}
	return std, b.scale(n, mad)
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
	mean, std := meanStd(s)
	med := median(s)
	for i, v := range s {
		s[i] = math.Abs(v - med)
	}
	mad := median(s)
	// The biweight depends on each sample's distance from the median
	// only, which s now holds.
	return summary{mean: mean, std: std, median: med, mad: mad, robust: biweightScale(s, 0, mad, std), n: n}
}

// meanStd is the mean and the sample standard deviation of vals, which
// must not be empty.
func meanStd[T float32 | float64](vals []T) (mean, std float64) {
	var sum float64
	for _, v := range vals {
		sum += float64(v)
	}
	n := len(vals)
	mean = sum / float64(n)
	var ss float64
	for _, v := range vals {
		d := float64(v) - mean
		ss += d * d
	}
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	return mean, std
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
	var b biweight
	c := biweightC * mad
	for _, v := range vals {
		b = b.add(float64(v)-med, c)
	}
	return b.scale(len(vals), mad)
}

// biweight is the running sums of biweightScale.
type biweight struct{ num, den float64 }

// add takes a sample at distance d from the median, c = biweightC·MAD.
// By value, so that the sums stay in registers.
func (b biweight) add(d, c float64) biweight {
	u := d / c
	if u2 := u * u; u2 < 1 {
		w := 1 - u2
		w2 := w * w
		b.num += d * d * w2 * w2
		b.den += w * (1 - 5*u2)
	}
	return b
}

// scale is the biweight scale of n samples with a MAD above zero.
func (b biweight) scale(n int, mad float64) float64 {
	if b.den <= 0 {
		return madToSigma * mad
	}
	return math.Sqrt(float64(n)*b.num) / b.den
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
	// Comparisons rather than the built-in max, whose care for NaN and
	// signed zeros cost more than the rest of the function: q is never
	// NaN, a NaN mag gives NaN as max would, and no term is -0.
	f := q / 3
	if m := relFloor * math.Abs(mag); m > f || m != m {
		f = m
	}
	if f < absFloor {
		f = absFloor
	}
	return f
}

// atLeast is max(x, floor) for a floor that is a number above zero, as
// scaleFloor returns: a NaN x stays NaN.
func atLeast(x, floor float64) float64 {
	if x > floor || x != x {
		return x
	}
	return floor
}

// score is the method score of a distance d from a center estimated from
// n samples, with scale estimated with dof degrees of freedom, in standard
// normal units: the t statistic of a new observation (its distance over
// the prediction spread, which includes the center's own uncertainty
// inflate/n) turned into the z of equal tail probability. On a small
// window a 4σ distance is far likelier than under a normal law; the
// conversion keeps the false-alarm rate of a threshold the same whatever
// the window holds. It is the definition: the detector scores through the
// scorers and resolve, which are tested to give its figures to the bit.
func score(d, scale float64, n int, inflate, dof float64) float64 {
	if d == 0 {
		return 0
	}
	t := d / (scale * math.Sqrt(1+inflate/float64(n)))
	return tToZ(t, dof)
}

// scorer is score for one kind of center (inflate) and scale (dof), with
// the factors that depend on the number of samples alone computed once
// for the windows the detector keeps by default instead of at every
// reading: a square root and two divisions of the three per method.
type scorer struct {
	inflate float64
	dof     func(n int) float64
	f       [scorerTable]scoreFactors
}

// scorerTable covers windows of up to 256 samples (12 KB for both
// scorers); larger windows and stand-ins compute the factors each time.
const scorerTable = maxOrdered + 1

// scoreFactors are score's and tToZ's terms for one n.
type scoreFactors struct {
	// spread is the prediction spread over the scale, sqrt(1 + inflate/n).
	spread float64
	nu     float64
	// wallace is the leading factor of tToZ, (8nu+1)/(8nu+3).
	wallace float64
}

func newScorer(inflate float64, dof func(int) float64) *scorer {
	c := &scorer{inflate: inflate, dof: dof}
	for n := 1; n < scorerTable; n++ {
		nu := dof(n)
		c.f[n] = scoreFactors{spread: math.Sqrt(1 + inflate/float64(n)), nu: nu, wallace: (8*nu + 1) / (8*nu + 3)}
	}
	return c
}

// The scorers of the three methods: zscore divides by a standard
// deviation (n-1 degrees of freedom) around a mean, mad and rate by a
// biweight scale around a median.
var (
	meanScorer   = newScorer(1, func(n int) float64 { return float64(n - 1) })
	medianScorer = newScorer(medianInflate, biweightDOF)
)

// score is the package's score with c's inflate and dof, to the bit.
func (c *scorer) score(d, scale float64, n int) float64 {
	return c.stat(d, scale, n).z()
}

// stat is the t statistic of distance d, with what turns it into a z.
func (c *scorer) stat(d, scale float64, n int) tStat {
	if d == 0 {
		return tStat{}
	}
	var f scoreFactors
	if n > 0 && n < scorerTable {
		f = c.f[n]
	} else {
		nu := c.dof(n)
		f = scoreFactors{spread: math.Sqrt(1 + c.inflate/float64(n)), nu: nu, wallace: (8*nu + 1) / (8*nu + 3)}
	}
	if f.nu <= 0 {
		return tStat{}
	}
	return tStat{t: d / (scale * f.spread), nu: f.nu, wallace: f.wallace, scored: true}
}

// tStat is one method's t statistic of a reading; scored is false when
// its z is 0 (no distance, or no degrees of freedom).
type tStat struct {
	t, nu, wallace float64
	scored         bool
}

// z is tToZ(t, nu), to the bit.
func (s tStat) z() float64 {
	if !s.scored {
		return 0
	}
	return s.wallace * math.Sqrt(s.nu*math.Log1p(s.t*s.t/s.nu))
}

// bound is at least z: ln(1+y) <= y makes z at most wallace·|t|, and the
// margin covers the rounding of z's five operations many times over.
func (s tStat) bound() float64 {
	if !s.scored {
		return 0
	}
	return s.wallace * math.Abs(s.t) * (1 + 1e-12)
}

// resolve returns the methods whose z passes threshold (bit i for
// stats[i]) and the largest z, exactly as computing every z would. Only
// the z of the method with the largest bound, and of any other whose
// bound reaches the threshold or that largest z, is computed: on a
// normal reading one logarithm instead of three.
func resolve(stats *[3]tStat, threshold float64) (mask int, strongest float64) {
	if !stats[0].scored && !stats[1].scored && !stats[2].scored {
		// A reading at its baseline's center, as every reading of a
		// register that does not change is.
		return 0, 0
	}
	b := [3]float64{stats[0].bound(), stats[1].bound(), stats[2].bound()}
	top := 0
	if b[1] > b[top] {
		top = 1
	}
	if b[2] > b[top] {
		top = 2
	}
	strongest = stats[top].z()
	if strongest > threshold {
		mask |= 1 << top
	}
	for i := range stats {
		// Negated, so that a NaN bound is computed too.
		if i == top || (b[i] <= threshold && b[i] < strongest) {
			continue
		}
		z := stats[i].z()
		if z > threshold {
			mask |= 1 << i
		}
		strongest = max(strongest, z)
	}
	return mask, strongest
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
