package rollup

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Table names the rollup tables, and Raw the readings table.
const (
	Hourly = "readings_hourly"
	Daily  = "readings_daily"
	Raw    = "readings"
)

// day is a daily bucket's width.
const day = 24 * time.Hour

// Window is the part [From, To) of the time line a rollup table holds,
// zero when it holds nothing yet.
type Window struct{ From, To time.Time }

// empty reports whether w holds nothing.
func (w Window) empty() bool { return !w.From.Before(w.To) }

// Coverage is what the rollup tables hold.
type Coverage struct{ Hourly, Daily Window }

// Span is a part [From, To) of a range read from Table: Hourly, Daily or
// Raw.
type Span struct {
	Table    string
	From, To time.Time
}

// Width is the bucket width of the span's table, 0 for Raw.
func (s Span) Width() time.Duration {
	switch s.Table {
	case Hourly:
		return time.Hour
	case Daily:
		return day
	}
	return 0
}

// Querier runs a query; *sql.DB, *sql.Conn and *sql.Tx are Queriers.
type Querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Load reads the coverage: one primary-key read of a two-row table.
func Load(ctx context.Context, q Querier) (Coverage, error) {
	rows, err := q.QueryContext(ctx, `SELECT name, low, high FROM readings_rollup_state`)
	if err != nil {
		return Coverage{}, fmt.Errorf("read rollup coverage: %w", err)
	}
	defer rows.Close()
	var c Coverage
	for rows.Next() {
		var name string
		var lo, hi db.Timestamp
		if err := rows.Scan(&name, &lo, &hi); err != nil {
			return Coverage{}, fmt.Errorf("scan rollup coverage: %w", err)
		}
		w := Window{From: lo.Time, To: hi.Time}
		if lo.IsZero() || hi.IsZero() {
			w = Window{}
		}
		switch name {
		case "hourly":
			c.Hourly = w
		case "daily":
			c.Daily = w
		}
	}
	if err := rows.Err(); err != nil {
		return Coverage{}, fmt.Errorf("read rollup coverage: %w", err)
	}
	return c, nil
}

// Split cuts [from, to) into spans, in time order, for buckets of width
// w: the whole days the daily rollup holds when w is a multiple of a day,
// the whole hours the hourly rollup holds (and the daily does not) when w
// is a multiple of an hour, and raw readings for the rest. Buckets are
// aligned as core/db's TimeBucket aligns them, so every rollup bucket lies
// in one bucket of width w.
//
// With whole, a bucket of width w comes from one table only: a rollup
// serves only buckets of its own width, the only way to answer what does
// not combine by addition (the query language's counters, whose increase
// depends on the order of the samples). Without it, the spans of one
// bucket may come from several tables and the caller combines them.
func (c Coverage) Split(from, to time.Time, w time.Duration, whole bool) []Span {
	from, to = from.UTC(), to.UTC()
	if !from.Before(to) {
		return nil
	}
	if w <= 0 {
		return []Span{{Table: Raw, From: from, To: to}}
	}
	var covered []Span
	useDaily := w%day == 0 && (!whole || w == day)
	useHourly := w%time.Hour == 0 && (!whole || w == time.Hour)
	if useDaily && !c.Daily.empty() {
		if s, ok := clip(Daily, from, to, day, c.Daily); ok {
			covered = append(covered, s)
		}
	}
	if useHourly && !c.Hourly.empty() {
		if s, ok := clip(Hourly, from, to, time.Hour, c.Hourly); ok {
			covered = append(covered, subtract(s, covered)...)
		}
	}
	sortSpans(covered)
	var out []Span
	at := from
	for _, s := range covered {
		if at.Before(s.From) {
			out = append(out, Span{Table: Raw, From: at, To: s.From})
		}
		out = append(out, s)
		at = s.To
	}
	if at.Before(to) {
		out = append(out, Span{Table: Raw, From: at, To: to})
	}
	return out
}

// UsesRollups reports whether any span reads a rollup table.
func UsesRollups(spans []Span) bool {
	for _, s := range spans {
		if s.Table != Raw {
			return true
		}
	}
	return false
}

// clip returns the whole buckets of width bw inside both [from, to) and
// win, as a span of table.
func clip(table string, from, to time.Time, bw time.Duration, win Window) (Span, bool) {
	lo, hi := ceilTo(from, bw), to.Truncate(bw)
	if win.From.After(lo) {
		lo = ceilTo(win.From, bw)
	}
	if win.To.Before(hi) {
		hi = win.To.Truncate(bw)
	}
	return Span{Table: table, From: lo, To: hi}, lo.Before(hi)
}

// subtract returns the parts of s outside every span of cut, which are
// sorted and do not overlap.
func subtract(s Span, cut []Span) []Span {
	out := []Span{s}
	for _, c := range cut {
		var next []Span
		for _, p := range out {
			if !c.From.Before(p.To) || !p.From.Before(c.To) {
				next = append(next, p)
				continue
			}
			if p.From.Before(c.From) {
				next = append(next, Span{Table: p.Table, From: p.From, To: c.From})
			}
			if c.To.Before(p.To) {
				next = append(next, Span{Table: p.Table, From: c.To, To: p.To})
			}
		}
		out = next
	}
	return out
}

func sortSpans(s []Span) {
	slices.SortFunc(s, func(a, b Span) int { return a.From.Compare(b.From) })
}

// ceilTo is the first multiple of d at or after t. Hours and days need no
// origin: core/db's origin (a Monday midnight UTC) is on both grids, as is
// the zero time Truncate counts from.
func ceilTo(t time.Time, d time.Duration) time.Time {
	f := t.Truncate(d)
	if f.Before(t) {
		return f.Add(d)
	}
	return f
}
