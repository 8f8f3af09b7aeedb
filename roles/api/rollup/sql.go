package rollup

import (
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// The statements here are built from constant text and core/db's time
// bucket expression; times are always arguments.

// columns are the rollup tables' columns in order, key first.
const columns = "agent_uuid, metric_name, bucket, tenant_id, device_name, protocol, unit, count, sum, min, max, first_time, last_time, first_value, last_value, increase"

// seriesKey partitions samples and rollup rows into series.
const seriesKey = "agent_uuid, metric_name, b, tenant_id, device_name, protocol, unit"

// upsert ends an INSERT into table: a bucket rolled up again replaces the
// stored row, unless it would count fewer samples. Readings are never
// deleted but by raw retention, so fewer samples means retention removed
// some of the bucket's readings since it was rolled up, and the stored
// row is the better answer (a late reading in such a bucket is then lost
// to the rollup; docs/readings-api.md, section Rollups).
func upsert(table string) string {
	return "\nON CONFLICT (agent_uuid, metric_name, bucket, tenant_id, device_name, protocol, unit) DO UPDATE SET" +
		"\n  count = excluded.count, sum = excluded.sum, min = excluded.min, max = excluded.max," +
		"\n  first_time = excluded.first_time, last_time = excluded.last_time," +
		"\n  first_value = excluded.first_value, last_value = excluded.last_value, increase = excluded.increase" +
		"\nWHERE " + table + ".count <= excluded.count"
}

// hourlySQL rolls the raw readings in [$1, $2) up into readings_hourly.
// The series walk (a loose index scan of readings' primary key) finds the
// series without reading the table, and each series' range is then one
// primary-key range: readings has no index on time alone. The increase
// is the query language's (roles/api/query's bucketSQL): the sum of the
// steps between consecutive samples, a decrease counting the new value.
func hourlySQL(d db.Dialect) string {
	b := bucketExpr(d, time.Hour, "r.time")
	return `WITH RECURSIVE
walk(a) AS (
  SELECT (SELECT r.agent_uuid FROM readings r ORDER BY r.agent_uuid LIMIT 1)
  UNION ALL
  SELECT (SELECT r.agent_uuid FROM readings r WHERE r.agent_uuid > walk.a ORDER BY r.agent_uuid LIMIT 1)
  FROM walk WHERE walk.a IS NOT NULL
),
series(a, m) AS (
  SELECT a, (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = walk.a ORDER BY r.metric_name LIMIT 1)
  FROM walk WHERE walk.a IS NOT NULL
  UNION ALL
  SELECT a, (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = series.a AND r.metric_name > series.m ORDER BY r.metric_name LIMIT 1)
  FROM series WHERE series.m IS NOT NULL
)
INSERT INTO readings_hourly (` + columns + `)
SELECT ` + seriesKey + `,
  COUNT(*), SUM(value), MIN(value), MAX(value), MIN(time), MAX(time),
  MAX(CASE WHEN rn = 1 THEN value END),
  MAX(CASE WHEN rn = n THEN value END),
  SUM(CASE WHEN d IS NULL THEN 0 WHEN d < 0 THEN value ELSE d END)
FROM (
  SELECT ` + seriesKey + `, time, value,
    value - LAG(value) OVER w AS d,
    ROW_NUMBER() OVER w AS rn,
    COUNT(*) OVER p AS n
  FROM (
    SELECT r.agent_uuid, r.metric_name, ` + b + ` AS b, r.tenant_id,
      COALESCE(r.device_name, '') AS device_name, COALESCE(r.protocol, '') AS protocol, COALESCE(r.unit, '') AS unit,
      r.time, r.value
    FROM ` + perSeries(d) + `
  ) AS r
  WINDOW p AS (PARTITION BY ` + seriesKey + `),
    w AS (PARTITION BY ` + seriesKey + ` ORDER BY time)
) AS s
WHERE true
GROUP BY ` + seriesKey + upsert(Hourly)
}

// perSeries joins each series of the walk to its readings in [$1, $2),
// one primary-key range scan per series. PostgreSQL estimates a recursive
// CTE at thousands of rows and would rather scan the whole table and
// merge: a LATERAL subquery that cannot be pulled up (OFFSET 0) keeps the
// per-series scans. SQLite's CROSS JOIN fixes the join order itself.
func perSeries(d db.Dialect) string {
	const cond = `x.agent_uuid = s.a AND x.metric_name = s.m
      AND x.time >= $1 AND x.time < $2
      AND x.value IS NOT NULL AND x.tenant_id IS NOT NULL`
	if d.Engine == db.Postgres {
		return `series s CROSS JOIN LATERAL (
      SELECT x.* FROM readings x WHERE ` + cond + ` OFFSET 0) AS r
    WHERE s.m IS NOT NULL`
	}
	return `series s CROSS JOIN readings r
    WHERE s.m IS NOT NULL AND ` + strings.ReplaceAll(cond, "x.", "r.")
}

// dailySQL rolls the hours in [$1, $2) up into readings_daily. A day's
// increase is its hours' plus the steps between one hour's last value and
// the next one's first, counted as between raw samples.
func dailySQL(d db.Dialect) string {
	b := bucketExpr(d, day, "h.bucket")
	key := "h.agent_uuid, h.metric_name, " + b + ", h.tenant_id, h.device_name, h.protocol, h.unit"
	return `INSERT INTO readings_daily (` + columns + `)
SELECT ` + seriesKey + `,
  SUM(count), SUM(sum), MIN(min), MAX(max), MIN(first_time), MAX(last_time),
  MAX(CASE WHEN rn = 1 THEN first_value END),
  MAX(CASE WHEN rn = n THEN last_value END),
  SUM(increase) + SUM(CASE WHEN d IS NULL THEN 0 WHEN d < 0 THEN first_value ELSE d END)
FROM (
  SELECT h.agent_uuid, h.metric_name, ` + b + ` AS b, h.tenant_id, h.device_name, h.protocol, h.unit,
    h.count, h.sum, h.min, h.max, h.first_time, h.last_time, h.first_value, h.last_value, h.increase,
    h.first_value - LAG(h.last_value) OVER w AS d,
    ROW_NUMBER() OVER w AS rn,
    COUNT(*) OVER p AS n
  FROM readings_hourly h
  WHERE h.bucket >= $1 AND h.bucket < $2
  WINDOW p AS (PARTITION BY ` + key + `),
    w AS (PARTITION BY ` + key + ` ORDER BY h.bucket)
) AS s
WHERE true
GROUP BY ` + seriesKey + upsert(Daily)
}

// bucketExpr is core/db's bucket expression for a width known to be valid.
func bucketExpr(d db.Dialect, w time.Duration, column string) string {
	e, err := d.TimeBucket(w, column)
	if err != nil {
		panic("BUG: rollup bucket width " + w.String() + ": " + err.Error())
	}
	return e
}
