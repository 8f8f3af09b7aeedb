package readings

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

const day = 24 * time.Hour

// intervals are the bucket widths of /readings/:agent_uuid/timeseries, and
// granularities those of the hourly and daily statistics.
var (
	intervals     = map[string]time.Duration{"1m": time.Minute, "1h": time.Hour, "1d": day}
	granularities = map[string]time.Duration{"hourly": time.Hour, "daily": day}
)

// defaultBucketStart is the start a bucketed request gets without one:
// 24 whole buckets of an hour or less, 30 whole days, so the default range
// begins on a bucket boundary and its first bucket is complete.
func defaultBucketStart(w time.Duration) defaultStart {
	if w == day {
		return wholeBuckets(30, day)
	}
	return wholeBuckets(int(day/w), w)
}

// checkRange enforces max_range and max_points_per_series for buckets of
// width w (0 for raw points, whose count is checked while reading).
func (h *handler) checkRange(r timeRange, w time.Duration) error {
	if got := r.end.Sub(r.start); got > h.lim.MaxRange {
		return &limitError{msg: fmt.Sprintf("time range (end - start) %s exceeds the limit of %s (max_range): shorten the range",
			formatSpan(got), formatSpan(h.lim.MaxRange))}
	}
	if w == 0 {
		return nil
	}
	// Every bucket the range overlaps, known before reading a row.
	n := int64(floorTo(r.end, w).Sub(floorTo(r.start, w))/w) + 1
	if n > int64(h.lim.MaxPointsPerSeries) {
		return &limitError{msg: fmt.Sprintf("buckets per series %d exceeds the limit of %d (max_points_per_series): use wider buckets or a shorter range",
			n, h.lim.MaxPointsPerSeries)}
	}
	return nil
}

