package query

import (
	"math"
	"slices"
	"strconv"
)

// acc summarises the samples of one series over a stretch of time: one
// bucket as the database returns it, or several combined. The empty acc
// (n == 0) is combine's identity.
type acc struct {
	b             int64 // bucket start, µs (buckets only)
	n             int64 // samples
	sum, min, max float64
	ft, lt        int64   // first and last sample time, µs
	fv, lv        float64 // first and last value (counter functions)
	inc           float64 // increase with counter resets
}

// resetIncrease is the increase from a sample of value prev to the next
// of value cur: a decrease is a counter reset, after which the counter
// counted cur from zero (PromQL's rule).
func resetIncrease(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// combine summarises x followed by y. It is associative, so a window's
// summary can be built from its buckets in any grouping.
func combine(x, y acc) acc {
	if x.n == 0 {
		return y
	}
	if y.n == 0 {
		return x
	}
	return acc{
		n:   x.n + y.n,
		sum: x.sum + y.sum,
		min: math.Min(x.min, y.min),
		max: math.Max(x.max, y.max),
		ft:  x.ft, lt: y.lt,
		fv: x.fv, lv: y.lv,
		inc: x.inc + resetIncrease(x.lv, y.fv) + y.inc,
	}
}

// window folds a sliding window of buckets in amortised O(1) per step
// without subtracting, so sums do not drift: the "two stacks" method. Of
// the window [lo, hi), the front [lo, mid) is summarised by suffix folds
// suf[i] = fold(bs[i:mid]), the back [mid, hi) by one running fold. When
// lo reaches mid the back becomes the new front; each bucket is folded
// into a suffix at most once.
type window struct {
	suf  []acc
	back acc
}

// rebuild makes [lo, hi) the front.
func (w *window) rebuild(bs []acc, lo, hi int) {
	if cap(w.suf) < len(bs)+1 {
		w.suf = make([]acc, len(bs)+1)
	}
	w.suf = w.suf[:len(bs)+1]
	w.suf[hi] = acc{}
	for i := hi - 1; i >= lo; i-- {
		w.suf[i] = combine(bs[i], w.suf[i+1])
	}
	w.back = acc{}
}

// evalWindows computes the function's value at each evaluation time t
// from the buckets in [t-window, t) and appends the defined ones to gs.
// bs is in bucket order.
func (p *Plan) evalWindows(w *window, bs []acc, gs *gridSeries) {
	lo, mid, hi := 0, 0, 0
	w.back = acc{}
	for k := 0; k < p.points; k++ {
		t := p.first + int64(k)*p.step
		for hi < len(bs) && bs[hi].b < t {
			w.back = combine(w.back, bs[hi])
			hi++
		}
		for lo < hi && bs[lo].b < t-p.window {
			lo++
		}
		if lo == hi {
			if hi == len(bs) {
				return
			}
			continue
		}
		if lo >= mid {
			w.rebuild(bs, lo, hi)
			mid = hi
		}
		if v, ok := p.fnValue(combine(w.suf[lo], w.back)); ok {
			gs.idx = append(gs.idx, int32(k))
			gs.val = append(gs.val, v)
		}
	}
}

// fnValue applies the range function to a window's summary. Functions
// of change need two samples.
func (p *Plan) fnValue(a acc) (float64, bool) {
	switch p.fn {
	case FuncCntOverTime:
		return float64(a.n), true
	case FuncSumOverTime:
		return a.sum, true
	case FuncAvgOverTime:
		return a.sum / float64(a.n), true
	case FuncMinOverTime:
		return a.min, true
	case FuncMaxOverTime:
		return a.max, true
	case FuncLastOver:
		return a.lv, true
	}
	if a.n < 2 {
		return 0, false
	}
	switch p.fn {
	case FuncDelta:
		return a.lv - a.fv, true
	case FuncIncrease:
		return a.inc, true
	case FuncRate:
		return a.inc / (float64(a.lt-a.ft) / 1e6), true
	}
	panic("BUG: range function " + string(p.fn) + " has no evaluation")
}

// aggregator applies one aggregation to a stream of series.
type aggregator struct {
	a         *Aggregate
	points    int
	maxSeries int
	keep      [numLabels]bool // labels that form the group key
	groups    map[labels]*group
}

type group struct {
	labels labels
	// Per step: the count of series and two running values (sum; min or
	// max; Welford's mean and sum of squared deviations).
	cnt    []int32
	v1, v2 []float64
	// members keeps the series for topk, bottomk and quantile.
	members []*gridSeries
}

func newAggregator(a *Aggregate, points, maxSeries int) *aggregator {
	g := &aggregator{a: a, points: points, maxSeries: maxSeries, groups: map[labels]*group{}}
	for i, name := range seriesLabels {
		listed := slices.Contains(a.Grouping, name)
		g.keep[i] = listed != a.Without
	}
	return g
}

func (g *aggregator) memberOps() bool {
	return g.a.Op == AggTopK || g.a.Op == AggBottomK || g.a.Op == AggQuantile
}

func (g *aggregator) add(s *gridSeries) error {
	var key labels
	for i, keep := range g.keep {
		if keep {
			key[i] = s.labels[i]
		}
	}
	grp := g.groups[key]
	if grp == nil {
		if len(g.groups) == g.maxSeries && g.a.Op != AggTopK && g.a.Op != AggBottomK {
			return limitError("max_series", "series in the result of "+string(g.a.Op), "more than "+itoa(g.maxSeries), itoa(g.maxSeries),
				"group by fewer labels")
		}
		grp = &group{labels: key}
		if !g.memberOps() {
			grp.cnt = make([]int32, g.points)
			grp.v1 = make([]float64, g.points)
			if g.a.Op == AggStddev || g.a.Op == AggStdvar {
				grp.v2 = make([]float64, g.points)
			}
		}
		g.groups[key] = grp
	}
	if g.memberOps() {
		grp.members = append(grp.members, s)
		return nil
	}
	for i, k := range s.idx {
		v := s.val[i]
		c := grp.cnt[k] + 1
		grp.cnt[k] = c
		switch g.a.Op {
		case AggSum, AggAvg:
			grp.v1[k] += v
		case AggMin:
			if c == 1 || v < grp.v1[k] || math.IsNaN(grp.v1[k]) {
				grp.v1[k] = v
			}
		case AggMax:
			if c == 1 || v > grp.v1[k] || math.IsNaN(grp.v1[k]) {
				grp.v1[k] = v
			}
		case AggStddev, AggStdvar:
			d := v - grp.v1[k]
			grp.v1[k] += d / float64(c)
			grp.v2[k] += d * (v - grp.v1[k])
		}
	}
	return nil
}

// finish returns the aggregation's series, in no particular order.
func (g *aggregator) finish() ([]*gridSeries, error) {
	var out []*gridSeries
	for _, grp := range g.groups {
		switch g.a.Op {
		case AggTopK, AggBottomK:
			out = append(out, g.selectK(grp)...)
		case AggQuantile:
			out = append(out, g.quantile(grp))
		default:
			out = append(out, g.reduce(grp))
		}
		if len(out) > g.maxSeries {
			return nil, limitError("max_series", "series in the result of "+string(g.a.Op), "more than "+itoa(g.maxSeries), itoa(g.maxSeries), "")
		}
	}
	return out, nil
}

func (g *aggregator) reduce(grp *group) *gridSeries {
	gs := &gridSeries{labels: grp.labels}
	for k, c := range grp.cnt {
		if c == 0 {
			continue
		}
		var v float64
		switch g.a.Op {
		case AggSum, AggMin, AggMax:
			v = grp.v1[k]
		case AggAvg:
			v = grp.v1[k] / float64(c)
		case AggCount:
			v = float64(c)
		case AggStdvar:
			v = grp.v2[k] / float64(c)
		case AggStddev:
			v = math.Sqrt(grp.v2[k] / float64(c))
		}
		gs.idx = append(gs.idx, int32(k))
		gs.val = append(gs.val, v)
	}
	return gs
}

// stepValues calls fn for each step with the members that have a value
// there, as (member index, value) pairs, in member order.
func stepValues(members []*gridSeries, points int, fn func(k int32, who []int, vals []float64)) {
	cursor := make([]int, len(members))
	var who []int
	var vals []float64
	for k := int32(0); int(k) < points; k++ {
		who, vals = who[:0], vals[:0]
		for m, s := range members {
			c := cursor[m]
			if c < len(s.idx) && s.idx[c] == k {
				who = append(who, m)
				vals = append(vals, s.val[c])
				cursor[m] = c + 1
			}
		}
		if len(who) > 0 {
			fn(k, who, vals)
		}
	}
}

// selectK keeps, at each step, the k largest (topk) or smallest (bottomk)
// values; ties go to the series with the smaller labels. The output
// series keep their own labels and have points where they were selected.
func (g *aggregator) selectK(grp *group) []*gridSeries {
	members := grp.members
	slices.SortFunc(members, func(a, b *gridSeries) int { return compareLabels(a.labels, b.labels) })
	outs := make([]*gridSeries, len(members))
	k := int(g.a.Param)
	order := []int{}
	stepValues(members, g.points, func(step int32, who []int, vals []float64) {
		order = order[:0]
		for i := range who {
			order = append(order, i)
		}
		slices.SortStableFunc(order, func(i, j int) int {
			a, b := vals[i], vals[j]
			if g.a.Op == AggTopK {
				a, b = b, a
			}
			switch {
			case a < b || (math.IsNaN(b) && !math.IsNaN(a)):
				return -1
			case a > b || (math.IsNaN(a) && !math.IsNaN(b)):
				return 1
			}
			return 0
		})
		for _, i := range order[:min(k, len(order))] {
			m := who[i]
			if outs[m] == nil {
				outs[m] = &gridSeries{labels: members[m].labels}
			}
			outs[m].idx = append(outs[m].idx, step)
			outs[m].val = append(outs[m].val, vals[i])
		}
	})
	var res []*gridSeries
	for _, o := range outs {
		if o != nil {
			res = append(res, o)
		}
	}
	return res
}

// quantile computes the φ-quantile at each step as PromQL does: linear
// interpolation between the closest ranks.
func (g *aggregator) quantile(grp *group) *gridSeries {
	gs := &gridSeries{labels: grp.labels}
	phi := g.a.Param
	var sorted []float64
	stepValues(grp.members, g.points, func(step int32, _ []int, vals []float64) {
		sorted = append(sorted[:0], vals...)
		slices.Sort(sorted)
		n := float64(len(sorted))
		rank := phi * (n - 1)
		lower := math.Max(0, math.Floor(rank))
		upper := math.Min(n-1, lower+1)
		weight := rank - math.Floor(rank)
		v := sorted[int(lower)]*(1-weight) + sorted[int(upper)]*weight
		gs.idx = append(gs.idx, step)
		gs.val = append(gs.val, v)
	})
	return gs
}

func itoa(n int) string { return strconv.Itoa(n) }
