package events

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// Sources of a comparison.
const (
	// StateTarget is the agent's own target-state document, by version.
	StateTarget = "target"
	// StateReported is what the agent reported, by state snapshot.
	StateReported = "reported"
)

// Point names one snapshot of a state: exactly one of an event id, a
// time (the snapshot in force then) or, for the target state, a version.
type Point struct {
	EventID string `json:"eventId,omitempty"`
	At      string `json:"at,omitempty"`
	Version int64  `json:"version,omitempty"`
}

// Snapshot is a state document as it was at a point of the log.
type Snapshot struct {
	EventID string    `json:"eventId"`
	At      time.Time `json:"at"`
	// Version is the target-state version, or for a reported state the
	// version the agent said it ran.
	Version int64 `json:"version"`
	doc     any
}

// ErrNotFound answers a point the log holds nothing for.
var ErrNotFound = errors.New("not found")

// ErrInvalid answers a request that names a point wrongly.
var ErrInvalid = errors.New("invalid")

// fieldError is a 400 naming the request field at fault.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

func invalid(field, format string, args ...any) error {
	return &fieldError{field: field, msg: fmt.Sprintf(format, args...)}
}

// check validates p as the field named field (from, to).
func (p Point) check(field, state string) (time.Time, error) {
	n := 0
	if p.EventID != "" {
		n++
	}
	if p.At != "" {
		n++
	}
	if p.Version != 0 {
		n++
	}
	if n != 1 {
		return time.Time{}, invalid(field, "give exactly one of eventId, at and version")
	}
	if p.Version < 0 {
		return time.Time{}, invalid(field+".version", "must be a positive integer, got %d", p.Version)
	}
	if p.Version != 0 && state != StateTarget {
		return time.Time{}, invalid(field+".version", "only the target state has versions; name a reported state by eventId or at")
	}
	if p.At != "" {
		t, err := time.Parse(time.RFC3339Nano, p.At)
		if err != nil {
			return time.Time{}, invalid(field+".at", "must be an RFC 3339 time, got %q", clip(p.At))
		}
		return t, nil
	}
	return time.Time{}, nil
}

// store reads the states of the log.
type store struct {
	db *db.DB
}

// eventTime returns the time of the event id names in tenant, and, when
// it is a target-state version or a state snapshot, its agent and its
// number.
func (s *store) eventTime(ctx context.Context, tenant, id, field string) (at time.Time, agent string, num int64, src source, err error) {
	conn := s.db.ReadSQL()
	kind, rest, _ := strings.Cut(id, ":")
	var ts db.Timestamp
	var row *sql.Row
	bad := invalid(field, "%q is not an event id this API returned", clip(id))
	switch kind {
	case "audit":
		if num, err = strconv.ParseInt(rest, 10, 64); err != nil {
			return at, "", 0, 0, bad
		}
		src = srcAudit
		row = conn.QueryRowContext(ctx, `SELECT at, target FROM audit_events WHERE id = $1 AND tenant_uuid = $2`, num, tenant)
		err = row.Scan(&ts, &agent)
	case "state_report":
		if num, err = strconv.ParseInt(rest, 10, 64); err != nil {
			return at, "", 0, 0, bad
		}
		src = srcSnapshot
		row = conn.QueryRowContext(ctx, `SELECT reported_at, CAST(agent_uuid AS TEXT) FROM agent_state_snapshots WHERE id = $1 AND tenant_uuid = $2`, num, tenant)
		err = row.Scan(&ts, &agent)
	case "target_state":
		a, v, ok := strings.Cut(rest, ":")
		u, uerr := codec.ParseUUID(a)
		if num, err = strconv.ParseInt(v, 10, 64); !ok || err != nil || uerr != nil {
			return at, "", 0, 0, bad
		}
		src, agent = srcTargetVersion, u.String()
		row = conn.QueryRowContext(ctx, `SELECT updated_at FROM agent_target_state_history WHERE agent_uuid = $1 AND version = $2 AND tenant_uuid = $3`,
			agent, num, tenant)
		err = row.Scan(&ts)
	case "incident":
		a, which, ok := strings.Cut(rest, ":")
		u, uerr := codec.ParseUUID(a)
		col := map[string]string{"opened": "opened_at", "closed": "closed_at"}[which]
		if !ok || uerr != nil || col == "" {
			return at, "", 0, 0, bad
		}
		src = srcIncidentOpened
		var t sql.Null[db.Timestamp]
		row = conn.QueryRowContext(ctx, `SELECT `+col+`, CAST(agent_uuid AS TEXT) FROM anomaly_incidents WHERE id = $1 AND tenant_uuid = $2`, u.String(), tenant)
		if err = row.Scan(&t, &agent); err == nil && !t.Valid {
			err = sql.ErrNoRows
		}
		ts = t.V
	default:
		return at, "", 0, 0, bad
	}
	if errors.Is(err, sql.ErrNoRows) {
		return at, "", 0, 0, fmt.Errorf("%w: event %s", ErrNotFound, clip(id))
	}
	if err != nil {
		return at, "", 0, 0, fmt.Errorf("look up event %s: %w", clip(id), err)
	}
	return ts.Time, agent, num, src, nil
}

