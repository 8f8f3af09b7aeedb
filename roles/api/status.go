package api

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// AuditAgentStatus is the audit kind of an agent status change.
const AuditAgentStatus = "agent.status"

// statusChannel is the pub/sub channel of one agent's status changes,
// relayed by its live stream; tenantStatusChannel carries every agent's of
// the tenant, for GET /agents/events. tenant is the 22-character id.
func statusChannel(tenant, agent string) string {
	return "tenant:" + tenant + ":device:" + agent + ":status"
}

func tenantStatusChannel(tenant string) string { return "tenant:" + tenant + ":agents:status" }

// StatusEvent is one agent status change as the live streams and the
// audit log carry it (docs/agents-api.md, section Status events).
type StatusEvent struct {
	AgentUUID string     `json:"agentUuid"`
	Status    string     `json:"status"`
	Previous  string     `json:"previous"`
	LastSeen  *time.Time `json:"lastSeen"`
	At        time.Time  `json:"at"`
}

// statusWatch turns agent status changes into events. Offline comes by
// silence, with no message to react to, so it looks periodically for
// agents whose status derived from last_seen differs from the stored
// agents.status, and moves the stored one with a conditional UPDATE: with
// several replicas looking at once, exactly one wins each change and
// announces it. The announcement (pub/sub, audit) follows the UPDATE, so a
// replica that dies between the two loses that one event; the status
// itself stays right.
type statusWatch struct {
	db           *db.DB
	streams      streamstore.Store
	audit        func(context.Context, accounts.Event) error
	log          *slog.Logger
	m            *statusMetrics
	every        time.Duration
	offlineAfter time.Duration
	now          func() time.Time
}

// maxStatusChanges bounds the changes one pass takes; the next pass takes
// the rest.
const maxStatusChanges = 500

// statusEvery is how often the watch looks: often enough that offline is
// announced well within the silence, at most once a second.
func statusEvery(offlineAfter time.Duration) time.Duration {
	return min(max(offlineAfter/4, 100*time.Millisecond), time.Second)
}

func (w *statusWatch) Name() string                { return "api-agent-status" }
func (w *statusWatch) Start(context.Context) error { return nil }
func (w *statusWatch) Stop(context.Context) error  { return nil }

func (w *statusWatch) Run(ctx context.Context) error {
	t := time.NewTicker(w.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := w.pass(ctx); err != nil && ctx.Err() == nil {
				w.log.Warn("look for agent status changes", "err", err)
			}
		}
	}
}

// statusExpr is registry.StatusOf in SQL; $1 is the offline cut-off
// (now - offlineAfter).
const statusExpr = `CASE WHEN NOT active THEN '` + registry.StatusDisabled + `' WHEN last_seen IS NULL THEN '` + registry.StatusNeverSeen +
	`' WHEN last_seen >= $1 THEN '` + registry.StatusOnline + `' ELSE '` + registry.StatusOffline + `' END`

type statusChange struct {
	agent, tenant, from, to string
	lastSeen                db.Timestamp
}

// pass finds and announces the changes since the last pass.
func (w *statusWatch) pass(ctx context.Context) error {
	now := w.now().UTC()
	dl := w.db.Dialect()
	cut := dl.TimeArg(now.Add(-w.offlineAfter))
	rows, err := w.db.SQL().QueryContext(ctx, `SELECT uuid, tenant_uuid, status, `+statusExpr+`, last_seen FROM agents
WHERE status <> `+statusExpr+` LIMIT `+fmt.Sprint(maxStatusChanges), cut)
	if err != nil {
		return fmt.Errorf("select agent status changes: %w", err)
	}
	var changes []statusChange
	for rows.Next() {
		var c statusChange
		if err := rows.Scan(&c.agent, &c.tenant, &c.from, &c.to, &c.lastSeen); err != nil {
			rows.Close()
			return fmt.Errorf("scan agent status change: %w", err)
		}
		changes = append(changes, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("select agent status changes: %w", err)
	}
	for _, c := range changes {
		// The status the UPDATE sets must still be the derived one and
		// the stored one still the one read: another replica may have
		// taken this change, or traffic moved last_seen meanwhile.
		res, err := w.db.SQL().ExecContext(ctx, `UPDATE agents SET status = $2, status_changed_at = $3
WHERE uuid = $4 AND tenant_uuid = $5 AND status = $6 AND `+statusExpr+` = $2`,
			cut, c.to, dl.TimeArg(now), c.agent, c.tenant, c.from)
		if err != nil {
			return fmt.Errorf("update agent %s status: %w", c.agent, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			continue
		}
		w.announce(ctx, c, now)
	}
	return nil
}

// announce publishes a change won by this replica to the agent's live
// stream and the tenant's, and records it in the audit log.
func (w *statusWatch) announce(ctx context.Context, c statusChange, now time.Time) {
	w.m.changes.WithLabelValues(c.to).Inc()
	ev := StatusEvent{AgentUUID: c.agent, Status: c.to, Previous: c.from, At: now}
	if !c.lastSeen.IsZero() {
		t := c.lastSeen.Time
		ev.LastSeen = &t
	}
	payload, _ := json.Marshal(ev)
	tu, err := codec.ParseUUID(c.tenant)
	if err == nil {
		key := codec.EncodeID(tu)
		for _, ch := range []string{statusChannel(key, c.agent), tenantStatusChannel(key)} {
			if err := w.streams.Publish(ctx, ch, payload); err != nil {
				w.m.eventErrors.WithLabelValues("stream").Inc()
				w.log.Warn("publish agent status event", "agent", c.agent, "err", err)
			}
		}
	}
	detail := map[string]any{"from": c.from, "to": c.to}
	if ev.LastSeen != nil {
		detail["lastSeen"] = ev.LastSeen.Format(time.RFC3339Nano)
	}
	if err := w.audit(ctx, accounts.Event{Tenant: c.tenant, At: now, Kind: AuditAgentStatus, Actor: "edgeplat-api",
		ActorKind: "system", Target: c.agent, Detail: detail}); err != nil {
		w.m.eventErrors.WithLabelValues("audit").Inc()
		w.log.Warn("record agent status event", "agent", c.agent, "err", err)
	}
}
