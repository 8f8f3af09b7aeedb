package ai

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/events"
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
	Outcome   string         `json:"outcome,omitempty"`
	Detail    map[string]any `json:"detail,omitempty"`
}

// LogEvents reads an agent's events from the tenant's event log
// (docs/events.md): audit records, target-state versions, state reports
// and anomaly incidents, as GET /events/device/:deviceUuid lists them.
type LogEvents struct{ DB *db.DB }

// AgentEvents implements Events.
func (l LogEvents) AgentEvents(ctx context.Context, tenant, agent string, limit int) ([]Event, error) {
	evs, _, err := events.List(ctx, l.DB.ReadSQL(), l.DB.Dialect(), tenant, events.Filter{Agent: agent, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("list events of agent %s: %w", agent, err)
	}
	out := make([]Event, len(evs))
	for i, e := range evs {
		out[i] = Event{At: e.At, Kind: e.Kind, Actor: e.Actor, ActorKind: e.ActorKind, Outcome: e.Outcome, Detail: e.Detail}
	}
	return out, nil
}
