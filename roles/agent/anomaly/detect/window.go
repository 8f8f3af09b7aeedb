package detect

import "math"

// ring is a fixed-capacity window of the most recent samples. Its buffer
// grows by append up to the capacity, so a slot that is never visited costs
// nothing.
type ring struct {
	buf  []float64
	next int
	size int
}

func (r *ring) push(x float64) {
	if len(r.buf) < r.size {
		r.buf = append(r.buf, x)
		return
	}
	r.buf[r.next] = x
	r.next = (r.next + 1) % r.size
}

func (r *ring) len() int { return len(r.buf) }

func (r *ring) reset() { r.buf, r.next = r.buf[:0], 0 }

func (r *ring) shift(off float64) {
	for i := range r.buf {
		r.buf[i] += off
	}
}

// summary is a baseline's statistics.
type summary struct {
	mean, std, median, mad float64
}

// summarize computes mean, sample standard deviation, median and MAD of
// vals. scratch is reused so that a steady state allocates nothing.
func summarize(vals []float64, scratch *[]float64) summary {
	n := len(vals)
	if n == 0 {
		return summary{}
	}
	var sum float64
	for _, v := range vals {
		sum += v
	}
	mean := sum / float64(n)
	var ss float64
	for _, v := range vals {
		d := v - mean
		ss += d * d
	}
	var std float64
	if n > 1 {
		std = math.Sqrt(ss / float64(n-1))
	}
	s := append((*scratch)[:0], vals...)
	med := median(s)
	for i, v := range vals {
		s[i] = math.Abs(v - med)
	}
	mad := median(s)
	*scratch = s
	return summary{mean: mean, std: std, median: med, mad: mad}
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

// deviation is |x-center|/scale in standard deviations, under the
// constant-signal rule of docs/anomaly.md: when the scale is within eps of
// zero, staying at the center scores 0 and leaving it scores +Inf.
func deviation(x, center, scale float64) float64 {
	eps := 1e-9 * max(1, math.Abs(center))
	d := math.Abs(x - center)
	if scale <= eps {
		if d <= eps {
			return 0
		}
		return math.Inf(1)
	}
	return d / scale
}

// robustScale is the MAD turned into a standard deviation estimate
// (1.4826·MAD for Gaussian data), or the standard deviation when the MAD is
// zero: a signal that sits on one value more than half the time has MAD 0
// without being constant.
func (s summary) robustScale() float64 {
	if r := 1.4826 * s.mad; r > 1e-9*max(1, math.Abs(s.median)) {
		return r
	}
	return s.std
}
