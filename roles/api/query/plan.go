package query

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// Range is the time range and resolution of a query.
type Range struct {
	// Start and End bound the query, both included for raw samples.
	Start, End time.Time
	// Step is the distance between the points of a range function or an
	// aggregation, and the width of the time buckets the database groups
	// samples into.
	Step time.Duration
}

// gridOrigin aligns evaluation times and buckets. It is core/db's bucket
// origin (Monday 2000-01-03T00:00Z), so a 1h step falls on the hour, a 1d
// step on UTC midnight and a 1w step on Mondays.
var gridOrigin = time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC).UnixMicro()

// Plan is a validated query, translated to SQL for one dialect and bound to
// one tenant and time range. Run executes it. A Plan is immutable and may
// be run more than once, concurrently.
type Plan struct {
	expr   Expr
	tenant string
	lim    Limits
	raw    bool // a bare selector: raw samples, no grid

	fn     Func
	window int64 // the range selector's width, µs
	step   int64 // µs
	bucket int64 // bucket width, µs: gcd(window, step)
	first  int64 // the first evaluation time, µs since the epoch
	points int   // evaluation times: first, first+step, ...
	aggs   []*Aggregate

	sql  string
	args []any
	// What WithRollups needs to write the statement again over spans:
	// the selector, the buckets' range [lo, hi) and the dialect.
	sel    *Selector
	lo, hi time.Time
	d      db.Dialect
	// rollups is true when the statement reads rollup tables.
	rollups bool
	// rowCap is the most rows a valid result can read; the SQL asks for
	// rowCap+1 so that reading that many proves the overflow. capBySeries
	// says which limit set it.
	rowCap      int64
	capBySeries bool
}

// NewPlan validates expr against the range and limits (zero fields take
// the defaults) and translates it to SQL for dialect d. tenant is the
// caller's tenant id: every query is restricted to it with tenant_id = $1,
// and the language cannot name tenant_id. Errors are *ParamError for a bad
// range or step, *LimitError for a limit, or a plain error for a
// programming mistake (no tenant, an unknown engine, an Expr the parser
// would not have produced).
func NewPlan(expr Expr, tenant string, r Range, d db.Dialect, lim Limits) (*Plan, error) {
	lim = lim.WithDefaults()
	if tenant == "" {
		return nil, errors.New("plan query: tenant id is required")
	}
	if d.Engine != db.Postgres && d.Engine != db.SQLite {
		return nil, fmt.Errorf("plan query: unknown database engine %q", d.Engine)
	}
	if err := checkExpr(expr); err != nil {
		return nil, fmt.Errorf("plan query: %w", err)
	}
	if err := checkRange(r, lim); err != nil {
		return nil, err
	}
	if got := depth(expr); got > lim.MaxDepth {
		return nil, limitError("max_depth", "nesting depth", strconv.Itoa(got), strconv.Itoa(lim.MaxDepth), "")
	}
	p := &Plan{expr: expr, tenant: tenant, lim: lim, step: r.Step.Microseconds()}

	// Unwrap the aggregations down to the call or selector.
	e := expr
	for {
		a, ok := e.(*Aggregate)
		if !ok {
			break
		}
		p.aggs = append([]*Aggregate{a}, p.aggs...)
		e = a.Expr
	}
	var err error
	switch e := e.(type) {
	case *Selector:
		err = p.planRaw(e, r, d)
	case *Call:
		err = p.planCall(e, r, d)
	}
	if err != nil {
		return nil, err
	}
	return p, nil
}

// Compile parses src and plans it: ParseLimits followed by NewPlan.
func Compile(src, tenant string, r Range, d db.Dialect, lim Limits) (*Plan, error) {
	e, err := ParseLimits(src, lim)
	if err != nil {
		return nil, err
	}
	return NewPlan(e, tenant, r, d, lim)
}

// checkExpr repeats the parser's checks, for an Expr built in code: the
// SQL generator relies on them.
func checkExpr(e Expr) error {
	switch e := e.(type) {
	case *Selector:
		if e == nil {
			return errors.New("nil selector")
		}
		for _, m := range e.Matchers {
			if err := checkMatchLabel(m.Label); err != nil {
				return err
			}
			if !utf8.ValidString(m.Value) || strings.IndexByte(m.Value, 0) >= 0 {
				return fmt.Errorf("matcher %s: value must be UTF-8 without NUL", m.Label)
			}
			switch m.Op {
			case MatchEqual, MatchNotEqual:
				if m.Label == LabelAgentUUID {
					if u, err := codec.ParseUUID(m.Value); err != nil || u.String() != m.Value {
						return fmt.Errorf("agent_uuid %s %q: not a canonical lowercase UUID", m.Op, m.Value)
					}
				}
			case MatchRegexp, MatchNotRegexp:
				if _, err := pgRegex(m.Value); err != nil {
					return err
				}
			default:
				return fmt.Errorf("matcher %s: unknown operator %d", m.Label, int(m.Op))
			}
		}
	case *Call:
		if e == nil || e.Selector == nil {
			return errors.New("call without selector")
		}
		if _, ok := funcs[e.Func]; !ok {
			return fmt.Errorf("unknown function %q", e.Func)
		}
		if e.Range <= 0 || e.Range%time.Microsecond != 0 {
			return fmt.Errorf("range %s: must be a positive whole number of microseconds", e.Range)
		}
		return checkExpr(e.Selector)
	case *Aggregate:
		if e == nil || e.Expr == nil {
			return errors.New("aggregation without argument")
		}
		spec, ok := aggOps[e.Op]
		if !ok {
			return fmt.Errorf("unknown aggregation %q", e.Op)
		}
		if spec.param {
			if err := checkParam(e.Op, e.Param); err != nil {
				return err
			}
		}
		for _, l := range e.Grouping {
			if err := checkGroupLabel(l); err != nil {
				return err
			}
		}
		if _, raw := e.Expr.(*Selector); raw {
			return fmt.Errorf("%s over raw samples: wrap the selector in a range function", e.Op)
		}
		return checkExpr(e.Expr)
	default:
		return fmt.Errorf("unexpected expression %T", e)
	}
	return nil
}