// resolve returns the snapshot of the state of agent that p names;
// field names p in errors.
func (s *store) resolve(ctx context.Context, tenant, agent, state string, p Point, field string) (Snapshot, error) {
	at, err := p.check(field, state)
	if err != nil {
		return Snapshot{}, err
	}
	if p.EventID != "" {
		t, evAgent, num, src, err := s.eventTime(ctx, tenant, p.EventID, field+".eventId")
		if err != nil {
			return Snapshot{}, err
		}
		switch {
		case src == srcTargetVersion && state == StateTarget:
			if evAgent != agent {
				return Snapshot{}, invalid(field+".eventId", "%s is a version of another agent's target state", clip(p.EventID))
			}
			return s.targetVersion(ctx, tenant, agent, num)
		case src == srcSnapshot && state == StateReported:
			if evAgent != agent {
				return Snapshot{}, invalid(field+".eventId", "%s is another agent's state report", clip(p.EventID))
			}
			return s.snapshotWhere(ctx, tenant, agent, "id = ", num, p.EventID)
		}
		// Any other event names the state in force when it happened.
		at = t
	}
	if p.Version != 0 {
		return s.targetVersion(ctx, tenant, agent, p.Version)
	}
	if state == StateTarget {
		return s.targetAt(ctx, tenant, agent, at)
	}
	return s.snapshotWhere(ctx, tenant, agent, "reported_at <= ", s.db.Dialect().TimeArg(at), at.Format(time.RFC3339Nano))
}

func (s *store) targetVersion(ctx context.Context, tenant, agent string, v int64) (Snapshot, error) {
	return s.targetWhere(ctx, tenant, agent, "version = ", v, fmt.Sprintf("version %d", v))
}

func (s *store) targetAt(ctx context.Context, tenant, agent string, at time.Time) (Snapshot, error) {
	return s.targetWhere(ctx, tenant, agent, "updated_at <= ", s.db.Dialect().TimeArg(at), "at "+at.Format(time.RFC3339Nano))
}

// targetWhere reads the newest kept target-state version of agent with
// cond arg.
func (s *store) targetWhere(ctx context.Context, tenant, agent, cond string, arg any, what string) (Snapshot, error) {
	var doc string
	var ts db.Timestamp
	var snap Snapshot
	err := s.db.ReadSQL().QueryRowContext(ctx, `SELECT version, state, updated_at FROM agent_target_state_history
		WHERE agent_uuid = $1 AND tenant_uuid = $2 AND `+cond+`$3 ORDER BY version DESC LIMIT 1`, agent, tenant, arg).Scan(&snap.Version, &doc, &ts)
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, fmt.Errorf("%w: no target-state version of agent %s %s is kept", ErrNotFound, agent, what)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("read target state %s: %w", what, err)
	}
	snap.At, snap.EventID = ts.Time, fmt.Sprintf("target_state:%s:%d", agent, snap.Version)
	if err := json.Unmarshal([]byte(doc), &snap.doc); err != nil {
		return Snapshot{}, fmt.Errorf("target state version %d: %w", snap.Version, err)
	}
	return snap, nil
}

// snapshotWhere reads the newest state snapshot of agent with cond arg.
func (s *store) snapshotWhere(ctx context.Context, tenant, agent, cond string, arg any, what any) (Snapshot, error) {
	var doc string
	var ts db.Timestamp
	var id int64
	err := s.db.ReadSQL().QueryRowContext(ctx, `SELECT id, report, reported_at FROM agent_state_snapshots
		WHERE agent_uuid = $1 AND tenant_uuid = $2 AND `+cond+`$3 ORDER BY reported_at DESC, id DESC LIMIT 1`, agent, tenant, arg).Scan(&id, &doc, &ts)
	if errors.Is(err, sql.ErrNoRows) {
		return Snapshot{}, fmt.Errorf("%w: agent %s has no state report kept for %v", ErrNotFound, agent, what)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("read state snapshot: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil {
		return Snapshot{}, fmt.Errorf("state snapshot %d: %w", id, err)
	}
	snap := Snapshot{EventID: "state_report:" + strconv.FormatInt(id, 10), At: ts.Time, doc: significant(m)}
	if tsv, ok := m["targetState"].(map[string]any); ok {
		if v, ok := tsv["version"].(float64); ok {
			snap.Version = int64(v)
		}
	}
	return snap, nil
}

// latestReported is the agent's newest state snapshot.
func (s *store) latestReported(ctx context.Context, tenant, agent string) (Snapshot, error) {
	return s.snapshotWhere(ctx, tenant, agent, "id > ", int64(0), "now")
}
