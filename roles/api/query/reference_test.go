package query

import (
	"cmp"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// This file is a second, deliberately naive implementation of the
// language over raw samples held in memory: no buckets, no SQL, no sliding
// folds. Tests compare Run (on both engines) and evaluate (fed buckets made
// in Go) against it.

// sample is one reading. Empty label strings and quality are stored as
// NULL by the integration tests; Value nil is a BAD read without value.
type sample struct {
	Tenant  string
	L       labels
	Quality string
	T       time.Time
	V       *float64
}

func fv(v float64) *float64 { return &v }

// refRegexps caches the compiled matchers; the engines' subtests run the
// reference in parallel.
var refRegexps sync.Map // string -> *regexp.Regexp

func refMatch(m Matcher, s sample) bool {
	var v string
	if m.Label == AttrQuality {
		v = s.Quality
	} else {
		v = s.L[labelIndex(m.Label)]
	}
	switch m.Op {
	case MatchEqual:
		return v == m.Value
	case MatchNotEqual:
		return v != m.Value
	}
	re, found := refRegexps.Load(m.Value)
	if !found {
		re, _ = refRegexps.LoadOrStore(m.Value, regexp.MustCompile("^(?:"+m.Value+")$"))
	}
	ok := re.(*regexp.Regexp).MatchString(v)
	return ok == (m.Op == MatchRegexp)
}

func refSelect(sel *Selector, tenant string, samples []sample) map[labels][]sample {
	out := map[labels][]sample{}
	for _, s := range samples {
		if s.Tenant != tenant || s.V == nil {
			continue
		}
		ok := true
		for _, m := range sel.Matchers {
			ok = ok && refMatch(m, s)
		}
		if ok {
			out[s.L] = append(out[s.L], s)
		}
	}
	for l := range out {
		slices.SortFunc(out[l], func(a, b sample) int { return a.T.Compare(b.T) })
	}
	return out
}

// refSeries is a series as a map from time to value.
type refSeries struct {
	l labels
	v map[time.Time]float64
}

// refGrid lists the evaluation times: multiples of step from the origin
// inside [start, end].
func refGrid(r Range) []time.Time {
	origin := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)
	n := r.Start.Sub(origin) / r.Step
	t := origin.Add(n * r.Step)
	for t.Before(r.Start) {
		t = t.Add(r.Step)
	}
	for t.After(r.Start) && !t.Add(-r.Step).Before(r.Start) {
		t = t.Add(-r.Step)
	}
	var ts []time.Time
	for ; !t.After(r.End); t = t.Add(r.Step) {
		ts = append(ts, t)
	}
	return ts
}

func refFunc(f Func, w []sample) (float64, bool) {
	if len(w) == 0 {
		return 0, false
	}
	var sum float64
	mn, mx := math.Inf(1), math.Inf(-1)
	for _, s := range w {
		sum += *s.V
		mn, mx = math.Min(mn, *s.V), math.Max(mx, *s.V)
	}
	first, last := w[0], w[len(w)-1]
	switch f {
	case FuncCntOverTime:
		return float64(len(w)), true
	case FuncSumOverTime:
		return sum, true
	case FuncAvgOverTime:
		return sum / float64(len(w)), true
	case FuncMinOverTime:
		return mn, true
	case FuncMaxOverTime:
		return mx, true
	case FuncLastOver:
		return *last.V, true
	}
	if len(w) < 2 {
		return 0, false
	}
	var inc float64
	for i := 1; i < len(w); i++ {
		prev, cur := *w[i-1].V, *w[i].V
		if cur < prev {
			inc += cur
		} else {
			inc += cur - prev
		}
	}
	switch f {
	case FuncDelta:
		return *last.V - *first.V, true
	case FuncIncrease:
		return inc, true
	case FuncRate:
		return inc / last.T.Sub(first.T).Seconds(), true
	}
	panic(f)
}