// minTime and maxTime bound start and end to what both engines store.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

func checkRange(r Range, lim Limits) error {
	switch {
	case r.Start.IsZero():
		return &ParamError{Param: "start", Msg: "is required"}
	case r.End.IsZero():
		return &ParamError{Param: "end", Msg: "is required"}
	case r.Start.Before(minTime) || r.Start.After(maxTime):
		return &ParamError{Param: "start", Msg: "must be between years 1 and 9999"}
	case r.End.Before(minTime) || r.End.After(maxTime):
		return &ParamError{Param: "end", Msg: "must be between years 1 and 9999"}
	case r.End.Before(r.Start):
		return &ParamError{Param: "end", Msg: "must not be before start"}
	case r.Step <= 0:
		return &ParamError{Param: "step", Msg: "must be positive"}
	case r.Step%time.Microsecond != 0:
		return &ParamError{Param: "step", Msg: "must be a whole number of microseconds"}
	case r.Step < lim.MinStep:
		return limitError("min_step", "step", displayDuration(r.Step), displayDuration(lim.MinStep), "")
	}
	if span := r.End.Sub(r.Start); span > lim.MaxRange {
		return limitError("max_range", "time range (end - start)", displayDuration(span), displayDuration(lim.MaxRange), "")
	}
	return nil
}

func (p *Plan) planRaw(sel *Selector, r Range, d db.Dialect) error {
	p.raw = true
	p.rowCap, p.capBySeries = capRows(int64(p.lim.MaxSeries), int64(p.lim.MaxPointsPerSeries), int64(p.lim.MaxRows))
	var err error
	p.sql, p.args, err = rawSQL(d, p.tenant, sel, d.TimeArg(r.Start.UTC()), d.TimeArg(r.End.UTC()), p.rowCap+1)
	return err
}

func (p *Plan) planCall(c *Call, r Range, d db.Dialect) error {
	if c.Range > p.lim.MaxRange {
		return limitError("max_range", "range selector", "["+displayDuration(c.Range)+"]", displayDuration(p.lim.MaxRange), "")
	}
	p.fn = c.Func
	p.window = c.Range.Microseconds()
	p.bucket = gcd(p.window, p.step)

	// Evaluation times: the step-aligned times in [start, end].
	first := ceilTo(r.Start.UnixMicro(), p.step)
	last := floorTo(r.End.UnixMicro(), p.step)
	if last >= first {
		n := (last-first)/p.step + 1
		if n > int64(p.lim.MaxPointsPerSeries) {
			return limitError("max_points_per_series", "points per series", strconv.FormatInt(n, 10)+" ((end - start) / step + 1)",
				strconv.Itoa(p.lim.MaxPointsPerSeries), "increase step or shorten the range")
		}
		p.points = int(n)
	}
	p.first = first

	// Buckets cover [first-window, last): the windows [t-window, t).
	lo := time.UnixMicro(first - p.window).UTC()
	hi := time.UnixMicro(last).UTC()
	bucketsPerSeries := (last - first + p.window) / p.bucket
	if p.points == 0 {
		bucketsPerSeries, hi = 0, lo
	}
	if len(p.aggs) == 0 {
		p.rowCap, p.capBySeries = capRows(int64(p.lim.MaxSeries), bucketsPerSeries, int64(p.lim.MaxRows))
	} else {
		p.rowCap = int64(p.lim.MaxRows)
	}
	bucket, err := d.TimeBucket(time.Duration(p.bucket)*time.Microsecond, "time")
	if err != nil {
		return fmt.Errorf("plan query: %w", err)
	}
	p.sel, p.lo, p.hi, p.d = c.Selector, lo, hi, d
	p.sql, p.args, err = bucketSQL(d, p.tenant, c.Selector, bucket, funcs[c.Func].counter, d.TimeArg(lo), d.TimeArg(hi), p.rowCap+1)
	return err
}

// capRows returns min(series*perSeries, maxRows) and whether the series
// product was the smaller.
func capRows(series, perSeries, maxRows int64) (int64, bool) {
	if perSeries > 0 && series <= maxRows/perSeries && series*perSeries < maxRows {
		return series * perSeries, true
	}
	return maxRows, false
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// floorTo returns the largest grid time <= t; ceilTo the smallest >= t.
func floorTo(t, step int64) int64 {
	off := (t - gridOrigin) % step
	if off < 0 {
		off += step
	}
	return t - off
}

func ceilTo(t, step int64) int64 {
	f := floorTo(t, step)
	if f < t {
		return f + step
	}
	return f
}

// SQL returns the statement and arguments Run executes (copies), for logs
// and tests.
func (p *Plan) SQL() (string, []any) {
	return p.sql, append([]any(nil), p.args...)
}

// Expr returns the planned expression.
func (p *Plan) Expr() Expr { return p.expr }

// Raw reports whether the plan returns raw samples (a bare selector)
// rather than points on the step grid.
func (p *Plan) Raw() bool { return p.raw }
