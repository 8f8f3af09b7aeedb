package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/edgeplat/edgeplat/core/db"
)

// DriftKeep is how many drift events the store keeps; older ones are
// deleted as new ones come, so a source that drifts for months cannot
// fill the device's disk. 10,000 events are about 3 MB.
const DriftKeep = 10000

// DriftEvents is the drift_events table (docs/drift.md, section Where
// events go).
type DriftEvents struct {
	db   *db.DB
	cond *condition
}

// Drift is the schema-drift events.
func (s *Store) Drift() *DriftEvents { return &DriftEvents{db: s.db, cond: s.cond} }

// DriftEvent is one stored event: the columns the filters use, and the
// event's JSON as the API answers it.
type DriftEvent struct {
	ID       string
	Protocol string
	Kind     string
	Field    string
	At       int64 // Unix ms
	Event    json.RawMessage
}

// DriftFilter selects events; a zero field selects every value.
type DriftFilter struct {
	Protocol, Kind, Field string
	Since                 int64 // Unix ms, inclusive
	Limit                 int
}

// Add stores events in one transaction and deletes the oldest beyond
// keep. An event whose id is stored already is skipped.
func (d *DriftEvents) Add(ctx context.Context, events []DriftEvent, keep int) (err error) {
	if len(events) == 0 {
		return nil
	}
	defer d.cond.observe(&err)
	tx, err := d.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("store drift events: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	for _, e := range events {
		if _, err := tx.ExecContext(ctx, `INSERT INTO drift_events (id, protocol, kind, field, at, event)
			VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING`,
			e.ID, e.Protocol, e.Kind, e.Field, e.At, string(e.Event)); err != nil {
			return fmt.Errorf("store drift event %s: %w", e.ID, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM drift_events WHERE seq <= (SELECT MAX(seq) FROM drift_events) - $1`, keep); err != nil {
		return fmt.Errorf("trim drift events: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("store drift events: %w", err)
	}
	d.cond.wrote()
	return nil
}

// List returns the events f selects, newest first, at most f.Limit of
// them, and how many f selects in all.
func (d *DriftEvents) List(ctx context.Context, f DriftFilter) (_ []json.RawMessage, total int, err error) {
	defer d.cond.observe(&err)
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, fmt.Sprintf(cond, len(args)))
	}
	if f.Protocol != "" {
		add("protocol = $%d", f.Protocol)
	}
	if f.Kind != "" {
		add("kind = $%d", f.Kind)
	}
	if f.Field != "" {
		add("field = $%d", f.Field)
	}
	if f.Since > 0 {
		add("at >= $%d", f.Since)
	}
	clause := ""
	if len(where) > 0 {
		clause = " WHERE " + strings.Join(where, " AND ")
	}
	if err := d.db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM drift_events`+clause, args...).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("count drift events: %w", err)
	}
	rows, err := d.db.SQL().QueryContext(ctx, `SELECT event FROM drift_events`+clause+
		fmt.Sprintf(` ORDER BY seq DESC LIMIT %d`, max(f.Limit, 0)), args...)
	if err != nil {
		return nil, 0, fmt.Errorf("list drift events: %w", err)
	}
	defer rows.Close()
	out := []json.RawMessage{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, 0, fmt.Errorf("list drift events: %w", err)
		}
		out = append(out, json.RawMessage(s))
	}
	if err := rows.Err(); err != nil {
		return nil, 0, fmt.Errorf("list drift events: %w", err)
	}
	return out, total, nil
}

// Clear deletes every event and returns how many there were.
func (d *DriftEvents) Clear(ctx context.Context) (_ int64, err error) {
	defer d.cond.observe(&err)
	res, err := d.db.SQL().ExecContext(ctx, `DELETE FROM drift_events`)
	if err != nil {
		return 0, fmt.Errorf("clear drift events: %w", err)
	}
	return res.RowsAffected()
}