func refEvalSeries(e Expr, tenant string, samples []sample, r Range) []refSeries {
	switch e := e.(type) {
	case *Call:
		var out []refSeries
		for l, ss := range refSelect(e.Selector, tenant, samples) {
			rs := refSeries{l: l, v: map[time.Time]float64{}}
			for _, t := range refGrid(r) {
				// ss is in time order: the window is a contiguous run.
				lo := sort.Search(len(ss), func(i int) bool { return !ss[i].T.Before(t.Add(-e.Range)) })
				hi := sort.Search(len(ss), func(i int) bool { return !ss[i].T.Before(t) })
				w := ss[lo:max(lo, hi)]
				if v, ok := refFunc(e.Func, w); ok {
					rs.v[t] = v
				}
			}
			if len(rs.v) > 0 {
				out = append(out, rs)
			}
		}
		return out
	case *Aggregate:
		return refAggregate(e, refEvalSeries(e.Expr, tenant, samples, r))
	}
	panic(fmt.Sprintf("refEvalSeries %T", e))
}

func refAggregate(a *Aggregate, in []refSeries) []refSeries {
	groups := map[labels][]refSeries{}
	for _, s := range in {
		var key labels
		for i, name := range seriesLabels {
			if slices.Contains(a.Grouping, name) != a.Without {
				key[i] = s.l[i]
			}
		}
		groups[key] = append(groups[key], s)
	}
	var out []refSeries
	for key, members := range groups {
		times := map[time.Time]bool{}
		for _, m := range members {
			for t := range m.v {
				times[t] = true
			}
		}
		if a.Op == AggTopK || a.Op == AggBottomK {
			sel := map[labels]map[time.Time]float64{}
			for t := range times {
				var vs []refSeries
				for _, m := range members {
					if _, ok := m.v[t]; ok {
						vs = append(vs, m)
					}
				}
				sort.SliceStable(vs, func(i, j int) bool {
					vi, vj := vs[i].v[t], vs[j].v[t]
					if vi != vj {
						return (vi > vj) == (a.Op == AggTopK)
					}
					return compareLabels(vs[i].l, vs[j].l) < 0
				})
				for _, m := range vs[:min(int(a.Param), len(vs))] {
					if sel[m.l] == nil {
						sel[m.l] = map[time.Time]float64{}
					}
					sel[m.l][t] = m.v[t]
				}
			}
			for l, v := range sel {
				out = append(out, refSeries{l: l, v: v})
			}
			continue
		}
		rs := refSeries{l: key, v: map[time.Time]float64{}}
		for t := range times {
			var vals []float64
			for _, m := range members {
				if v, ok := m.v[t]; ok {
					vals = append(vals, v)
				}
			}
			var sum float64
			for _, v := range vals {
				sum += v
			}
			n := float64(len(vals))
			mean := sum / n
			var sq float64
			for _, v := range vals {
				sq += (v - mean) * (v - mean)
			}
			switch a.Op {
			case AggSum:
				rs.v[t] = sum
			case AggAvg:
				rs.v[t] = mean
			case AggCount:
				rs.v[t] = n
			case AggMin:
				rs.v[t] = slices.Min(vals)
			case AggMax:
				rs.v[t] = slices.Max(vals)
			case AggStdvar:
				rs.v[t] = sq / n
			case AggStddev:
				rs.v[t] = math.Sqrt(sq / n)
			case AggQuantile:
				slices.Sort(vals)
				rank := a.Param * (n - 1)
				lo := math.Floor(rank)
				hi := math.Min(n-1, lo+1)
				w := rank - lo
				rs.v[t] = vals[int(lo)]*(1-w) + vals[int(hi)]*w
			}
		}
		out = append(out, rs)
	}
	return out
}

