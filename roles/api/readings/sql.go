package readings

import (
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// SQL text here is built from constant fragments, core/db's time bucket
// expression (whose only variable part is an integer width) and $n
// placeholders. Tenant ids, agent ids, metric names, times and limits are
// always bound arguments; TestSQLCarriesNoInput checks it.

// sqlBuilder is the shared builder (every value a bound argument) with
// this package's statement fragments.
type sqlBuilder struct{ db.SQLBuilder }

// byteOrder makes a text column sort by bytes on PostgreSQL whatever the
// database's collation, as SQLite's BINARY does, so a LIMIT keeps the same
// rows and results come out in the same order on both engines.
func byteOrder(d db.Dialect, column string) string {
	if d.Engine == db.Postgres {
		return column + ` COLLATE "C"`
	}
	return column
}

// seriesFilter narrows the series walk; empty fields do not filter.
// agents and metrics list several values (an export's selection), each
// probed as agent and metric are; agent and metric are the one-value
// form the readings endpoints use.
type seriesFilter struct {
	agent  string // canonical lowercase UUID
	metric string
	// agents are canonical lowercase UUIDs; both lists are sorted and
	// hold each value once.
	agents  []string
	metrics []string
}

// agentList is every agent the filter names, none for all.
func (f seriesFilter) agentList() []string {
	if f.agent != "" {
		return []string{f.agent}
	}
	return f.agents
}

// metricList is every metric the filter names, none for all.
func (f seriesFilter) metricList() []string {
	if f.metric != "" {
		return []string{f.metric}
	}
	return f.metrics
}

// walkSeries writes a WITH RECURSIVE clause defining series(a, m): the
// (agent, metric) pairs of the tenant, found by a loose index scan of the
// primary key (see "Access path" in the package doc). tenant must already
// be argument $1. Rows with m NULL are walk bookkeeping; callers filter
// them out.
func (s *sqlBuilder) walkSeries(tenant string, f seriesFilter) {
	s.Write("WITH RECURSIVE\n")
	s.walkTable(tenant, f, "", "readings", "time")
}

// walkTable writes the walk over table, whose primary key leads with
// agent_uuid, metric_name and then the time column tcol: p+"series"(a, m)
// and its helpers p+"walk" and p+"owned", so that walks over several
// tables fit in one WITH clause. A rollup table outlives the readings it
// summarises: an agent the registry does not know belongs to the tenant of
// its newest reading, or when raw retention deleted them all, of its
// newest rollup row.
func (s *sqlBuilder) walkTable(tenant string, f seriesFilter, p, table, tcol string) {
	walk, owned, series := p+"walk", p+"owned", p+"series"
	if agents := f.agentList(); len(agents) > 0 {
		// One key probe per named agent; an agent without readings gives
		// a NULL row, which owned drops.
		s.Write(walk, "(a) AS (\n")
		for i, a := range agents {
			if i > 0 {
				s.Write("  UNION ALL\n")
			}
			s.Write("  SELECT (SELECT r.agent_uuid FROM ", table, " r WHERE r.agent_uuid = ", s.Arg(a), " ORDER BY r.agent_uuid LIMIT 1)\n")
		}
		s.Write("),\n")
	} else {
		s.Write(walk, "(a) AS (\n",
			"  SELECT (SELECT r.agent_uuid FROM ", table, " r ORDER BY r.agent_uuid LIMIT 1)\n",
			"  UNION ALL\n",
			"  SELECT (SELECT r.agent_uuid FROM ", table, " r WHERE r.agent_uuid > ", walk, ".a ORDER BY r.agent_uuid LIMIT 1)\n",
			"  FROM ", walk, " WHERE ", walk, ".a IS NOT NULL\n",
			"),\n")
	}
	// A registered agent belongs to the tenant the registry names, whatever
	// rows another tenant wrote to it before writes were checked against
	// the registry. Only an agent the registry does not know (readings of
	// a deleted agent, or loaded by other means) belongs to the tenant of
	// its newest row of its last metric: one index probe, where checking
	// every row would read the agent's whole history when it belongs to
	// someone else. A tenant id that is no key owns no registered agent.
	tenantUUID, _ := codec.UUIDFromID(tenant)
	s.Write(owned, "(a) AS (\n",
		"  SELECT a FROM ", walk, "\n",
		"  WHERE a IS NOT NULL\n",
		"    AND COALESCE(\n",
		"      (SELECT CAST(g.tenant_uuid AS TEXT) = ", s.Arg(tenantUUID), " FROM agents g WHERE g.uuid = ", walk, ".a),\n",
		"      (SELECT r.tenant_id FROM readings r WHERE r.agent_uuid = ", walk, ".a ORDER BY r.metric_name DESC, r.time DESC LIMIT 1) = $1")
	if table != "readings" {
		s.Write(",\n      (SELECT r.tenant_id FROM ", table, " r WHERE r.agent_uuid = ", walk, ".a ORDER BY r.metric_name DESC, r.", tcol, " DESC LIMIT 1) = $1")
	}
	s.Write(")\n),\n")
	if metrics := f.metricList(); len(metrics) > 0 {
		s.Write(series, "(a, m) AS (\n")
		for i, m := range metrics {
			if i > 0 {
				s.Write("  UNION ALL\n")
			}
			s.Write("  SELECT a, (SELECT r.metric_name FROM ", table, " r WHERE r.agent_uuid = ", owned, ".a AND r.metric_name = ", s.Arg(m), " LIMIT 1)\n",
				"  FROM ", owned, "\n")
		}
		s.Write(")")
		return
	}
	s.Write(series, "(a, m) AS (\n",
		"  SELECT a, (SELECT r.metric_name FROM ", table, " r WHERE r.agent_uuid = ", owned, ".a ORDER BY r.metric_name LIMIT 1)\n",
		"  FROM ", owned, "\n",
		"  UNION ALL\n",
		"  SELECT a, (SELECT r.metric_name FROM ", table, " r WHERE r.agent_uuid = ", series, ".a AND r.metric_name > ", series, ".m ORDER BY r.metric_name LIMIT 1)\n",
		"  FROM ", series, " WHERE ", series, ".m IS NOT NULL\n",
		")")
}

// walkLatest adds latest(a, m, t) to the walk: each series' newest time.
func (s *sqlBuilder) walkLatest() {
	s.Write(",\nlatest(a, m, t) AS (\n",
		"  SELECT a, m, (SELECT r.time FROM readings r WHERE r.agent_uuid = series.a AND r.metric_name = series.m ORDER BY r.time DESC LIMIT 1)\n",
		"  FROM series WHERE series.m IS NOT NULL\n",
		")")
}

// latestSQL selects the newest row of each series of the tenant, ordered
// by agent and metric, at most limit rows. The last column is the first
// time of the series when withStats, with its row count.
func latestSQL(d db.Dialect, tenant string, f seriesFilter, withStats bool, limit int64) (string, []any) {
	s := &sqlBuilder{}
	s.Arg(tenant)
	s.walkSeries(tenant, f)
	s.walkLatest()
	s.Write("\nSELECT r.agent_uuid, r.metric_name, r.time, r.value, r.device_name, r.protocol, r.unit, r.quality, r.anomaly_score")
	if withStats {
		// No tenant condition: the series is the tenant's (an agent's
		// readings all are), and without it both read the key alone, an
		// index-only scan instead of a heap page per row.
		s.Write(",\n  (SELECT f.time FROM readings f WHERE f.agent_uuid = l.a AND f.metric_name = l.m ORDER BY f.time LIMIT 1),",
			"\n  (SELECT COUNT(*) FROM readings c WHERE c.agent_uuid = l.a AND c.metric_name = l.m)")
	}
	// CROSS JOIN fixes the join order on SQLite (the walk outside, a
	// primary key probe inside); on PostgreSQL it is a plain join.
	s.Write("\nFROM latest l CROSS JOIN readings r",
		"\nWHERE r.agent_uuid = l.a AND r.metric_name = l.m AND r.time = l.t AND r.tenant_id = $1",
		"\nORDER BY r.agent_uuid, ", byteOrder(d, "r.metric_name"),
		"\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args()
}

// metricNamesSQL selects the distinct metric names of the tenant's series
// in byte order, at most limit. A series counts only when its newest row
// is the tenant's, as the other endpoints read only the tenant's rows:
// readings another tenant wrote to an agent before writes were checked
// against the registry must not show it the agent's other metric names.
func metricNamesSQL(d db.Dialect, tenant string, limit int64) (string, []any) {
	s := &sqlBuilder{}
	s.Arg(tenant)
	s.walkSeries(tenant, seriesFilter{})
	// GROUP BY rather than DISTINCT: PostgreSQL lets DISTINCT order only
	// by the selected expression, and m COLLATE "C" is another one.
	s.Write("\nSELECT m FROM series WHERE m IS NOT NULL",
		"\n  AND (SELECT r.tenant_id FROM readings r WHERE r.agent_uuid = series.a AND r.metric_name = series.m ORDER BY r.time DESC LIMIT 1) = $1",
		"\nGROUP BY m",
		"\nORDER BY ", byteOrder(d, "m"),
		"\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args()
}

// bucketSQL selects, per series and bucket of the given width, the count,
// sum, minimum and maximum of the values in [lo, hi], ordered by series
// and bucket, at most limit rows (every row when limit is 0, for a
// streamed export). Readings without a value are left out.
func bucketSQL(d db.Dialect, tenant string, f seriesFilter, bucket string, lo, hi any, limit int64) (string, []any) {
	s := &sqlBuilder{}
	s.Arg(tenant)
	s.walkSeries(tenant, f)
	s.Write("\nSELECT r.agent_uuid, r.metric_name, ", bucket, " AS b,",
		"\n  COUNT(r.value), SUM(r.value), MIN(r.value), MAX(r.value)",
		"\nFROM series s CROSS JOIN readings r",
		"\nWHERE s.m IS NOT NULL AND r.agent_uuid = s.a AND r.metric_name = s.m",
		"\n  AND r.time >= ", s.Arg(lo), " AND r.time <= ", s.Arg(hi),
		"\n  AND r.tenant_id = $1 AND r.value IS NOT NULL",
		"\nGROUP BY 1, 2, 3",
		"\nORDER BY r.agent_uuid, ", byteOrder(d, "r.metric_name"), ", b")
	if limit > 0 {
		s.Write("\nLIMIT ", s.Arg(limit))
	}
	return s.String(), s.Args()
}

// bucketSpansSQL is bucketSQL over spans that rollup.Coverage.Split cut
// [lo, hi] into: raw readings for the raw spans, rollup rows for the
// others, each walked by its own table's key (a series whose readings
// raw retention deleted lives on in the rollups). The spans' partial
// statistics of a bucket are combined by the outer GROUP BY, exactly as
// the samples' would be; only the sum's rounding may differ.
func bucketSpansSQL(d db.Dialect, tenant string, f seriesFilter, w time.Duration, spans []rollup.Span, limit int64) (string, []any) {
	s := &sqlBuilder{}
	s.Arg(tenant)
	s.walkSeries(tenant, f)
	var walked []string
	for _, sp := range spans {
		if sp.Table != rollup.Raw && !slices.Contains(walked, sp.Table) {
			walked = append(walked, sp.Table)
			s.Write(",\n")
			s.walkTable(tenant, f, sp.Table+"_", sp.Table, "bucket")
		}
	}
	s.Write("\nSELECT agent_uuid, metric_name, b, CAST(SUM(n) AS BIGINT), SUM(total), MIN(lo), MAX(hi)\nFROM (")
	for i, sp := range spans {
		if i > 0 {
			s.Write("\n  UNION ALL")
		}
		lo, hi := s.Arg(d.TimeArg(sp.From)), s.Arg(d.TimeArg(sp.To))
		if sp.Table == rollup.Raw {
			s.Write("\n  SELECT s.a AS agent_uuid, s.m AS metric_name, ", timeBucket(d, w, "r.time"), " AS b,",
				"\n    COUNT(r.value) AS n, SUM(r.value) AS total, MIN(r.value) AS lo, MAX(r.value) AS hi",
				"\n  FROM ")
			s.perSeries(d, "series", "readings", "r",
				"r.time >= "+lo+" AND r.time < "+hi+" AND r.tenant_id = $1 AND r.value IS NOT NULL")
			s.Write("\n  GROUP BY 1, 2, 3")
			continue
		}
		s.Write("\n  SELECT s.a AS agent_uuid, s.m AS metric_name, ", timeBucket(d, w, "r.bucket"), " AS b,",
			"\n    SUM(r.count) AS n, SUM(r.sum) AS total, MIN(r.min) AS lo, MAX(r.max) AS hi",
			"\n  FROM ")
		s.perSeries(d, sp.Table+"_series", sp.Table, "r",
			"r.bucket >= "+lo+" AND r.bucket < "+hi+" AND r.tenant_id = $1")
		s.Write("\n  GROUP BY 1, 2, 3")
	}
	s.Write("\n) AS u",
		"\nGROUP BY 1, 2, 3",
		"\nORDER BY agent_uuid, ", byteOrder(d, "metric_name"), ", b")
	if limit > 0 {
		s.Write("\nLIMIT ", s.Arg(limit))
	}
	return s.String(), s.Args()
}

// perSeries writes the FROM clause joining each series of the walk cte
// to its rows of table (alias a) that match cond, one primary-key range
// scan per series. PostgreSQL estimates a recursive CTE at thousands of
// rows and would scan and sort the whole table instead: a LATERAL
// subquery that cannot be pulled up (OFFSET 0) keeps the per-series
// scans. SQLite's CROSS JOIN fixes the join order itself.
func (s *sqlBuilder) perSeries(d db.Dialect, cte, table, a, cond string) {
	if d.Engine == db.Postgres {
		s.Write(cte, " s CROSS JOIN LATERAL (",
			"\n    SELECT ", a, ".* FROM ", table, " ", a,
			"\n    WHERE ", a, ".agent_uuid = s.a AND ", a, ".metric_name = s.m",
			"\n      AND ", cond, "\n    OFFSET 0) AS ", a,
			"\n  WHERE s.m IS NOT NULL")
		return
	}
	s.Write(cte, " s CROSS JOIN ", table, " ", a,
		"\n  WHERE s.m IS NOT NULL AND ", a, ".agent_uuid = s.a AND ", a, ".metric_name = s.m",
		"\n    AND ", cond)
}

// timeBucket is core/db's bucket expression for a width the endpoints
// allow.
func timeBucket(d db.Dialect, w time.Duration, column string) string {
	e, err := d.TimeBucket(w, column)
	if err != nil {
		panic("BUG: bucket width " + w.String() + ": " + err.Error())
	}
	return e
}

// seriesRawSQL selects every reading in [lo, hi] of the tenant's series
// matching f, ordered by agent, metric (byte order) and time, for a
// streamed export: the walk finds the series, the key reads each one's
// range in order.
func seriesRawSQL(d db.Dialect, tenant string, f seriesFilter, lo, hi any) (string, []any) {
	s := &sqlBuilder{}
	s.Arg(tenant)
	s.walkSeries(tenant, f)
	s.Write("\nSELECT r.agent_uuid, r.metric_name, r.time, r.value, r.device_name, r.protocol, r.unit, r.quality, r.anomaly_score",
		"\nFROM series s CROSS JOIN readings r",
		"\nWHERE s.m IS NOT NULL AND r.agent_uuid = s.a AND r.metric_name = s.m",
		"\n  AND r.time >= ", s.Arg(lo), " AND r.time <= ", s.Arg(hi),
		"\n  AND r.tenant_id = $1",
		"\nORDER BY r.agent_uuid, ", byteOrder(d, "r.metric_name"), ", r.time")
	return s.String(), s.Args()
}

// rawSQL selects one series' readings in [lo, hi] in time order, at most
// limit. A single series needs no walk: the primary key leads with it.
func rawSQL(tenant, agent, metric string, lo, hi any, limit int64) (string, []any) {
	s := &sqlBuilder{}
	s.Write("SELECT time, value, quality, anomaly_score FROM readings",
		"\nWHERE agent_uuid = ", s.Arg(agent), " AND metric_name = ", s.Arg(metric),
		"\n  AND time >= ", s.Arg(lo), " AND time <= ", s.Arg(hi),
		"\n  AND tenant_id = ", s.Arg(tenant),
		"\nORDER BY time",
		"\nLIMIT ", s.Arg(limit))
	return s.String(), s.Args()
}

// insertSQL writes one reading; a row with the same key is kept as it is.
const insertSQL = `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`
