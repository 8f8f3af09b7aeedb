package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/gin-gonic/gin"
)

// latest reads the agent's stored report of kind; sql.ErrNoRows when it
// has none (or it is another tenant's).
func (rp *reports) latest(ctx context.Context, tenant, agent, kind string) (doc string, reportedAt, receivedAt time.Time, err error) {
	var rep, rec db.Timestamp
	err = rp.db.ReadSQL().QueryRowContext(ctx,
		`SELECT report, reported_at, received_at FROM agent_reports WHERE tenant_id = $1 AND agent_uuid = $2 AND kind = $3`,
		tenant, agent, kind).Scan(&doc, &rep, &rec)
	return doc, rep.Time, rec.Time, err
}

// deviceState is one device of GET /agents/:uuid/device-health: what the
// latest state report said of the endpoint, with Status "stale" when that
// report is older than the silence that makes an agent offline.
type deviceState struct {
	control.EndpointState
	Status         string `json:"status"`
	ReportedStatus string `json:"reportedStatus"`
	Stale          bool   `json:"stale"`
}

// stateEndpoints is the part of a control.StateReport the device routes
// read; a report that is not one has no endpoints.
type stateEndpoints struct {
	Endpoints []control.EndpointState `json:"endpoints"`
}

// deviceHealth serves GET /agents/:uuid/device-health (docs/agents-api.md).
func (rp *reports) deviceHealth(c *gin.Context) {
	tenant, agent, ok := agentOf(c)
	if !ok {
		return
	}
	doc, reportedAt, receivedAt, err := rp.latest(c.Request.Context(), tenant, agent, "state")
	if !rp.reportFound(c, agent, err) {
		return
	}
	var st stateEndpoints
	// A stored report is a JSON object (decodeReport); one whose
	// endpoints are not the contract's shape has none to show.
	_ = json.Unmarshal([]byte(doc), &st)
	stale := rp.now().Sub(receivedAt) > rp.offlineAfter
	devices := make([]deviceState, 0, len(st.Endpoints))
	for _, ep := range st.Endpoints {
		d := deviceState{EndpointState: ep, Status: ep.Status, ReportedStatus: ep.Status, Stale: stale}
		if stale {
			d.Status = "stale"
		}
		devices = append(devices, d)
	}
	c.JSON(http.StatusOK, gin.H{"agentUuid": agent, "reportedAt": reportedAt, "receivedAt": receivedAt, "stale": stale, "devices": devices})
}

// reportFound answers the request when err says there is no report (404)
// or the database failed (503), and reports whether the caller goes on.
func (rp *reports) reportFound(c *gin.Context, agent string, err error) bool {
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Another tenant's agent looks exactly like one that never reported.
		WriteError(c, http.StatusNotFound, "not_found", "agent "+agent+" has sent no state report yet")
		return false
	case err != nil:
		rp.log.Warn("read agent report", "err", err)
		WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database did not answer")
		return false
	}
	return true
}

// Limits of a device history query: a range of at most maxHistoryRange in
// at most maxHistoryBuckets buckets of at least a second.
const (
	maxHistoryRange   = 31 * 24 * time.Hour
	maxHistoryBuckets = 1440
	defaultHistory    = time.Hour
	defaultBucket     = time.Minute
)

// historyQuery is a parsed device history request.
type historyQuery struct {
	from, to time.Time
	bucket   time.Duration
}

// parseHistoryQuery reads from, to (RFC 3339) and bucket (a Go duration
// such as 5m, or seconds) of a history request; now is the default to.
func parseHistoryQuery(from, to, bucket string, now time.Time) (historyQuery, error) {
	q := historyQuery{to: now, bucket: defaultBucket}
	if to != "" {
		t, err := time.Parse(time.RFC3339Nano, to)
		if err != nil {
			return q, fmt.Errorf("to must be an RFC 3339 time, got %s", strconv.Quote(clipQ(to)))
		}
		q.to = t
	}
	q.from = q.to.Add(-defaultHistory)
	if from != "" {
		t, err := time.Parse(time.RFC3339Nano, from)
		if err != nil {
			return q, fmt.Errorf("from must be an RFC 3339 time, got %s", strconv.Quote(clipQ(from)))
		}
		q.from = t
	}
	if bucket != "" {
		d, err := time.ParseDuration(bucket)
		if err != nil {
			n, nerr := strconv.ParseInt(bucket, 10, 64)
			if nerr != nil || n <= 0 || n > int64(maxHistoryRange/time.Second) {
				return q, fmt.Errorf("bucket must be a duration (30s, 5m, 1h) or whole seconds, got %s", strconv.Quote(clipQ(bucket)))
			}
			d = time.Duration(n) * time.Second
		}
		q.bucket = d
	}
	switch {
	case q.bucket < time.Second || q.bucket%time.Second != 0:
		return q, fmt.Errorf("bucket must be a whole number of seconds, at least 1s, got %s", q.bucket)
	case !q.from.Before(q.to):
		return q, errors.New("from must be before to")
	case q.to.Sub(q.from) > maxHistoryRange:
		return q, fmt.Errorf("the range from..to must be at most %s, got %s", maxHistoryRange, q.to.Sub(q.from))
	case q.to.Sub(q.from)/q.bucket >= maxHistoryBuckets:
		return q, fmt.Errorf("the range from..to holds more than %d buckets of %s: widen bucket", maxHistoryBuckets, q.bucket)
	}
	q.from, q.to = q.from.UTC().Truncate(time.Microsecond), q.to.UTC().Truncate(time.Microsecond)
	return q, nil
}

