package anomaly

import (
	"math"
	"time"
)

// detector is a compiled condition: it judges each new sample of one series
// against what it has kept of that series.
type detector struct {
	typ        string
	op         string
	threshold  float64
	k          float64
	window     time.Duration
	minSamples int
	// rate is per second.
	rate float64
}

func compile(c Condition) detector {
	d := detector{typ: c.Type, op: c.Op, minSamples: c.MinSamples}
	if c.Threshold != nil {
		d.threshold = *c.Threshold
	}
	if c.K != nil {
		d.k = *c.K
	}
	d.window, _ = window(c.Window, false) // checked by normalize
	if c.Rate != nil {
		d.rate = *c.Rate
		if c.Per == "minute" {
			d.rate /= 60
		}
	}
	return d
}

// series is what a detector keeps of one series: a window of samples in
// time order, bounded by the detector's window and by MaxWindowSamples,
// with running sums for the z-score's mean and deviation. Sums are of the
// values less the first sample's, which keeps them small, so subtracting
// a leaving sample loses no precision that matters.
type series struct {
	// times are Unix nanoseconds: 8 bytes a sample rather than
	// time.Time's 24.
	times  []int64
	values []float64
	head   int // index of the oldest sample in the ring
	n      int
	shift  float64
	sum    float64
	sumSq  float64
}

func (s *series) at(i int) (time.Time, float64) {
	j := (s.head + i) % len(s.values)
	return time.Unix(0, s.times[j]), s.values[j]
}

// push adds a sample. A full window grows up to MaxWindowSamples when
// grow allows (the evaluator's sample budget has room), else drops its
// oldest sample.
func (s *series) push(t time.Time, v float64, grow bool) {
	if s.values == nil {
		s.times = make([]int64, 8)
		s.values = make([]float64, 8)
		s.shift = v
	}
	if s.n == len(s.values) {
		if s.n < MaxWindowSamples && grow {
			s.grow()
		} else {
			s.pop()
		}
	}
	j := (s.head + s.n) % len(s.values)
	s.times[j], s.values[j] = t.UnixNano(), v
	s.n++
	x := v - s.shift
	s.sum += x
	s.sumSq += x * x
}

func (s *series) grow() {
	size := min(2*len(s.values), MaxWindowSamples)
	times, values := make([]int64, size), make([]float64, size)
	for i := range s.n {
		j := (s.head + i) % len(s.values)
		times[i], values[i] = s.times[j], s.values[j]
	}
	s.times, s.values, s.head = times, values, 0
}

func (s *series) pop() {
	_, v := s.at(0)
	x := v - s.shift
	s.sum -= x
	s.sumSq -= x * x
	s.head = (s.head + 1) % len(s.values)
	s.n--
}

// trim drops the samples older than since.
func (s *series) trim(since time.Time) {
	for s.n > 0 {
		t, _ := s.at(0)
		if !t.Before(since) {
			return
		}
		s.pop()
	}
}

// stats are the mean and population standard deviation of the samples.
func (s *series) stats() (mean, std float64) {
	n := float64(s.n)
	m := s.sum / n
	variance := s.sumSq/n - m*m
	if variance < 0 {
		variance = 0
	}
	return m + s.shift, math.Sqrt(variance)
}

// observe judges v at t: whether the condition holds, and its score (the
// distance past a threshold, |z|, or |rate| per second). A sample older
// than the newest one kept is judged without entering the window, so a
// replayed reading cannot reorder it.
func (d *detector) observe(s *series, t time.Time, v float64, grow bool) (bool, float64) {
	switch d.typ {
	case TypeThreshold:
		if d.op == "above" {
			return v > d.threshold, v - d.threshold
		}
		return v < d.threshold, d.threshold - v
	case TypeZScore:
		s.trim(t.Add(-d.window))
		fired, score := false, 0.0
		// The sample is scored against the window before it enters it,
		// so a spike does not dampen its own z.
		if s.n >= d.minSamples {
			mean, std := s.stats()
			if std > 1e-12*math.Max(1, math.Abs(mean)) {
				score = math.Abs(v-mean) / std
				fired = score >= d.k
			}
		}
		if s.n == 0 || !t.Before(s.newest()) {
			s.push(t, v, grow)
		}
		return fired, score
	case TypeRate:
		if s.n > 0 && t.Before(s.newest()) {
			return false, 0
		}
		s.trim(t.Add(-d.window))
		s.push(t, v, grow)
		if s.n < 2 {
			return false, 0
		}
		t0, v0 := s.at(0)
		dt := t.Sub(t0).Seconds()
		if dt <= 0 {
			return false, 0
		}
		rate := (v - v0) / dt
		switch d.op {
		case "rising":
			return rate >= d.rate, math.Max(rate, 0)
		case "falling":
			return -rate >= d.rate, math.Max(-rate, 0)
		}
		return math.Abs(rate) >= d.rate, math.Abs(rate)
	}
	return false, 0
}

func (s *series) newest() time.Time {
	t, _ := s.at(s.n - 1)
	return t
}
