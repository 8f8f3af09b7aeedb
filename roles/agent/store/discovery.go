package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/agent/discovery"
)

// DiscoveryRules is the discovery_rules and discovery_runs tables
// (docs/discovery.md, section Rules). It implements discovery.Store.
type DiscoveryRules struct {
	db   *db.DB
	cond *condition
}

// DiscoveryOf is st's discovery rules and their runs. It is a function,
// not a method of Store like Drift and Baselines, because Store is at
// the 25 methods roles/agent/structure_test.go allows a type.
func DiscoveryOf(st *Store) *DiscoveryRules { return &DiscoveryRules{db: st.db, cond: st.cond} }

const ruleColumns = `uuid, name, protocol, interval_seconds, enabled, auto_enable, params_json, target_json, created_at, updated_at`

type scanner interface{ Scan(dest ...any) error }

func scanRule(row scanner) (discovery.Rule, error) {
	var r discovery.Rule
	var params, target sql.NullString
	var created, updated int64
	if err := row.Scan(&r.UUID, &r.Name, &r.Protocol, &r.IntervalSeconds, &r.Enabled, &r.AutoEnable, &params, &target, &created, &updated); err != nil {
		return r, err
	}
	if params.Valid {
		r.Params = json.RawMessage(params.String)
	}
	if target.Valid {
		r.Target = json.RawMessage(target.String)
	}
	r.CreatedAt, r.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return r, nil
}

