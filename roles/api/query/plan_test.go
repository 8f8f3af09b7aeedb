package query

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/edgeplat/edgeplat/core/db"
)

func TestPlanErrors(t *testing.T) {
	ok := Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute}
	with := func(f func(*Range)) Range { r := ok; f(&r); return r }
	tests := []struct {
		name  string
		src   string
		rng   Range
		lim   Limits
		param string // *ParamError.Param
		limit string // *LimitError.Limit
		msg   string
	}{
		{"no start", `readings`, with(func(r *Range) { r.Start = time.Time{} }), Limits{}, "start", "", "invalid start: is required"},
		{"no end", `readings`, with(func(r *Range) { r.End = time.Time{} }), Limits{}, "end", "", "invalid end: is required"},
		{"end before start", `readings`, with(func(r *Range) { r.End = r.Start.Add(-time.Second) }), Limits{}, "end", "", "invalid end: must not be before start"},
		{"year 10000", `readings`, with(func(r *Range) { r.End = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }), Limits{}, "end", "", "between years 1 and 9999"},
		{"zero step", `readings`, with(func(r *Range) { r.Step = 0 }), Limits{}, "step", "", "invalid step: must be positive"},
		{"nanosecond step", `readings`, with(func(r *Range) { r.Step = time.Second + time.Nanosecond }), Limits{}, "step", "", "whole number of microseconds"},
		{"min step", `rate(readings[5m])`, with(func(r *Range) { r.Step = 500 * time.Millisecond }), Limits{}, "", "min_step",
			"step 500ms is below the minimum of 1s (min_step)"},
		{"max range", `readings`, with(func(r *Range) { r.End = r.Start.Add(91 * 24 * time.Hour) }), Limits{}, "", "max_range",
			"time range (end - start) 91d exceeds the limit of 90d (max_range)"},
		{"max range custom", `readings`, ok, Limits{MaxRange: 30 * time.Minute}, "", "max_range",
			"time range (end - start) 1h exceeds the limit of 30m (max_range)"},
		{"range selector", `rate(readings[91d])`, ok, Limits{}, "", "max_range",
			"range selector [91d] exceeds the limit of 90d (max_range)"},
		{"points", `rate(readings[5m])`, with(func(r *Range) { r.End = r.Start.Add(24 * time.Hour); r.Step = time.Second }), Limits{}, "", "max_points_per_series",
			"points per series 86401 ((end - start) / step + 1) exceeds the limit of 11000 (max_points_per_series): increase step or shorten the range"},
		{"depth", `sum(sum(rate(readings[5m])))`, ok, Limits{MaxDepth: 2}, "", "max_depth", "nesting depth 3 exceeds the limit of 2 (max_depth)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := ParseLimits(tt.src, Limits{MaxDepth: 10})
			if err != nil {
				t.Fatal(err)
			}
			_, err = NewPlan(e, testTenant, tt.rng, sqliteD, tt.lim)
			var pe *ParamError
			var le *LimitError
			switch {
			case err == nil:
				t.Fatal("no error")
			case tt.param != "":
				if !errors.As(err, &pe) || pe.Param != tt.param {
					t.Fatalf("got %T %v, want a *ParamError for %s", err, err, tt.param)
				}
			default:
				if !errors.As(err, &le) || le.Limit != tt.limit {
					t.Fatalf("got %T %v, want a *LimitError for %s", err, err, tt.limit)
				}
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not contain %q", err, tt.msg)
			}
		})
	}

	e, _ := Parse(`readings`)
	if _, err := NewPlan(e, "", ok, sqliteD, Limits{}); err == nil {
		t.Error("no tenant: no error")
	}
	if _, err := NewPlan(e, testTenant, ok, db.Dialect{Engine: "mysql"}, Limits{}); err == nil {
		t.Error("unknown engine: no error")
	}
	// An Expr built in code gets the parser's checks too.
	sel := func(m Matcher) *Selector { return &Selector{Matchers: []Matcher{m}} }
	for name, e := range map[string]Expr{
		"aggregation over raw samples": &Aggregate{Op: AggSum, Expr: &Selector{}},
		"unknown label":                sel(Matcher{Label: "tenant_id", Value: "other"}),
		"invalid regex":                sel(Matcher{Label: "unit", Op: MatchRegexp, Value: "("}),
		"non-portable regex":           sel(Matcher{Label: "unit", Op: MatchRegexp, Value: `\bx`}),
		"non-canonical uuid":           sel(Matcher{Label: "agent_uuid", Value: "3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F"}),
		"NUL":                          sel(Matcher{Label: "unit", Value: "a\x00"}),
		"unknown operator":             sel(Matcher{Label: "unit", Op: 9}),
		"unknown function":             &Call{Func: "irate", Selector: &Selector{}, Range: time.Minute},
		"zero range":                   &Call{Func: FuncRate, Selector: &Selector{}},
		"call without selector":        &Call{Func: FuncRate, Range: time.Minute},
		"group by quality":             &Aggregate{Op: AggSum, Grouping: []string{"quality"}, Expr: &Call{Func: FuncRate, Selector: &Selector{}, Range: time.Minute}},
		"topk without k":               &Aggregate{Op: AggTopK, Expr: &Call{Func: FuncRate, Selector: &Selector{}, Range: time.Minute}},
		"unknown aggregation":          &Aggregate{Op: "median", Expr: &Call{Func: FuncRate, Selector: &Selector{}, Range: time.Minute}},
		"nil":                          nil,
	} {
		if _, err := NewPlan(e, testTenant, ok, pg, Limits{}); err == nil || !strings.HasPrefix(err.Error(), "plan query: ") {
			t.Errorf("%s: %v, want a plan query error", name, err)
		}
	}
}