// refEval is the expected result of e.
func refEval(e Expr, tenant string, samples []sample, r Range) []Series {
	out := []Series{}
	if sel, ok := e.(*Selector); ok {
		for l, ss := range refSelect(sel, tenant, samples) {
			s := Series{Labels: l.toMap()}
			for _, x := range ss {
				if !x.T.Before(r.Start) && !x.T.After(r.End) {
					s.Points = append(s.Points, Point{T: x.T, V: *x.V})
				}
			}
			if len(s.Points) > 0 {
				out = append(out, s)
			}
		}
	} else {
		for _, rs := range refEvalSeries(e, tenant, samples, r) {
			s := Series{Labels: rs.l.toMap()}
			for t, v := range rs.v {
				s.Points = append(s.Points, Point{T: t, V: v})
			}
			slices.SortFunc(s.Points, func(a, b Point) int { return a.T.Compare(b.T) })
			out = append(out, s)
		}
	}
	slices.SortFunc(out, func(a, b Series) int { return compareLabelMaps(a.Labels, b.Labels) })
	return out
}

// sameSeries compares results: labels and times exactly, values to a
// relative 1e-9 (sums are added in different orders).
func sameSeries(got, want []Series) error {
	if len(got) != len(want) {
		return fmt.Errorf("%d series, want %d:\n got  %s\n want %s", len(got), len(want), briefSeries(got), briefSeries(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if !mapsEqual(g.Labels, w.Labels) {
			return fmt.Errorf("series %d: labels %v, want %v", i, g.Labels, w.Labels)
		}
		if len(g.Points) != len(w.Points) {
			return fmt.Errorf("series %v: %d points, want %d:\n got  %v\n want %v", g.Labels, len(g.Points), len(w.Points), g.Points, w.Points)
		}
		for j := range g.Points {
			gp, wp := g.Points[j], w.Points[j]
			if !gp.T.Equal(wp.T) || !closeTo(gp.V, wp.V) {
				return fmt.Errorf("series %v point %d: %s %v, want %s %v", g.Labels, j, gp.T.Format(time.RFC3339Nano), gp.V, wp.T.Format(time.RFC3339Nano), wp.V)
			}
		}
	}
	return nil
}

func closeTo(a, b float64) bool {
	return a == b || math.Abs(a-b) <= 1e-9*math.Max(1, math.Max(math.Abs(a), math.Abs(b)))
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

func briefSeries(ss []Series) string {
	var parts []string
	for _, s := range ss {
		parts = append(parts, fmt.Sprintf("%v(%d)", s.Labels, len(s.Points)))
	}
	return strings.Join(parts, " ")
}

// goBuckets does in Go what the plan's SQL does: the per-series, per-bucket
// summaries of the selected samples in the plan's time range, in series and
// bucket order.
func goBuckets(t *testing.T, p *Plan, sel *Selector, samples []sample) func(add func(labels, acc) error) error {
	t.Helper()
	lo := p.first - p.window
	hi := p.first + int64(p.points-1)*p.step
	type key struct {
		l labels
		b int64
	}
	m := map[key]*acc{}
	var keys []key
	for l, ss := range refSelect(sel, testTenant, samples) {
		for _, s := range ss {
			us := s.T.UnixMicro()
			if us < lo || us >= hi {
				continue
			}
			k := key{l, floorTo(us, p.bucket)}
			a := m[k]
			v := *s.V
			if a == nil {
				a = &acc{b: k.b, n: 1, sum: v, min: v, max: v, ft: us, lt: us, fv: v, lv: v}
				m[k] = a
				keys = append(keys, k)
				continue
			}
			a.n++
			a.sum += v
			a.min, a.max = math.Min(a.min, v), math.Max(a.max, v)
			a.inc += resetIncrease(a.lv, v)
			a.lt, a.lv = us, v
		}
	}
	slices.SortFunc(keys, func(a, b key) int {
		if c := compareLabels(a.l, b.l); c != 0 {
			return c
		}
		return cmp.Compare(a.b, b.b)
	})
	return func(add func(labels, acc) error) error {
		for _, k := range keys {
			if err := add(k.l, *m[k]); err != nil {
				return err
			}
		}
		return nil
	}
}
