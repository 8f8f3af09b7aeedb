package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// TargetState is the state an agent should converge to. Version increases
// with every change; an agent that has a version does not fetch it again.
type TargetState struct {
	AgentUUID string          `json:"agentUuid"`
	State     json.RawMessage `json:"state"`
	Version   int64           `json:"version"`
	UpdatedAt time.Time       `json:"updatedAt"`
	UpdatedBy string          `json:"updatedBy,omitempty"`
}

// maxTargetState bounds one agent's target state document.
const maxTargetState = 1 << 20

// idleState is the target state of an agent with nothing to run: what a
// cleared target state becomes, so the agent sees a change and goes idle.
var idleState = json.RawMessage(`{}`)

// TargetState returns the target state of an agent of tenant; an agent
// that never had one is at version 0 with the idle state.
func (s *Store) TargetState(ctx context.Context, tenant, agent string) (TargetState, error) {
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return TargetState{}, err
	}
	ts := TargetState{AgentUUID: a.UUID}
	var state string
	var updated db.Timestamp
	err = conn.QueryRowContext(ctx, `SELECT state, version, updated_at, updated_by FROM agent_target_state WHERE agent_uuid = $1 AND tenant_uuid = $2`,
		a.UUID, tenant).Scan(&state, &ts.Version, &updated, &ts.UpdatedBy)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		ts.State = idleState
		return ts, nil
	case err != nil:
		return TargetState{}, fmt.Errorf("get target state: %w", err)
	}
	ts.State, ts.UpdatedAt = json.RawMessage(state), updated.Time
	return ts, nil
}

// errConcurrentTargetState answers a write that lost to another.
var errConcurrentTargetState = fmt.Errorf("%w: the target state changed concurrently; retry", ErrConflict)

// ErrTargetStateExists answers a create for an agent that has one.
var ErrTargetStateExists = fmt.Errorf("%w: the agent has a target state; replace it with PUT", ErrConflict)

// SetTargetState writes an agent's target state: create only when it has
// none (POST), else replace (PUT). state must be a JSON object. The
// document a fleet member receives (its fleet's template merged with
// state) must be valid as a whole; state alone may name a destination of
// the template.
func (s *Store) SetTargetState(ctx context.Context, tenant, agent string, state json.RawMessage, by string, create bool) (TargetState, error) {
	if len(state) > maxTargetState {
		return TargetState{}, fmt.Errorf("%w: the target state is over %d bytes", ErrInvalid, maxTargetState)
	}
	doc, err := control.ParseTargetStatePart(state)
	if err != nil {
		return TargetState{}, fmt.Errorf("%w: %s", ErrInvalid, statePaths(err))
	}
	compact, err := json.Marshal(doc)
	if err != nil {
		return TargetState{}, fmt.Errorf("%w: state: %v", ErrInvalid, err)
	}
	return s.writeTargetState(ctx, tenant, agent, compact, by, create)
}

// statePaths names a document's field errors under "state.", as the
// request body has them, one per line joined with "; ".
func statePaths(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, "state") {
			lines[i] = "state." + l
		}
	}
	return strings.Join(lines, "; ")
}

// ClearTargetState sets the idle state (the agent stops what it runs).
func (s *Store) ClearTargetState(ctx context.Context, tenant, agent, by string) (TargetState, error) {
	return s.commitTargetState(ctx, tenant, agent, idleState, by, false, true, -1)
}

// TargetStateChange is one committed change of an agent's target state.
type TargetStateChange struct {
	Tenant string
	State  TargetState
	// Cleared is set when the target state was deleted (the idle state).
	Cleared bool
}

// OnTargetStateChange sets fn to be called after every committed change
// of a target state, whichever route made it, so the agent can be told at
// once. Set it before the store is used; fn must not block.
func (s *Store) OnTargetStateChange(fn func(TargetStateChange)) { s.onTargetState = fn }

func (s *Store) writeTargetState(ctx context.Context, tenant, agent string, state []byte, by string, create bool) (TargetState, error) {
	return s.commitTargetState(ctx, tenant, agent, state, by, create, false, -1)
}

// writeTargetStateIf writes the target state when its version is still
// expect, else fails with ErrConflict: an edit of part of the document
// must not undo a write it did not see.
func (s *Store) writeTargetStateIf(ctx context.Context, tenant, agent string, state []byte, by string, create bool, expect int64) (TargetState, error) {
	return s.commitTargetState(ctx, tenant, agent, state, by, create, false, expect)
}

// commitTargetState writes one agent's target state in a transaction of
// its own (writeTargetStateTx), and OnTargetStateChange's observer hears
// of it once it committed. With expect >= 0 the write happens only at
// that version.
func (s *Store) commitTargetState(ctx context.Context, tenant, agent string, state []byte, by string, create, cleared bool, expect int64) (TargetState, error) {
	var ts TargetState
	err := s.inTx(ctx, "set target state", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		a, err := s.agent(ctx, tx, tenant, agent)
		if err != nil {
			return err
		}
		ts, err = s.writeTargetStateTx(ctx, tx, d, p, tenant, a, state, by, create, cleared, expect)
		return err
	})
	return ts, err
}

