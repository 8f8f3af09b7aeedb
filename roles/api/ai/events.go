package ai

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Events are an agent's events, newest first. tenant is a tenant UUID;
// an agent of another tenant has none.
type Events interface {
	AgentEvents(ctx context.Context, tenant, agent string, limit int) ([]Event, error)
}

// Event is one event of an agent as the get_agent_events tool tells it.
type Event struct {
	At        time.Time      `json:"at"`
	Kind      string         `json:"kind"`
	Actor     string         `json:"actor,omitempty"`
	ActorKind string         `json:"actorKind,omitempty"`
	Outcome   string         `json:"outcome"`
	Detail    map[string]any `json:"detail,omitempty"`
}

// AuditEvents reads an agent's events from the audit log: the rows of
// the tenant whose target is the agent (registrations, state and target
// changes, status moves, commands).
type AuditEvents struct{ DB *db.DB }

// AgentEvents implements Events.
func (a AuditEvents) AgentEvents(ctx context.Context, tenant, agent string, limit int) ([]Event, error) {
	rows, err := a.DB.ReadSQL().QueryContext(ctx, `SELECT at, kind, actor, actor_kind, outcome, detail FROM audit_events
WHERE tenant_uuid = $1 AND target = $2 ORDER BY at DESC, id DESC LIMIT $3`, tenant, agent, limit)
	if err != nil {
		return nil, fmt.Errorf("list events of agent %s: %w", agent, err)
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var (
			e      Event
			at     db.Timestamp
			detail sql.NullString
		)
		if err := rows.Scan(&at, &e.Kind, &e.Actor, &e.ActorKind, &e.Outcome, &detail); err != nil {
			return nil, fmt.Errorf("list events of agent %s: %w", agent, err)
		}
		e.At = at.Time
		if detail.Valid && detail.String != "" {
			if err := json.Unmarshal([]byte(detail.String), &e.Detail); err != nil {
				return nil, fmt.Errorf("event detail of agent %s: %w", agent, err)
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list events of agent %s: %w", agent, err)
	}
	return out, nil
}