func TestPlanGrid(t *testing.T) {
	tests := []struct {
		name                  string
		src                   string
		rng                   Range
		first                 time.Time
		points                int
		bucket                time.Duration
		rowCap                int64
		capBySeries           bool
		loArg, hiArg          time.Time
		lastArgIsLimitPlusOne bool
	}{
		{
			name: "aligned", src: `rate(readings[5m])`,
			rng:   Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute},
			first: testStart, points: 61, bucket: time.Minute,
			rowCap: 500 * 65, capBySeries: true,
			loArg: testStart.Add(-5 * time.Minute), hiArg: testStart.Add(time.Hour),
		},
		{
			name: "unaligned start and end", src: `avg_over_time(readings[1m])`,
			rng:   Range{Start: testStart.Add(30 * time.Second), End: testStart.Add(10*time.Minute + 59*time.Second), Step: time.Minute},
			first: testStart.Add(time.Minute), points: 10, bucket: time.Minute,
			rowCap: 500 * 10, capBySeries: true,
			loArg: testStart, hiArg: testStart.Add(10 * time.Minute),
		},
		{
			name: "range not a multiple of step", src: `increase(readings[90s])`,
			rng:   Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute},
			first: testStart, points: 61, bucket: 30 * time.Second,
			rowCap: 500 * 123, capBySeries: true,
			loArg: testStart.Add(-90 * time.Second), hiArg: testStart.Add(time.Hour),
		},
		{
			name: "aggregation reads up to max_rows", src: `sum(rate(readings[5m]))`,
			rng:   Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute},
			first: testStart, points: 61, bucket: time.Minute,
			rowCap: 2_000_000,
			loArg:  testStart.Add(-5 * time.Minute), hiArg: testStart.Add(time.Hour),
		},
		{
			name: "daily steps on UTC midnight", src: `max_over_time(readings[1d])`,
			rng:   Range{Start: testStart, End: testStart.Add(7 * 24 * time.Hour), Step: 24 * time.Hour},
			first: time.Date(2024, 3, 11, 0, 0, 0, 0, time.UTC), points: 7, bucket: 24 * time.Hour,
			rowCap: 500 * 7, capBySeries: true,
			loArg: time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC), hiArg: time.Date(2024, 3, 17, 0, 0, 0, 0, time.UTC),
		},
		{
			name: "no grid point in range", src: `rate(readings[5m])`,
			rng:   Range{Start: testStart.Add(10 * time.Second), End: testStart.Add(50 * time.Second), Step: time.Minute},
			first: testStart.Add(time.Minute), points: 0, bucket: time.Minute,
			rowCap: 0, capBySeries: false,
			loArg: testStart.Add(-4 * time.Minute), hiArg: testStart.Add(-4 * time.Minute),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := Compile(tt.src, testTenant, tt.rng, pg, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got := time.UnixMicro(p.first).UTC(); !got.Equal(tt.first) || p.points != tt.points {
				t.Errorf("grid: first %s, %d points; want %s, %d", got, p.points, tt.first, tt.points)
			}
			if got := time.Duration(p.bucket) * time.Microsecond; got != tt.bucket {
				t.Errorf("bucket %s, want %s", got, tt.bucket)
			}
			if tt.points > 0 && (p.rowCap != tt.rowCap || p.capBySeries != tt.capBySeries) {
				t.Errorf("row cap %d (by series %v), want %d (%v)", p.rowCap, p.capBySeries, tt.rowCap, tt.capBySeries)
			}
			_, args := p.SQL()
			if lo, hi := args[1].(time.Time), args[2].(time.Time); !lo.Equal(tt.loArg) || !hi.Equal(tt.hiArg) {
				t.Errorf("time args %s .. %s, want %s .. %s", lo, hi, tt.loArg, tt.hiArg)
			}
			if got := args[len(args)-1].(int64); got != p.rowCap+1 {
				t.Errorf("LIMIT %d, want row cap + 1 = %d", got, p.rowCap+1)
			}
		})
	}
}