// touchTargetState bumps the version of a's target state and keeps its
// own document, so a change of what the agent receives that is not in
// that document (its fleet's template, run state or membership) is
// noticed as any write is. With check, the document a receives now must
// be valid.
func (s *Store) touchTargetState(ctx context.Context, tx *sql.Tx, d db.Dialect, p *pending, tenant string, a Agent, by string, check bool) error {
	if check {
		own, err := ownState(ctx, tx, tenant, a.UUID)
		if err != nil {
			return err
		}
		if err := s.checkDelivered(ctx, tx, d, tenant, a, own); err != nil {
			return err
		}
	}
	_, err := s.writeTargetStateTx(ctx, tx, d, p, tenant, a, nil, by, false, false, -1)
	return err
}

// ownState is an agent's own document as stored, the idle state when it
// has none.
func ownState(ctx context.Context, x execer, tenant, agent string) ([]byte, error) {
	var state string
	err := x.QueryRowContext(ctx, `SELECT state FROM agent_target_state WHERE agent_uuid = $1 AND tenant_uuid = $2`, agent, tenant).Scan(&state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return idleState, nil
	case err != nil:
		return nil, fmt.Errorf("read target state: %w", err)
	}
	return []byte(state), nil
}

// writeTargetStateTx is the one writer of agent_target_state and of its
// history: every change, of one agent or of a fleet's members, goes
// through it inside the caller's transaction, is kept in the history in
// that transaction (targethistory.go), and is told to OnTargetStateChange's observer
// once that committed (pending). A nil state touches: the version moves,
// the document stays. A written state is checked as the agent will
// receive it, merged with its fleet's template.
func (s *Store) writeTargetStateTx(ctx context.Context, tx *sql.Tx, d db.Dialect, p *pending, tenant string, a Agent, state []byte, by string,
	create, cleared bool, expect int64) (TargetState, error) {
	if state != nil {
		if err := s.checkDelivered(ctx, tx, d, tenant, a, state); err != nil {
			return TargetState{}, err
		}
	}
	touch := state == nil
	stored := string(state)
	if touch {
		stored = string(idleState)
	}
	var err error
	now := s.now()
	// The version moves in the statement that writes the state, so two
	// concurrent writes can never both publish the same version.
	var version int64 = 1
	if create {
		var res sql.Result
		res, err = tx.ExecContext(ctx, `INSERT INTO agent_target_state (agent_uuid, tenant_uuid, state, version, updated_at, updated_by)
			VALUES ($1, $2, $3, 1, $4, $5) ON CONFLICT DO NOTHING`, a.UUID, tenant, string(state), d.TimeArg(now), by)
		if err == nil {
			if n, _ := res.RowsAffected(); n == 0 {
				return TargetState{}, ErrTargetStateExists
			}
		}
	} else if touch {
		err = tx.QueryRowContext(ctx, `UPDATE agent_target_state SET version = version + 1, updated_at = $1, updated_by = $2
			WHERE agent_uuid = $3 RETURNING version, state`, d.TimeArg(now), by, a.UUID).Scan(&version, &stored)
	} else {
		err = tx.QueryRowContext(ctx, `UPDATE agent_target_state SET state = $1, version = version + 1, updated_at = $2, updated_by = $3
			WHERE agent_uuid = $4 AND (CAST($5 AS BIGINT) < 0 OR version = $5) RETURNING version`, string(state), d.TimeArg(now), by, a.UUID, expect).Scan(&version)
	}
	if !create {
		if errors.Is(err, sql.ErrNoRows) && expect >= 0 {
			return TargetState{}, errConcurrentTargetState
		}
		if errors.Is(err, sql.ErrNoRows) {
			version = 1
			_, err = tx.ExecContext(ctx, `INSERT INTO agent_target_state (agent_uuid, tenant_uuid, state, version, updated_at, updated_by)
				VALUES ($1, $2, $3, 1, $4, $5)`, a.UUID, tenant, stored, d.TimeArg(now), by)
		}
	}
	if db.IsUniqueViolation(err) {
		// A concurrent first write won; its state stands.
		return TargetState{}, errConcurrentTargetState
	}
	if err != nil {
		return TargetState{}, fmt.Errorf("set target state: %w", err)
	}
	ts := TargetState{AgentUUID: a.UUID, State: json.RawMessage(stored), Version: version, UpdatedAt: now.Truncate(time.Microsecond), UpdatedBy: by}
	if err := recordTargetStateTx(ctx, tx, d, tenant, a.UUID, ts); err != nil {
		return TargetState{}, err
	}
	p.changes = append(p.changes, TargetStateChange{Tenant: tenant, State: ts, Cleared: cleared})
	return ts, nil
}