// queryBuckets returns the statistics of the tenant's series matching f in
// w-wide buckets over r: each bucket summarises the values inside both the
// bucket and [start, end], so the first and last buckets may be partial.
func (h *handler) queryBuckets(ctx context.Context, d *db.DB, tenant string, f seriesFilter, w time.Duration, r timeRange) ([]bucketSeries, error) {
	if err := h.checkRange(r, w); err != nil {
		return nil, err
	}
	dl := d.Dialect()
	out := []bucketSeries{}
	err := rollup.ReadTx(ctx, d, func(tx *sql.Tx) error {
		// Whole hours and days the rollups hold come from them, the rest
		// from raw readings (docs/readings-api.md, section Rollups).
		cov, err := rollup.Load(ctx, tx)
		if err != nil {
			return err
		}
		var text string
		var args []any
		if spans := cov.Split(r.start, r.end.Add(time.Microsecond), w, false); rollup.UsesRollups(spans) {
			text, args = bucketSpansSQL(dl, tenant, f, w, spans, int64(h.lim.MaxRows)+1)
		} else {
			text, args = bucketSQL(dl, tenant, f, timeBucket(dl, w, "r.time"), dl.TimeArg(r.start), dl.TimeArg(r.end), int64(h.lim.MaxRows)+1)
		}
		rows, err := tx.QueryContext(ctx, text, args...)
		if err != nil {
			return fmt.Errorf("query buckets: %w", err)
		}
		defer rows.Close()
		read := 0
		for rows.Next() {
			var (
				agent, metric string
				bt            db.Timestamp
				n             int64
				sum, lo, hi   float64
			)
			if err := rows.Scan(&agent, &metric, &bt, &n, &sum, &lo, &hi); err != nil {
				return fmt.Errorf("scan bucket: %w", err)
			}
			if read++; read > h.lim.MaxRows {
				return &limitError{msg: fmt.Sprintf("rows read more than %d exceeds the limit of %d (max_rows): filter by agent_uuid or metric, or shorten the range",
					h.lim.MaxRows, h.lim.MaxRows)}
			}
			if len(out) == 0 || out[len(out)-1].AgentUUID != agent || out[len(out)-1].MetricName != metric {
				if len(out) == h.lim.MaxSeries {
					return &limitError{msg: fmt.Sprintf("series more than %d exceeds the limit of %d (max_series): filter by agent_uuid or metric",
						h.lim.MaxSeries, h.lim.MaxSeries)}
				}
				out = append(out, bucketSeries{AgentUUID: agent, MetricName: metric})
			}
			s := &out[len(out)-1]
			// The average is computed here from the sum so that both engines
			// divide the same two numbers.
			s.Buckets = append(s.Buckets, bucket{Time: utcTime(bt.Time), Min: number(lo), Max: number(hi), Avg: number(sum / float64(n)), Count: n})
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read buckets: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// hourly is GET /readings/hourly.
func (h *handler) hourly(c *gin.Context) { h.serveStats(c, "hourly") }

// daily is GET /readings/daily.
func (h *handler) daily(c *gin.Context) { h.serveStats(c, "daily") }

func (h *handler) serveStats(c *gin.Context, granularity string) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	w := granularities[granularity]
	p, err := newParams(c.Request.URL.Query(), "start", "end", "agent_uuid", "metric")
	var f seriesFilter
	var r timeRange
	if err == nil {
		f.agent, err = p.optAgent("agent_uuid")
	}
	if err == nil {
		f.metric, err = p.optMetric("metric")
	}
	if err == nil {
		r, err = p.rangeParams(h.Now(), defaultBucketStart(w))
	}
	if err != nil {
		h.fail(c, granularity, err)
		return
	}
	h.serveBuckets(c, tenant, f, w, r, gin.H{"granularity": granularity})
}

// aggregate is GET /readings/:agent_uuid/aggregate: hourly or daily
// statistics of one agent's metrics.
func (h *handler) aggregate(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	var f seriesFilter
	var r timeRange
	var granularity string
	p, err := newParams(c.Request.URL.Query(), "start", "end", "metric", "granularity")
	if err == nil {
		f.agent, err = parseAgent("agent_uuid", c.Param("agent_uuid"))
	}
	if err == nil {
		f.metric, err = p.optMetric("metric")
	}
	if err == nil {
		granularity, err = p.oneOf("granularity", "hourly", "hourly", "daily")
	}
	if err == nil {
		r, err = p.rangeParams(h.Now(), defaultBucketStart(granularities[granularity]))
	}
	if err != nil {
		h.fail(c, "aggregate", err)
		return
	}
	h.serveBuckets(c, tenant, f, granularities[granularity], r, gin.H{"agentUuid": f.agent, "granularity": granularity})
}

// serveBuckets answers body plus start, end and the series.
func (h *handler) serveBuckets(c *gin.Context, tenant string, f seriesFilter, w time.Duration, r timeRange, body gin.H) {
	d := h.DB
	series, err := h.queryBuckets(c.Request.Context(), d, tenant, f, w, r)
	if err != nil {
		h.fail(c, "buckets", err)
		return
	}
	body["start"], body["end"], body["series"] = utcTime(r.start), utcTime(r.end), series
	c.JSON(http.StatusOK, body)
}

// timeseries is GET /readings/:agent_uuid/timeseries: one metric of one
// agent, raw or in buckets.
func (h *handler) timeseries(c *gin.Context) {
	tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	var agent, metric, interval string
	var r timeRange
	p, err := newParams(c.Request.URL.Query(), "start", "end", "metric", "interval")
	if err == nil {
		agent, err = parseAgent("agent_uuid", c.Param("agent_uuid"))
	}
	if err == nil {
		metric, err = p.optMetric("metric")
		if err == nil && metric == "" {
			err = badParam("metric", "is required: the metric name, as in metric=boiler.temp")
		}
	}
	if err == nil {
		interval, err = p.oneOf("interval", "", "1m", "1h", "1d")
	}
	w := intervals[interval]
	if err == nil {
		def := span(day)
		if w != 0 {
			def = defaultBucketStart(w)
		}
		r, err = p.rangeParams(h.Now(), def)
	}
	if err != nil {
		h.fail(c, "timeseries", err)
		return
	}
	d := h.DB
	body := gin.H{"agentUuid": agent, "metricName": metric, "start": utcTime(r.start), "end": utcTime(r.end)}
	if w == 0 {
		points, err := h.queryRaw(c.Request.Context(), d, tenant, agent, metric, r)
		if err != nil {
			h.fail(c, "timeseries", err)
			return
		}
		body["points"] = points
		c.JSON(http.StatusOK, body)
		return
	}
	series, err := h.queryBuckets(c.Request.Context(), d, tenant, seriesFilter{agent: agent, metric: metric}, w, r)
	if err != nil {
		h.fail(c, "timeseries", err)
		return
	}
	points := []bucket{}
	if len(series) > 0 {
		points = series[0].Buckets
	}
	body["interval"], body["points"] = interval, points
	c.JSON(http.StatusOK, body)
}

// queryRaw returns one series' readings in r, failing past
// max_points_per_series.
func (h *handler) queryRaw(ctx context.Context, d *db.DB, tenant, agent, metric string, r timeRange) ([]rawPoint, error) {
	if err := h.checkRange(r, 0); err != nil {
		return nil, err
	}
	dl := d.Dialect()
	text, args := rawSQL(tenant, agent, metric, dl.TimeArg(r.start), dl.TimeArg(r.end), int64(h.lim.MaxPointsPerSeries)+1)
	rows, err := d.ReadSQL().QueryContext(ctx, text, args...)
	if err != nil {
		return nil, fmt.Errorf("query raw readings: %w", err)
	}
	defer rows.Close()
	out := []rawPoint{}
	for rows.Next() {
		var (
			ts       db.Timestamp
			v, score sql.NullFloat64
			qual     sql.NullString
		)
		if err := rows.Scan(&ts, &v, &qual, &score); err != nil {
			return nil, fmt.Errorf("scan raw reading: %w", err)
		}
		if len(out) == h.lim.MaxPointsPerSeries {
			return nil, &limitError{msg: fmt.Sprintf("points more than %d exceeds the limit of %d (max_points_per_series): shorten the range, or use interval=1m, 1h or 1d",
				h.lim.MaxPointsPerSeries, h.lim.MaxPointsPerSeries)}
		}
		out = append(out, rawPoint{Time: utcTime(ts.Time), Value: numberPtr(v.Float64, v.Valid), Quality: qual.String,
			AnomalyScore: numberPtr(score.Float64, score.Valid)})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read raw readings: %w", err)
	}
	return out, nil
}

// formatSpan writes a duration for people: "90d", "1d12h", "45m", "1m30s".
func formatSpan(d time.Duration) string {
	if d <= 0 || d%time.Second != 0 {
		return d.String()
	}
	var out string
	for _, u := range []struct {
		name string
		d    time.Duration
	}{{"d", day}, {"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}} {
		if n := d / u.d; n > 0 {
			out += strconv.FormatInt(int64(n), 10) + u.name
			d -= n * u.d
		}
	}
	return out
}