// Rules implements discovery.Store, oldest first.
func (d *DiscoveryRules) Rules(ctx context.Context) (_ []discovery.Rule, err error) {
	defer d.cond.observe(&err)
	rows, err := d.db.SQL().QueryContext(ctx, `SELECT `+ruleColumns+` FROM discovery_rules ORDER BY created_at, uuid`)
	if err != nil {
		return nil, fmt.Errorf("list discovery rules: %w", err)
	}
	defer rows.Close()
	var out []discovery.Rule
	for rows.Next() {
		r, err := scanRule(rows)
		if err != nil {
			return nil, fmt.Errorf("list discovery rules: %w", err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list discovery rules: %w", err)
	}
	return out, nil
}

// Rule implements discovery.Store.
func (d *DiscoveryRules) Rule(ctx context.Context, uuid string) (_ discovery.Rule, _ bool, err error) {
	defer d.cond.observe(&err)
	r, err := scanRule(d.db.SQL().QueryRowContext(ctx, `SELECT `+ruleColumns+` FROM discovery_rules WHERE uuid = $1`, uuid))
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	}
	if err != nil {
		return r, false, fmt.Errorf("read discovery rule %s: %w", uuid, err)
	}
	return r, true, nil
}

// CreateRule implements discovery.Store.
func (d *DiscoveryRules) CreateRule(ctx context.Context, r discovery.Rule) (err error) {
	defer d.cond.observe(&err)
	if _, err := d.db.SQL().ExecContext(ctx, `INSERT INTO discovery_rules (`+ruleColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		r.UUID, r.Name, r.Protocol, r.IntervalSeconds, r.Enabled, r.AutoEnable, nullJSON(r.Params), nullJSON(r.Target),
		r.CreatedAt.UnixMilli(), r.UpdatedAt.UnixMilli()); err != nil {
		return fmt.Errorf("create discovery rule %q: %w", r.Name, err)
	}
	d.cond.wrote()
	return nil
}

// UpdateRule implements discovery.Store.
func (d *DiscoveryRules) UpdateRule(ctx context.Context, r discovery.Rule) (_ bool, err error) {
	defer d.cond.observe(&err)
	res, err := d.db.SQL().ExecContext(ctx, `UPDATE discovery_rules SET name = $2, protocol = $3, interval_seconds = $4, enabled = $5,
		auto_enable = $6, params_json = $7, target_json = $8, updated_at = $9 WHERE uuid = $1`,
		r.UUID, r.Name, r.Protocol, r.IntervalSeconds, r.Enabled, r.AutoEnable, nullJSON(r.Params), nullJSON(r.Target), r.UpdatedAt.UnixMilli())
	if err != nil {
		return false, fmt.Errorf("update discovery rule %s: %w", r.UUID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("update discovery rule %s: %w", r.UUID, err)
	}
	d.cond.wrote()
	return n > 0, nil
}

// DeleteRule implements discovery.Store: the rule and its runs, in one
// transaction.
func (d *DiscoveryRules) DeleteRule(ctx context.Context, uuid string) (_ bool, err error) {
	defer d.cond.observe(&err)
	tx, err := d.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("delete discovery rule %s: %w", uuid, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `DELETE FROM discovery_runs WHERE rule_uuid = $1`, uuid); err != nil {
		return false, fmt.Errorf("delete runs of discovery rule %s: %w", uuid, err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM discovery_rules WHERE uuid = $1`, uuid)
	if err != nil {
		return false, fmt.Errorf("delete discovery rule %s: %w", uuid, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("delete discovery rule %s: %w", uuid, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("delete discovery rule %s: %w", uuid, err)
	}
	d.cond.wrote()
	return n > 0, nil
}

// SaveRun implements discovery.Store: the run is inserted or, by its
// uuid, replaced, and its rule's runs beyond keep are deleted, oldest
// first, in the same transaction.
func (d *DiscoveryRules) SaveRun(ctx context.Context, run discovery.Run, keep int) (err error) {
	defer d.cond.observe(&err)
	devs, err := json.Marshal(run.Devices)
	if err != nil {
		return fmt.Errorf("encode devices of discovery run %s: %w", run.UUID, err)
	}
	var finished sql.NullInt64
	if run.FinishedAt != nil {
		finished = sql.NullInt64{Int64: run.FinishedAt.UnixMilli(), Valid: true}
	}
	tx, err := d.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save discovery run %s: %w", run.UUID, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `INSERT INTO discovery_runs (uuid, rule_uuid, started_at, finished_at, status, devices_found,
		endpoints_created, error, devices) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (uuid) DO UPDATE SET finished_at = excluded.finished_at, status = excluded.status,
		devices_found = excluded.devices_found, endpoints_created = excluded.endpoints_created,
		error = excluded.error, devices = excluded.devices`,
		run.UUID, run.RuleUUID, run.StartedAt.UnixMilli(), finished, run.Status, run.DevicesFound, run.EndpointsCreated,
		run.Error, string(devs)); err != nil {
		return fmt.Errorf("save discovery run %s: %w", run.UUID, err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM discovery_runs WHERE rule_uuid = $1 AND seq NOT IN
		(SELECT seq FROM discovery_runs WHERE rule_uuid = $1 ORDER BY seq DESC LIMIT $2)`, run.RuleUUID, keep); err != nil {
		return fmt.Errorf("prune runs of discovery rule %s: %w", run.RuleUUID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save discovery run %s: %w", run.UUID, err)
	}
	d.cond.wrote()
	return nil
}

// Runs implements discovery.Store.
func (d *DiscoveryRules) Runs(ctx context.Context, ruleUUID string, limit int) (_ []discovery.Run, err error) {
	defer d.cond.observe(&err)
	q := `SELECT uuid, rule_uuid, started_at, finished_at, status, devices_found, endpoints_created, error, devices FROM discovery_runs`
	args := []any{limit}
	if ruleUUID != "" {
		q += ` WHERE rule_uuid = $2`
		args = append(args, ruleUUID)
	}
	rows, err := d.db.SQL().QueryContext(ctx, q+` ORDER BY seq DESC LIMIT $1`, args...)
	if err != nil {
		return nil, fmt.Errorf("list discovery runs: %w", err)
	}
	defer rows.Close()
	var out []discovery.Run
	for rows.Next() {
		var r discovery.Run
		var started int64
		var finished sql.NullInt64
		var devs string
		if err := rows.Scan(&r.UUID, &r.RuleUUID, &started, &finished, &r.Status, &r.DevicesFound, &r.EndpointsCreated, &r.Error, &devs); err != nil {
			return nil, fmt.Errorf("list discovery runs: %w", err)
		}
		r.StartedAt = time.UnixMilli(started).UTC()
		if finished.Valid {
			t := time.UnixMilli(finished.Int64).UTC()
			r.FinishedAt = &t
		}
		if err := json.Unmarshal([]byte(devs), &r.Devices); err != nil {
			return nil, fmt.Errorf("decode devices of discovery run %s: %w", r.UUID, err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list discovery runs: %w", err)
	}
	return out, nil
}

var _ discovery.Store = (*DiscoveryRules)(nil)
