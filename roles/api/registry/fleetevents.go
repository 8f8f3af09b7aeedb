package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Kinds of fleet usage events (docs/fleets-and-jobs.md, section Usage
// events).
const (
	FleetCreated         = "created"
	FleetUpdated         = "updated"
	FleetTemplateChanged = "template_changed"
	FleetAgentAdded      = "agent_added"
	FleetAgentRemoved    = "agent_removed"
	FleetStarted         = "started"
	FleetStopped         = "stopped"
	FleetDeleted         = "deleted"
)

// FleetEvent is one entry of a fleet's usage history, as GET
// /fleets/:id/usage-events lists it and OnFleetEvent's observer hears it.
type FleetEvent struct {
	ID      int64          `json:"id"`
	FleetID string         `json:"fleetId"`
	At      time.Time      `json:"at"`
	Kind    string         `json:"kind"`
	Actor   string         `json:"actor"`
	Detail  map[string]any `json:"detail"`
}

// OnFleetEvent sets fn to be called after every committed fleet usage
// event, so the API can publish it on the tenant's live channel. Set it
// before the store is used; fn must not block.
func (s *Store) OnFleetEvent(fn func(tenant string, ev FleetEvent)) { s.onFleetEvent = fn }

// pending is what a transaction tells its observers once it committed.
type pending struct {
	changes []TargetStateChange
	events  []tenantEvent
}

type tenantEvent struct {
	tenant string
	ev     FleetEvent
}

// inTx runs fn in one transaction and, once it committed, tells the
// observers what it changed; what names the operation in errors.
func (s *Store) inTx(ctx context.Context, what string, fn func(tx *sql.Tx, d db.Dialect, p *pending) error) error {
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("%s: begin: %w", what, err)
	}
	defer func() { _ = tx.Rollback() }()
	var p pending
	if err := fn(tx, d, &p); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("%s: commit: %w", what, err)
	}
	s.flush(p)
	return nil
}

// flush tells the observers of a committed transaction's changes.
func (s *Store) flush(p pending) {
	if s.onTargetState != nil {
		for _, ch := range p.changes {
			s.onTargetState(ch)
		}
	}
	if s.onFleetEvent != nil {
		for _, e := range p.events {
			s.onFleetEvent(e.tenant, e.ev)
		}
	}
}

// fleetEvent records a usage event of fleet inside tx.
func (s *Store) fleetEvent(ctx context.Context, tx *sql.Tx, d db.Dialect, p *pending, tenant, fleet, kind, actor string, detail map[string]any) error {
	if detail == nil {
		detail = map[string]any{}
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Errorf("fleet event: %w", err)
	}
	now := s.now()
	var id int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO fleet_usage_events (tenant_uuid, fleet_id, at, kind, actor, detail)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, tenant, fleet, d.TimeArg(now), kind, actor, string(b)).Scan(&id); err != nil {
		return fmt.Errorf("fleet event: %w", err)
	}
	p.events = append(p.events, tenantEvent{tenant, FleetEvent{ID: id, FleetID: fleet, At: now.Truncate(time.Microsecond), Kind: kind,
		Actor: actor, Detail: detail}})
	return nil
}

// Limits of a usage-event listing.
const (
	defaultFleetEvents = 100
	maxFleetEvents     = 1000
)

// FleetEvents lists a fleet's usage events, newest first, at most limit
// (0 is 100; above 1000 is 1000).
func (s *Store) FleetEvents(ctx context.Context, tenant, id string, limit int) ([]FleetEvent, error) {
	conn, _ := s.sql()
	f, err := s.fleetByID(ctx, conn, tenant, id)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = defaultFleetEvents
	}
	limit = min(limit, maxFleetEvents)
	rows, err := conn.QueryContext(ctx, `SELECT id, at, kind, actor, detail FROM fleet_usage_events
		WHERE fleet_id = $1 AND tenant_uuid = $2 ORDER BY at DESC, id DESC LIMIT $3`, f.ID, tenant, limit)
	if err != nil {
		return nil, fmt.Errorf("list fleet events: %w", err)
	}
	defer rows.Close()
	out := []FleetEvent{}
	for rows.Next() {
		ev := FleetEvent{FleetID: f.ID}
		var at db.Timestamp
		var detail string
		if err := rows.Scan(&ev.ID, &at, &ev.Kind, &ev.Actor, &detail); err != nil {
			return nil, fmt.Errorf("list fleet events: %w", err)
		}
		ev.At = at.Time
		if err := json.Unmarshal([]byte(detail), &ev.Detail); err != nil {
			return nil, fmt.Errorf("fleet event %d detail: %w", ev.ID, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list fleet events: %w", err)
	}
	return out, nil
}
