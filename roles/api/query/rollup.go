package query

import (
	"time"

	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// WithRollups returns the plan reading whole hours and days from the
// rollup tables where c says they hold them, and raw readings for the
// rest (docs/readings-api.md, section Rollups), or p itself when no
// rollup fits: a bare selector, a bucket width that is not a whole number
// of hours, a quality matcher (rollups keep no quality), or a range the
// rollups do not cover. Answers are those of p, sums up to rounding.
//
// Range functions of counters (rate, increase, ...) need each bucket's
// samples in order, so they read a rollup only for buckets of its own
// width; the others combine hours into wider buckets and raw readings
// into partial ones.
func (p *Plan) WithRollups(c rollup.Coverage) *Plan {
	if p.raw || p.points == 0 || p.sel == nil {
		return p
	}
	for _, m := range p.sel.Matchers {
		if m.Label == AttrQuality {
			return p
		}
	}
	w := time.Duration(p.bucket) * time.Microsecond
	counter := funcs[p.fn].counter
	spans := c.Split(p.lo, p.hi, w, counter)
	if !rollup.UsesRollups(spans) {
		return p
	}
	s := &sqlBuilder{d: p.d}
	if err := s.spans(p.tenant, p.sel, w, counter, spans); err != nil {
		// The same matchers translated for p: they cannot fail here.
		panic("BUG: rollup statement: " + err.Error())
	}
	s.Write("\nORDER BY 1, 2, 3, 4, 5, 6\nLIMIT ", s.Arg(p.rowCap+1))
	q := *p
	q.sql, q.args, q.rollups = s.String(), s.Args(), true
	return &q
}

// Rollups reports whether the plan reads rollup tables.
func (p *Plan) Rollups() bool { return p.rollups }

// spans writes the bucket rows of sel over spans: for counters, a union
// of raw and rollup rows, each bucket from one of them; otherwise each
// span's partial statistics combined per bucket.
func (s *sqlBuilder) spans(tenant string, sel *Selector, w time.Duration, counter bool, spans []rollup.Span) error {
	bucket := func(column string) string {
		e, err := s.d.TimeBucket(w, column)
		if err != nil {
			panic("BUG: bucket width " + w.String() + ": " + err.Error())
		}
		return e
	}
	if counter {
		s.Write("SELECT * FROM (\n")
	} else {
		s.Write("SELECT ", seriesKey, ", b,",
			"\n  CAST(SUM(n) AS BIGINT), SUM(total), MIN(lo), MAX(hi), MIN(t0), MAX(t1)",
			"\nFROM (\n")
	}
	for i, sp := range spans {
		if i > 0 {
			s.Write("\nUNION ALL\n")
		}
		lo, hi := s.d.TimeArg(sp.From), s.d.TimeArg(sp.To)
		switch {
		case sp.Table == rollup.Raw && counter:
			if err := s.buckets(tenant, sel, bucket("time"), true, lo, hi); err != nil {
				return err
			}
			continue
		case sp.Table == rollup.Raw:
			s.Write("SELECT ", seriesSelect, ", ", bucket("time"), " AS b,",
				"\n  COUNT(*) AS n, SUM(value) AS total, MIN(value) AS lo, MAX(value) AS hi, MIN(time) AS t0, MAX(time) AS t1",
				"\nFROM readings")
			if err := s.where(tenant, lo, hi, "<", sel.Matchers); err != nil {
				return err
			}
		case counter:
			// A rollup bucket is a query bucket: its row as it is.
			s.Write("SELECT ", seriesKey, ", bucket AS b,",
				"\n  count, sum, min, max, first_time, last_time, first_value, last_value, increase",
				"\nFROM ", sp.Table)
			if err := s.rollupWhere(tenant, lo, hi, sel.Matchers); err != nil {
				return err
			}
			continue
		default:
			s.Write("SELECT ", seriesKey, ", ", bucket("bucket"), " AS b,",
				"\n  SUM(count) AS n, SUM(sum) AS total, MIN(min) AS lo, MAX(max) AS hi, MIN(first_time) AS t0, MAX(last_time) AS t1",
				"\nFROM ", sp.Table)
			if err := s.rollupWhere(tenant, lo, hi, sel.Matchers); err != nil {
				return err
			}
		}
		s.Write("\nGROUP BY 1, 2, 3, 4, 5, 6")
	}
	s.Write("\n) AS u")
	if !counter {
		s.Write("\nGROUP BY 1, 2, 3, 4, 5, 6")
	}
	return nil
}

// rollupWhere is where for a rollup table, whose labels are stored with
// NULL as "" and whose rows all have values.
func (s *sqlBuilder) rollupWhere(tenant string, lo, hi any, ms []Matcher) error {
	s.Write("\nWHERE tenant_id = ", s.Arg(tenant),
		"\n  AND bucket >= ", s.Arg(lo),
		"\n  AND bucket < ", s.Arg(hi))
	return s.matchers(ms)
}
