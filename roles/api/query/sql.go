package query

import (
	"fmt"

	"github.com/edgeplat/edgeplat/core/db"
)

// The SQL text of a query is assembled from the constant fragments in this
// file, the column expressions of the label whitelist below, the
// dialect's time bucket expression (whose only variable part is the bucket
// width, an integer formatted by core/db) and $n placeholders. Nothing the
// query text contains (label values, regular expressions) is ever written
// into it: those go into the argument list. The label names a query uses
// only select which whitelisted column expression is written. FuzzTranslate
// checks all of this for arbitrary queries.

// seriesSelect is the five series label columns, NULL read as "".
const seriesSelect = "agent_uuid, metric_name, COALESCE(device_name, '') AS device_name, COALESCE(protocol, '') AS protocol, COALESCE(unit, '') AS unit"

// seriesKey is the grouping and partition key of a series.
const seriesKey = "agent_uuid, metric_name, device_name, protocol, unit"

// matchColumn is the whitelist from a label to the SQL expression a
// matcher compares: valueExpr for = and !=, textExpr for regular
// expressions (PostgreSQL's uuid column must become text for ~).
func matchColumn(label string, d db.Dialect) (valueExpr, textExpr string) {
	switch label {
	case LabelAgentUUID:
		if d.Engine == db.Postgres {
			return "agent_uuid", "CAST(agent_uuid AS text)"
		}
		return "agent_uuid", "agent_uuid"
	case LabelMetricName:
		return "metric_name", "metric_name"
	case LabelDeviceName:
		return "COALESCE(device_name, '')", "COALESCE(device_name, '')"
	case LabelProtocol:
		return "COALESCE(protocol, '')", "COALESCE(protocol, '')"
	case LabelUnit:
		return "COALESCE(unit, '')", "COALESCE(unit, '')"
	case AttrQuality:
		return "COALESCE(quality, '')", "COALESCE(quality, '')"
	}
	panic(fmt.Sprintf("BUG: label %q passed the parser's whitelist but has no column", label))
}

// sqlBuilder is the shared builder (every value a bound argument) with the
// dialect the statement is for.
type sqlBuilder struct {
	db.SQLBuilder
	d db.Dialect
}

// where writes the WHERE clause: the tenant, the time range (hiOp is "<"
// or "<="), value IS NOT NULL (a BAD read has no value) and the matchers.
func (s *sqlBuilder) where(tenant string, lo, hi any, hiOp string, ms []Matcher) error {
	s.Write("\nWHERE tenant_id = ", s.Arg(tenant),
		"\n  AND time >= ", s.Arg(lo),
		"\n  AND time ", hiOp, " ", s.Arg(hi),
		"\n  AND value IS NOT NULL")
	return s.matchers(ms)
}

// matchers writes an AND condition per matcher.
func (s *sqlBuilder) matchers(ms []Matcher) error {
	for _, m := range ms {
		valueExpr, textExpr := matchColumn(m.Label, s.d)
		s.Write("\n  AND ")
		switch m.Op {
		case MatchEqual:
			s.Write(valueExpr, " = ", s.Arg(m.Value))
		case MatchNotEqual:
			s.Write(valueExpr, " <> ", s.Arg(m.Value))
		case MatchRegexp, MatchNotRegexp:
			if err := s.regexp(textExpr, m); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *sqlBuilder) regexp(textExpr string, m Matcher) error {
	not := m.Op == MatchNotRegexp
	switch s.d.Engine {
	case db.Postgres:
		re, err := pgRegex(m.Value)
		if err != nil {
			return err
		}
		op := " ~ "
		if not {
			op = " !~ "
		}
		s.Write(textExpr, op, s.Arg(re))
	case db.SQLite:
		if not {
			s.Write("NOT ")
		}
		s.Write(sqliteRegexpFunc, "(", s.Arg(anchored(m.Value)), ", ", textExpr, ")")
	}
	return nil
}

// rawSQL selects the samples of sel in [lo, hi], ordered by series and
// time.
func rawSQL(d db.Dialect, tenant string, sel *Selector, lo, hi any, limit int64) (string, []any, error) {
	s := &sqlBuilder{d: d}
	s.Write("SELECT ", seriesSelect, ", time, value\nFROM readings")
	if err := s.where(tenant, lo, hi, "<=", sel.Matchers); err != nil {
		return "", nil, err
	}
	s.Write("\nORDER BY 1, 2, 3, 4, 5, 6\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args(), nil
}

// bucketSQL selects, per series and bucket of [lo, hi): count, sum, min,
// max, first and last sample time. With counter, it adds the first and
// last value and the bucket's increase with counter resets (a decrease
// counts the new value, as if from zero), computed with window functions
// ordered by time within the bucket.
func bucketSQL(d db.Dialect, tenant string, sel *Selector, bucket string, counter bool, lo, hi any, limit int64) (string, []any, error) {
	s := &sqlBuilder{d: d}
	if err := s.buckets(tenant, sel, bucket, counter, lo, hi); err != nil {
		return "", nil, err
	}
	s.Write("\nORDER BY 1, 2, 3, 4, 5, 6\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args(), nil
}

// buckets writes bucketSQL's statement up to its GROUP BY.
func (s *sqlBuilder) buckets(tenant string, sel *Selector, bucket string, counter bool, lo, hi any) error {
	if !counter {
		s.Write("SELECT ", seriesSelect, ", ", bucket, " AS b,",
			"\n  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time)",
			"\nFROM readings")
		if err := s.where(tenant, lo, hi, "<", sel.Matchers); err != nil {
			return err
		}
		s.Write("\nGROUP BY 1, 2, 3, 4, 5, 6")
		return nil
	}
	s.Write("SELECT ", seriesKey, ", b,",
		"\n  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time),",
		"\n  MAX(CASE WHEN rn = 1 THEN value END),",
		"\n  MAX(CASE WHEN rn = n THEN value END),",
		"\n  SUM(CASE WHEN d IS NULL THEN 0 WHEN d < 0 THEN value ELSE d END)",
		"\nFROM (",
		"\nSELECT ", seriesKey, ", b, time, value,",
		"\n  value - LAG(value) OVER w AS d,",
		"\n  ROW_NUMBER() OVER w AS rn,",
		"\n  COUNT(*) OVER p AS n",
		"\nFROM (",
		"\nSELECT ", seriesSelect, ", ", bucket, " AS b, time, value",
		"\nFROM readings")
	if err := s.where(tenant, lo, hi, "<", sel.Matchers); err != nil {
		return err
	}
	s.Write("\n) AS r",
		"\nWINDOW p AS (PARTITION BY ", seriesKey, ", b),",
		"\n  w AS (PARTITION BY ", seriesKey, ", b ORDER BY time)",
		"\n) AS s",
		"\nGROUP BY 1, 2, 3, 4, 5, 6")
	return nil
}
