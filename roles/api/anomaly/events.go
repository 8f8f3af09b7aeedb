package anomaly

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// EventRetention is how long agent events are kept: the evaluator deletes
// older ones (by receipt time) once an hour.
const EventRetention = 30 * 24 * time.Hour

// Event paging.
const (
	DefaultEventLimit = 100
	MaxEventLimit     = 1000
)

// Event is a stored agent event (docs/control-channel.md, section Events).
type Event struct {
	ID         string          `json:"id"`
	AgentUUID  string          `json:"agentUuid"`
	Kind       string          `json:"kind"`
	Severity   string          `json:"severity"`
	Timestamp  time.Time       `json:"timestamp"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Data       json.RawMessage `json:"data"`
}

// ErrBadEvent marks an event payload that can never be stored; the
// subscriber acknowledges it rather than have it redelivered.
var ErrBadEvent = errors.New("unusable agent event")

// StoreEvent keeps an event an agent published on i/{tenant}/a/{agent}/events.
// payload is the message as received: JSON, or any codec layering of it.
// It reports whether the event is new; a redelivery (same tenant, agent,
// kind and id) is stored once. An agent that is not the tenant's in the
// registry stores nothing. A new anomaly alert goes to the alert rules
// that include edge alerts.
func (x *Anomaly) StoreEvent(ctx context.Context, tenantKey, agentUUID string, payload []byte) (bool, error) {
	ev, err := DecodeEventPayload(payload)
	if err != nil {
		x.m.events.WithLabelValues("invalid").Inc()
		return false, fmt.Errorf("%w: %v", ErrBadEvent, err)
	}
	tu, err := codec.DecodeID(tenantKey)
	if err != nil {
		x.m.events.WithLabelValues("invalid").Inc()
		return false, fmt.Errorf("%w: tenant %q: %v", ErrBadEvent, tenantKey, err)
	}
	data, err := db.StorableJSON(ev.Data)
	if err != nil {
		x.m.events.WithLabelValues("invalid").Inc()
		return false, fmt.Errorf("%w: data: %v", ErrBadEvent, err)
	}
	tenant := tu.String()
	stored := Event{ID: ev.ID, AgentUUID: agentUUID, Kind: ev.Kind, Severity: ev.Severity,
		Timestamp: time.UnixMilli(ev.Timestamp).UTC(), ReceivedAt: x.s.stamp(), Data: data}
	// The SELECT from agents stores the event only for an agent of the
	// tenant; ON CONFLICT makes a redelivery a no-op.
	res, err := x.s.db.SQL().ExecContext(ctx, `INSERT INTO agent_events (tenant_uuid, agent_uuid, kind, event_id, severity, occurred_at, received_at, data)
SELECT tenant_uuid, uuid, $1, $2, $3, $4, $5, $6 FROM agents WHERE uuid = $7 AND tenant_uuid = $8
ON CONFLICT DO NOTHING`, stored.Kind, stored.ID, stored.Severity, x.s.t(stored.Timestamp), x.s.t(stored.ReceivedAt), string(data), agentUUID, tenant)
	if err != nil {
		return false, fmt.Errorf("store agent event: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		x.m.events.WithLabelValues("repeat_or_unknown_agent").Inc()
		return false, nil
	}
	x.m.events.WithLabelValues("stored").Inc()
	if stored.Kind == control.EventAnomalyAlert {
		x.dispatch.EdgeAlert(tenant, stored)
	}
	return true, nil
}

// DecodeEventPayload decodes an agent event in any codec layering (the
// agent sends JSON; a compressing destination may deflate it).
func DecodeEventPayload(payload []byte) (control.Event, error) {
	dec, err := codec.Decode(payload, codec.Limits{MaxDecodedSize: 2 * control.MaxEventDataBytes})
	if err != nil {
		return control.Event{}, fmt.Errorf("event: %w", err)
	}
	raw, err := dec.JSON()
	if err != nil {
		return control.Event{}, fmt.Errorf("event: %w", err)
	}
	return control.DecodeEvent(raw)
}

type eventFilter struct {
	tenant, agent, kind string
	since               time.Time
	limit               int
}

func (s *store) events(ctx context.Context, f eventFilter) ([]Event, error) {
	q := `SELECT event_id, agent_uuid, kind, severity, occurred_at, received_at, data FROM agent_events WHERE tenant_uuid = $1`
	args := []any{f.tenant}
	arg := func(v any) string { args = append(args, v); return fmt.Sprintf("$%d", len(args)) }
	if f.agent != "" {
		q += ` AND agent_uuid = ` + arg(f.agent)
	}
	if f.kind != "" {
		q += ` AND kind = ` + arg(f.kind)
	}
	if !f.since.IsZero() {
		q += ` AND occurred_at >= ` + arg(s.t(f.since))
	}
	q += ` ORDER BY occurred_at DESC, event_id LIMIT ` + arg(f.limit)
	rows, err := s.db.ReadSQL().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list agent events: %w", err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var (
			e        Event
			at, recv db.Timestamp
			data     string
		)
		if err := rows.Scan(&e.ID, &e.AgentUUID, &e.Kind, &e.Severity, &at, &recv, &data); err != nil {
			return nil, fmt.Errorf("list agent events: %w", err)
		}
		e.Timestamp, e.ReceivedAt, e.Data = at.Time, recv.Time, json.RawMessage(data)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list agent events: %w", err)
	}
	return out, nil
}

func (s *store) pruneEvents(ctx context.Context, before time.Time) (int64, error) {
	res, err := s.db.SQL().ExecContext(ctx, `DELETE FROM agent_events WHERE received_at < $1`, s.t(before))
	if err != nil {
		return 0, fmt.Errorf("prune agent events: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// agentEvents serves GET /agents/:uuid/events?kind=&since=&limit=: the
// agent's events, newest first. The agent guard has answered 404 for an
// agent that is not the caller's tenant's.
func (h *handler) agentEvents(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	u, err := codec.ParseUUID(c.Param("uuid"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "uuid must be a hyphenated UUID, got "+quote(c.Param("uuid")))
		return
	}
	f := eventFilter{tenant: who.TenantUUID, agent: u.String(), kind: c.Query("kind"), limit: DefaultEventLimit}
	if len(f.kind) > 64 {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "kind must be at most 64 characters")
		return
	}
	if !h.pageParams(c, &f.since, &f.limit, MaxEventLimit) {
		return
	}
	list, err := h.s.events(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": list})
}

// pageParams reads since (RFC 3339) and limit (1..maxLimit), answering
// 400 naming the parameter.
func (h *handler) pageParams(c *gin.Context, since *time.Time, limit *int, maxLimit int) bool {
	if !h.sinceParam(c, since) {
		return false
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLimit {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "limit must be 1.."+strconv.Itoa(maxLimit)+", got "+quote(v))
			return false
		}
		*limit = n
	}
	return true
}

// sinceParam reads since (RFC 3339) into since when given.
func (h *handler) sinceParam(c *gin.Context, since *time.Time) bool {
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "since must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got "+quote(v))
			return false
		}
		*since = t
	}
	return true
}

// ActiveAlert is one entry of GET /anomaly-alerts: an open incident of a
// cloud rule, or an agent's own recent anomaly alert.
type ActiveAlert struct {
	Source    string    `json:"source"`
	Severity  string    `json:"severity"`
	AgentUUID string    `json:"agentUuid"`
	Metric    string    `json:"metric,omitempty"`
	At        time.Time `json:"at"`
	Incident  *Incident `json:"incident,omitempty"`
	EdgeAlert *Event    `json:"edgeAlert,omitempty"`
}

// DefaultEdgeAlertWindow is how long an agent's anomaly alert counts as
// active on GET /anomaly-alerts: the agent raises no "cleared" event, so
// age is what ends it.
const DefaultEdgeAlertWindow = time.Hour

// activeAlerts serves GET /anomaly-alerts: the open incidents and the
// agents' anomaly alerts of the last hour (since= to change), newest
// first.
func (h *handler) activeAlerts(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	since, limit := h.Now().Add(-DefaultEdgeAlertWindow), DefaultEventLimit
	if !h.pageParams(c, &since, &limit, MaxEventLimit) {
		return
	}
	ctx := c.Request.Context()
	incs, err := h.s.incidents(ctx, incidentFilter{tenant: who.TenantUUID, status: "open", limit: limit})
	if err != nil {
		h.fail(c, err)
		return
	}
	evs, err := h.s.events(ctx, eventFilter{tenant: who.TenantUUID, kind: control.EventAnomalyAlert, since: since, limit: limit})
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]ActiveAlert, 0, len(incs)+len(evs))
	for i := range incs {
		inc := &incs[i]
		out = append(out, ActiveAlert{Source: "rule", Severity: inc.Severity, AgentUUID: inc.AgentUUID, Metric: inc.Metric, At: inc.OpenedAt, Incident: inc})
	}
	for i := range evs {
		e := &evs[i]
		var d struct {
			Metric string `json:"metric"`
		}
		_ = json.Unmarshal(e.Data, &d) // the metric is shown when the alert names one
		out = append(out, ActiveAlert{Source: "edge", Severity: e.Severity, AgentUUID: e.AgentUUID, Metric: d.Metric, At: e.Timestamp, EdgeAlert: e})
	}
	sortAlerts(out)
	if len(out) > limit {
		out = out[:limit]
	}
	c.JSON(http.StatusOK, gin.H{"alerts": out})
}