func clipQ(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// historyBucket is one time bucket of a device's read history.
type historyBucket struct {
	Time      time.Time        `json:"time"`
	Count     int64            `json:"count"`
	ByQuality map[string]int64 `json:"byQuality"`
}

// deviceHistory serves GET
// /agents/:uuid/protocol-adapters/:protocol/:deviceName/history
// (docs/agents-api.md): the device's readings counted per time bucket and
// quality, and the poll counters of the latest state report.
func (rp *reports) deviceHistory(c *gin.Context) {
	tenant, agent, ok := agentOf(c)
	if !ok {
		return
	}
	protocol, device := c.Param("protocol"), c.Param("deviceName")
	q, err := parseHistoryQuery(c.Query("from"), c.Query("to"), c.Query("bucket"), rp.now())
	if err != nil {
		WriteError(c, http.StatusBadRequest, "invalid_parameter", err.Error())
		return
	}
	ctx := c.Request.Context()
	buckets, total, err := readHistory(ctx, rp.db, tenant, agent, protocol, device, q)
	if err != nil {
		rp.log.Warn("read device history", "err", err)
		WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database did not answer")
		return
	}
	body := gin.H{"agentUuid": agent, "protocol": protocol, "deviceName": device, "from": q.from, "to": q.to,
		"bucketSeconds": int64(q.bucket / time.Second), "total": total, "buckets": buckets, "report": nil}
	doc, reportedAt, receivedAt, err := rp.latest(ctx, tenant, agent, "state")
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		rp.log.Warn("read agent report", "err", err)
		WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database did not answer")
		return
	default:
		var st stateEndpoints
		_ = json.Unmarshal([]byte(doc), &st)
		for _, ep := range st.Endpoints {
			if ep.Name == device && ep.Protocol == protocol {
				body["report"] = gin.H{"reportedAt": reportedAt, "receivedAt": receivedAt, "stale": rp.now().Sub(receivedAt) > rp.offlineAfter,
					"status": ep.Status, "polls": ep.Polls, "pollFailures": ep.PollFailures, "readsGood": ep.ReadsGood, "readsBad": ep.ReadsBad,
					"lastPoll": ep.LastPoll, "lastSeen": ep.LastSeen, "lastError": ep.LastError}
				break
			}
		}
	}
	c.JSON(http.StatusOK, body)
}

// readHistory counts the device's readings in q's buckets by quality. Every
// bucket of the range is in the answer, the empty ones with a zero count,
// so a gap in the reads shows as one.
func readHistory(ctx context.Context, d *db.DB, tenant, agent, protocol, device string, q historyQuery) ([]historyBucket, int64, error) {
	dl := d.Dialect()
	expr, err := dl.TimeBucket(q.bucket, "r.time")
	if err != nil {
		return nil, 0, err
	}
	// The first bucket is the one from falls in, aligned as TimeBucket
	// aligns (docs: same origin on every engine).
	origin := time.Date(2000, 1, 3, 0, 0, 0, 0, time.UTC)
	start := origin.Add(q.from.Sub(origin) / q.bucket * q.bucket)
	if start.After(q.from) {
		start = start.Add(-q.bucket)
	}
	var out []historyBucket
	index := map[int64]int{}
	for t := start; t.Before(q.to); t = t.Add(q.bucket) {
		index[t.UnixMicro()] = len(out)
		out = append(out, historyBucket{Time: t, ByQuality: map[string]int64{}})
	}
	// The key is (agent, metric, time) and a device is no part of it: the
	// agent's metric names are walked one index probe each (a loose index
	// scan), and each metric's rows in the range read by the key, so the
	// cost follows the range asked for, never the agent's whole history.
	rows, err := d.ReadSQL().QueryContext(ctx, `WITH RECURSIVE series(m) AS (
  SELECT (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = $1 ORDER BY r.metric_name LIMIT 1)
  UNION ALL
  SELECT (SELECT r.metric_name FROM readings r WHERE r.agent_uuid = $1 AND r.metric_name > series.m ORDER BY r.metric_name LIMIT 1)
  FROM series WHERE series.m IS NOT NULL
)
SELECT `+expr+` AS b, COALESCE(r.quality, ''), count(*) FROM series CROSS JOIN readings r
WHERE series.m IS NOT NULL AND r.agent_uuid = $1 AND r.metric_name = series.m AND r.time >= $5 AND r.time < $6
  AND r.tenant_id = $2 AND r.device_name = $3 AND r.protocol = $4
GROUP BY 1, 2`, agent, tenant, device, protocol, dl.TimeArg(q.from), dl.TimeArg(q.to))
	if err != nil {
		return nil, 0, fmt.Errorf("count device readings: %w", err)
	}
	defer rows.Close()
	var total int64
	for rows.Next() {
		var b db.Timestamp
		var quality string
		var n int64
		if err := rows.Scan(&b, &quality, &n); err != nil {
			return nil, 0, fmt.Errorf("count device readings: %w", err)
		}
		i, ok := index[b.UnixMicro()]
		if !ok {
			continue
		}
		if quality == "" {
			quality = "UNKNOWN"
		}
		out[i].Count += n
		out[i].ByQuality[quality] += n
		total += n
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("count device readings: %w", err)
	}
	return out, total, nil
}
