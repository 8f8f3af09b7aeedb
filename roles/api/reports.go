package api

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
	"github.com/edgeplat/edgeplat/roles/api/registry"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// endpointsFilter is the agents' telemetry topic.
const endpointsFilter = "i/+/a/+/endpoints/#"

// reportFilters are the agent topics whose messages replace the agent's
// last report instead of adding telemetry (docs/agents-api.md).
var reportFilters = []string{"i/+/a/+/state", "i/+/a/+/metrics"}

// maxReportBytes bounds one stored report: a state or system-metrics
// document is a few kilobytes; anything far larger is not one.
const maxReportBytes = 256 << 10

// reports keeps each agent's latest state report and latest system metrics
// (CPU, memory, storage, temperature) in agent_reports, one row per tenant,
// agent and kind, and serves them on /agents/:uuid/current-state and
// /agents/:uuid/metrics.
//
// A report replaces the stored one only when it is not older, so a QoS 1
// redelivery or a report replayed after an outage never overwrites a newer
// one. Reports are small and come every few seconds per agent at most, so
// they go straight to the database; when it fails the message is not
// acknowledged and the broker delivers it again.
type reports struct {
	db  *db.DB
	log *slog.Logger
	now func() time.Time

	stored  *prometheus.CounterVec
	dropped *prometheus.CounterVec
	// received is the pipeline's edgeplat_api_mqtt_messages_received_total, so one
	// counter shows every agent message by kind, whichever handler took it.
	received *prometheus.CounterVec
	// clock, when set, adds the agent's clock health to its current state.
	clock *clockGuard
	// seen, when set, records each agent heard from.
	seen *lastSeen
	// offlineAfter is the silence after which a device-health report is
	// stale.
	offlineAfter time.Duration
	// snapshot, when set, hands each stored state report to the event
	// log (events.Snapshots.Record).
	snapshot func(ctx context.Context, tenantKey, agent string, doc []byte, reportedAt time.Time) error
}

func newReports(r *rt.Runtime, d *db.DB) *reports {
	rp := &reports{db: d, log: r.Component("api-reports"), now: time.Now, offlineAfter: registry.DefaultOfflineAfter,
		stored: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_reports_total",
			Help: "Agent state and system-metrics reports by kind and outcome (stored, stale: an older report than the one kept)."},
			[]string{"kind", "outcome"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_reports_dropped_total",
			Help: "Agent reports dropped as unusable, by reason."}, []string{"reason"}),
	}
	if r.Metrics != nil {
		r.Metrics.MustRegister(rp.stored, rp.dropped)
	}
	return rp
}

func reportKind(k envelope.Kind) (string, bool) {
	switch k {
	case envelope.State:
		return "state", true
	case envelope.Metrics:
		return "metrics", true
	}
	return "", false
}

// handle is the MQTT handler of the report topics. Unusable messages are
// acknowledged (redelivery cannot fix them) and counted.
func (rp *reports) handle(ctx context.Context, msg mqttx.Message) error {
	t, err := envelope.ParseTopic(msg.Topic)
	if err != nil {
		rp.dropped.WithLabelValues("topic").Inc()
		rp.log.Debug("report on a malformed topic dropped", "topic", msg.Topic, "err", err)
		return nil
	}
	kind, ok := reportKind(t.Kind)
	if !ok {
		rp.dropped.WithLabelValues("topic").Inc()
		return nil
	}
	if rp.received != nil {
		rp.received.WithLabelValues(kind).Inc()
	}
	if rp.seen != nil {
		rp.seen.touch(t.Tenant, t.AgentUUID)
	}
	doc, reportedAt, err := decodeReport(msg.Payload, rp.now())
	if err != nil {
		rp.dropped.WithLabelValues("payload").Inc()
		rp.log.Debug("undecodable report dropped", "topic", msg.Topic, "err", err)
		return nil
	}
	stored, err := upsertReport(ctx, rp.db, t.Tenant, t.AgentUUID, kind, doc, reportedAt, rp.now())
	if db.IsDataError(err) {
		// A document the database refuses (PostgreSQL's jsonb takes no
		// \u0000) fails the same way on every redelivery: acknowledge it,
		// or it would come back forever and hold the broker's window.
		rp.dropped.WithLabelValues("payload").Inc()
		rp.log.Debug("report the database refuses dropped", "topic", msg.Topic, "err", err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("store agent %s report: %w", kind, err)
	}
	outcome := "stored"
	if !stored {
		outcome = "stale"
	}
	if stored && kind == "state" && rp.snapshot != nil {
		// The current state is stored: a lost snapshot costs one entry of
		// the history, not the report, so it is logged, not retried.
		if err := rp.snapshot(ctx, t.Tenant, t.AgentUUID, doc, reportedAt); err != nil {
			rp.log.Warn("keep state snapshot", "agent", t.AgentUUID, "err", err)
		}
	}
	rp.stored.WithLabelValues(kind, outcome).Inc()
	return nil
}

// decodeReport decodes a report in any codec layering into a JSON object
// and takes its time from its "timestamp" field (ISO 8601 or Unix ms), else
// now. A time far ahead of now is an agent clock error; it is capped so one
// bad report cannot block every later one.
func decodeReport(payload []byte, now time.Time) ([]byte, time.Time, error) {
	dec, err := codec.Decode(payload, codec.Limits{MaxDecodedSize: maxReportBytes})
	if err != nil {
		return nil, time.Time{}, err
	}
	obj, ok := dec.Value.(map[string]any)
	if !ok {
		return nil, time.Time{}, fmt.Errorf("report is %T, want a JSON object", dec.Value)
	}
	if err := boundApps(obj); err != nil {
		return nil, time.Time{}, err
	}
	doc, err := dec.JSON()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("encode report: %w", err)
	}
	at := now
	if ts, ok := reportTime(obj["timestamp"]); ok {
		at = ts
	}
	if limit := now.Add(5 * time.Minute); at.After(limit) {
		at = now
	}
	return doc, at.UTC().Truncate(time.Microsecond), nil
}