func TestPlanSQLiteTimeArgs(t *testing.T) {
	p, err := Compile(`readings`, testTenant, Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute}, sqliteD, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	_, args := p.SQL()
	if args[1] != testStart.UnixMicro() || args[2] != testStart.Add(time.Hour).UnixMicro() {
		t.Errorf("SQLite time args %v %v, want Unix microseconds", args[1], args[2])
	}
	if !p.Raw() || p.Expr() == nil {
		t.Error("Raw/Expr")
	}
}

func TestLimitsDefaults(t *testing.T) {
	if got := (Limits{}).WithDefaults(); got != DefaultLimits() {
		t.Errorf("zero Limits = %+v, want the defaults", got)
	}
	l := Limits{MaxSeries: 7, MinStep: -1}.WithDefaults()
	if l.MaxSeries != 7 || l.MinStep != time.Second {
		t.Errorf("partial Limits = %+v", l)
	}
}

func TestFloorCeil(t *testing.T) {
	step := time.Hour.Microseconds()
	// Before the origin the grid still floors.
	old := time.Date(1999, 12, 31, 22, 30, 0, 0, time.UTC).UnixMicro()
	if got := time.UnixMicro(floorTo(old, step)).UTC(); !got.Equal(time.Date(1999, 12, 31, 22, 0, 0, 0, time.UTC)) {
		t.Errorf("floor before origin = %s", got)
	}
	if got := time.UnixMicro(ceilTo(old, step)).UTC(); !got.Equal(time.Date(1999, 12, 31, 23, 0, 0, 0, time.UTC)) {
		t.Errorf("ceil before origin = %s", got)
	}
	on := testStart.UnixMicro()
	if floorTo(on, step) != on || ceilTo(on, step) != on {
		t.Error("a grid time must floor and ceil to itself")
	}
	if capped, bySeries := capRows(500, 1<<62, 100); capped != 100 || bySeries {
		t.Errorf("capRows overflow guard: %d %v", capped, bySeries)
	}
}

func TestQueryError(t *testing.T) {
	err := queryError(fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "2201B", Message: "invalid regular expression: regular expression is too complex"}))
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "regex_complexity" || !strings.Contains(err.Error(), "too complex") {
		t.Errorf("2201B: %v", err)
	}
	other := errors.New("connection refused")
	if err := queryError(other); !errors.Is(err, other) || errors.As(err, &le) {
		t.Errorf("other errors are wrapped: %v", err)
	}
}
