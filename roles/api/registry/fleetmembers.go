package registry

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// A fleet's membership: an agent is in at most one fleet
// (agents.fleet_id); every change moves the agent's target-state version.

// FleetMembers lists the UUIDs of a fleet's members, for jobs that
// target a fleet; another tenant's fleet is ErrNotFound.
func (s *Store) FleetMembers(ctx context.Context, tenant, fleetID string) ([]string, error) {
	conn, _ := s.sql()
	f, err := s.fleetByID(ctx, conn, tenant, fleetID)
	if err != nil {
		return nil, err
	}
	return members(ctx, conn, tenant, f.ID)
}

func members(ctx context.Context, x execer, tenant, fleet string) ([]string, error) {
	rows, err := x.QueryContext(ctx, `SELECT uuid FROM agents WHERE fleet_id = $1 AND tenant_uuid = $2 ORDER BY uuid`, fleet, tenant)
	if err != nil {
		return nil, fmt.Errorf("list fleet members: %w", err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("list fleet members: %w", err)
		}
		out = append(out, strings.ToLower(u))
	}
	return out, rows.Err()
}

// touchMembers moves every member's target-state version (check: and
// checks what each receives now).
func (s *Store) touchMembers(ctx context.Context, tx *sql.Tx, d db.Dialect, p *pending, tenant, fleet, by string, check bool) error {
	uuids, err := members(ctx, tx, tenant, fleet)
	if err != nil {
		return err
	}
	for _, u := range uuids {
		a, err := s.agent(ctx, tx, tenant, u)
		if err != nil {
			return err
		}
		if err := s.touchTargetState(ctx, tx, d, p, tenant, a, by, check); err != nil {
			return err
		}
	}
	return nil
}

// AddFleetAgents moves agents of tenant into a fleet; an agent in
// another fleet leaves it. Any agent that is not tenant's makes the whole
// call ErrNotFound.
func (s *Store) AddFleetAgents(ctx context.Context, tenant, id, by string, uuids []string) (Fleet, error) {
	if len(uuids) == 0 {
		return Fleet{}, fmt.Errorf("%w: agentUuid or agentUuids is required", ErrInvalid)
	}
	if len(uuids) > 1000 {
		return Fleet{}, fmt.Errorf("%w: agentUuids: at most 1000 at once", ErrInvalid)
	}
	return s.fleetChange(ctx, tenant, id, "add fleet agents", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		f, err := s.lockFleet(ctx, tx, d, tenant, id)
		if err != nil {
			return err
		}
		for _, u := range uuids {
			a, err := s.agent(ctx, tx, tenant, u)
			if err != nil {
				return fmt.Errorf("agent %s: %w", clip(u), err)
			}
			if err := s.moveTx(ctx, tx, d, p, tenant, &a, f.ID, by, true); err != nil {
				return err
			}
		}
		return nil
	})
}

// RemoveFleetAgent takes an agent out of a fleet; an agent that is not
// its member is ErrNotFound.
func (s *Store) RemoveFleetAgent(ctx context.Context, tenant, id, agent, by string) error {
	return s.inTx(ctx, "remove fleet agent", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		f, err := s.lockFleet(ctx, tx, d, tenant, id)
		if err != nil {
			return err
		}
		a, err := s.agent(ctx, tx, tenant, agent)
		if err != nil {
			return err
		}
		if a.FleetID != f.ID {
			return fmt.Errorf("%w: agent %s is not a member of fleet %q", ErrNotFound, a.UUID, f.Name)
		}
		return s.moveTx(ctx, tx, d, p, tenant, &a, "", by, true)
	})
}

// moveTx puts agent a in fleet to ("" for none) inside tx: both fleets
// get a usage event, and a's target-state version moves (with check, once
// what it receives now is checked).
func (s *Store) moveTx(ctx context.Context, tx *sql.Tx, d db.Dialect, p *pending, tenant string, a *Agent, to, by string, check bool) error {
	from := a.FleetID
	if from == to {
		return nil
	}
	name := ""
	if to != "" {
		f, err := s.lockFleet(ctx, tx, d, tenant, to)
		if err != nil {
			return err
		}
		name = f.Name
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, `UPDATE agents SET fleet_id = $1, updated_at = $2 WHERE uuid = $3 AND tenant_uuid = $4`,
		db.UUIDArg(to), d.TimeArg(now), a.UUID, tenant); err != nil {
		return fmt.Errorf("move agent to fleet: %w", err)
	}
	a.FleetID, a.Fleet, a.UpdatedAt = to, name, now.Truncate(time.Microsecond)
	if from != "" {
		if err := s.fleetEvent(ctx, tx, d, p, tenant, from, FleetAgentRemoved, by, map[string]any{"agentUuid": a.UUID, "to": to}); err != nil {
			return err
		}
	}
	if to != "" {
		if err := s.fleetEvent(ctx, tx, d, p, tenant, to, FleetAgentAdded, by, map[string]any{"agentUuid": a.UUID, "from": from}); err != nil {
			return err
		}
	}
	return s.touchTargetState(ctx, tx, d, p, tenant, *a, by, check)
}