func reportTime(v any) (time.Time, bool) {
	switch x := v.(type) {
	case string:
		if t, err := time.Parse(time.RFC3339Nano, x); err == nil {
			return t, true
		}
		if ms, err := strconv.ParseInt(x, 10, 64); err == nil && ms > 0 {
			return time.UnixMilli(ms), true
		}
	case float64:
		if x > 0 {
			return time.UnixMilli(int64(x)), true
		}
	case int64:
		if x > 0 {
			return time.UnixMilli(x), true
		}
	case uint64:
		if x > 0 && x < 1<<62 {
			return time.UnixMilli(int64(x)), true
		}
	}
	return time.Time{}, false
}

// upsertReport stores doc unless a newer report of the kind is kept, and
// reports whether it stored it.
func upsertReport(ctx context.Context, d *db.DB, tenant, agent, kind string, doc []byte, reportedAt, receivedAt time.Time) (bool, error) {
	dl := d.Dialect()
	res, err := d.SQL().ExecContext(ctx, `INSERT INTO agent_reports (tenant_id, agent_uuid, kind, report, reported_at, received_at)
VALUES ($1, $2, $3, $4, $5, $6)
ON CONFLICT (tenant_id, agent_uuid, kind) DO UPDATE
SET report = excluded.report, reported_at = excluded.reported_at, received_at = excluded.received_at
WHERE excluded.reported_at >= agent_reports.reported_at`,
		tenant, agent, kind, string(doc), dl.TimeArg(reportedAt), dl.TimeArg(receivedAt))
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n > 0, nil
}

// currentState serves GET /agents/:uuid/current-state.
func (rp *reports) currentState(c *gin.Context) { rp.serve(c, "state") }

// systemMetrics serves GET /agents/:uuid/metrics.
func (rp *reports) systemMetrics(c *gin.Context) { rp.serve(c, "metrics") }

func (rp *reports) serve(c *gin.Context, kind string) {
	tenant, agent, ok := agentOf(c)
	if !ok {
		return
	}
	d := rp.db
	var doc string
	var reportedAt, receivedAt db.Timestamp
	err := d.ReadSQL().QueryRowContext(c.Request.Context(),
		`SELECT report, reported_at, received_at FROM agent_reports WHERE tenant_id = $1 AND agent_uuid = $2 AND kind = $3`,
		tenant, agent, kind).Scan(&doc, &reportedAt, &receivedAt)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		// Another tenant's agent looks exactly like one that never reported.
		WriteError(c, http.StatusNotFound, "not_found", "agent "+agent+" has reported no "+kind+" yet")
		return
	case err != nil:
		rp.log.Warn("read agent report", "kind", kind, "err", err)
		WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database did not answer")
		return
	}
	body := gin.H{"agentUuid": agent, "reportedAt": reportedAt.Time, "receivedAt": receivedAt.Time}
	body[kind] = json.RawMessage(doc)
	if kind == "state" && rp.clock != nil {
		if ck, ok := rp.clock.report(tenant, agent); ok {
			body["clock"] = ck
		}
	}
	c.JSON(http.StatusOK, body)
}
