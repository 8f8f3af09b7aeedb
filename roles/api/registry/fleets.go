package registry

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// Fleets group agents that share a target-state template and a run state
// (docs/fleets-and-jobs.md, section Fleets). A member receives its
// fleet's template merged with its own document; every change of the
// template, the run state or the membership moves each affected member's
// target-state version through writeTargetStateTx, so the agent hears of
// it at once.

// Fleet is a fleet of a tenant.
type Fleet struct {
	ID              string          `json:"id"`
	TenantID        string          `json:"tenantId"`
	Name            string          `json:"name"`
	Description     string          `json:"description"`
	Template        json.RawMessage `json:"template"`
	TemplateVersion int64           `json:"templateVersion"`
	RunState        string          `json:"runState"`
	MemberCount     int             `json:"memberCount"`
	CreatedAt       time.Time       `json:"createdAt"`
	UpdatedAt       time.Time       `json:"updatedAt"`
	// Members is set on one fleet's detail only.
	Members []Agent `json:"members,omitzero"`
}

// FleetInput is the body of a fleet's create (POST), replace (PUT) and
// change (PATCH). In a PATCH an absent field stays as it is; in a PUT an
// absent description is "" and an absent template {}.
type FleetInput struct {
	Name        *string         `json:"name"`
	Description *string         `json:"description"`
	Template    json.RawMessage `json:"template"`
}

// Limits of a fleet's fields.
const (
	maxFleetName = 128
	maxFleetDesc = 2000
)

func checkFleetName(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > maxFleetName || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: name: must be 1..%d bytes without control characters", ErrInvalid, maxFleetName)
	}
	// A fleet is named by id or name (PATCH /agents/:uuid, provisioning
	// keys): a name that is an id would be ambiguous.
	if _, err := codec.ParseUUID(s); err == nil {
		return "", fmt.Errorf("%w: name: must not be a UUID", ErrInvalid)
	}
	return s, nil
}

// checkTemplate parses a template as a document part and returns it
// compact; an absent one is {}.
func checkTemplate(raw json.RawMessage) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return idleState, nil
	}
	if len(raw) > maxTargetState {
		return nil, fmt.Errorf("%w: template: over %d bytes", ErrInvalid, maxTargetState)
	}
	doc, err := control.ParseTargetStatePart(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, prefixPaths("template", err))
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("%w: template: %v", ErrInvalid, err)
	}
	return b, nil
}

// prefixPaths names a document's field errors under prefix, joined with
// "; ".
func prefixPaths(prefix string, err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i, l := range lines {
		lines[i] = prefix + "." + l
	}
	return strings.Join(lines, "; ")
}

// mergeMember returns what a member of a fleet receives: the template
// overlaid with its own document (control.MergeTargetState), stopped
// when the fleet is, checked whole.
func mergeMember(template, own []byte, runState string) ([]byte, error) {
	t, err := control.ParseTargetStatePart(template)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, prefixPaths("template", err))
	}
	o, err := control.ParseTargetStatePart(own)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, statePaths(err))
	}
	m := control.MergeTargetState(t, o)
	if runState == control.RunStopped {
		m.SchemaVersion, m.RunState = control.TargetSchemaVersion, control.RunStopped
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode merged target state: %w", err)
	}
	if _, err := control.ParseTargetState(b); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	return b, nil
}

// checkDelivered checks own as agent a will receive it: whole when a is
// in no fleet, else merged with its fleet's template. On PostgreSQL the
// fleet's row stays locked to the end of tx, so a template change and a
// member's write cannot each check against the other's old half.
func (s *Store) checkDelivered(ctx context.Context, tx *sql.Tx, d db.Dialect, tenant string, a Agent, own []byte) error {
	if a.FleetID == "" {
		if _, err := control.ParseTargetState(own); err != nil {
			return fmt.Errorf("%w: %s", ErrInvalid, statePaths(err))
		}
		return nil
	}
	f, err := s.lockFleet(ctx, tx, d, tenant, a.FleetID)
	if err != nil {
		return err
	}
	if _, err := mergeMember(f.Template, own, f.RunState); err != nil {
		return fmt.Errorf("%w (agent %s merged with the template of fleet %q)", err, a.UUID, f.Name)
	}
	return nil
}

// EffectiveTargetState is what an agent receives, secret references
// unresolved: its own document, merged with its fleet's template when it
// is in one. The version is its own target state's.
func (s *Store) EffectiveTargetState(ctx context.Context, tenant, agent string) (TargetState, Agent, error) {
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return TargetState{}, Agent{}, err
	}
	ts, err := s.TargetState(ctx, tenant, a.UUID)
	if err != nil || a.FleetID == "" {
		return ts, a, err
	}
	f, err := s.fleetByID(ctx, conn, tenant, a.FleetID)
	if errors.Is(err, ErrNotFound) {
		// Deleted since the agent was read: it is in no fleet.
		return ts, a, nil
	}
	if err != nil {
		return TargetState{}, Agent{}, err
	}
	merged, err := mergeMember(f.Template, ts.State, f.RunState)
	if err != nil {
		// Stored before the checks: the agent gets its own document and
		// refuses it naming the problem.
		return ts, a, nil
	}
	ts.State = merged
	return ts, a, nil
}

const fleetColumns = `f.id, f.tenant_uuid, f.name, f.description, f.template, f.template_version, f.run_state, f.created_at, f.updated_at,
	(SELECT count(*) FROM agents m WHERE m.fleet_id = f.id)`

func scanFleet(row interface{ Scan(...any) error }) (Fleet, error) {
	var f Fleet
	var template string
	var created, updated db.Timestamp
	err := row.Scan(&f.ID, &f.TenantID, &f.Name, &f.Description, &template, &f.TemplateVersion, &f.RunState, &created, &updated, &f.MemberCount)
	if errors.Is(err, sql.ErrNoRows) {
		return Fleet{}, ErrNotFound
	}
	if err != nil {
		return Fleet{}, fmt.Errorf("read fleet: %w", err)
	}
	f.Template, f.CreatedAt, f.UpdatedAt = json.RawMessage(template), created.Time, updated.Time
	return f, nil
}

// fleetByID reads a fleet of tenant named by a route's id; another
// tenant's is ErrNotFound.
func (s *Store) fleetByID(ctx context.Context, x execer, tenant, id string) (Fleet, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return Fleet{}, ErrNotFound
	}
	return scanFleet(x.QueryRowContext(ctx, `SELECT `+fleetColumns+` FROM fleets f WHERE f.id = $1 AND f.tenant_uuid = $2`, u.String(), tenant))
}

// lockFleet reads a fleet as fleetByID does and, on PostgreSQL, locks
// its row to the end of tx; SQLite's writers are serialized anyway.
func (s *Store) lockFleet(ctx context.Context, tx *sql.Tx, d db.Dialect, tenant, id string) (Fleet, error) {
	if d.Engine == db.Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT 1 FROM fleets WHERE id = $1 AND tenant_uuid = $2 FOR UPDATE`, id, tenant); err != nil {
			return Fleet{}, fmt.Errorf("lock fleet: %w", err)
		}
	}
	return s.fleetByID(ctx, tx, tenant, id)
}

// fleetByRef reads a fleet of tenant named in a body's field by id or
// name; a missing one is ErrInvalid naming the field.
func (s *Store) fleetByRef(ctx context.Context, x execer, tenant, ref, field string) (Fleet, error) {
	ref = strings.TrimSpace(ref)
	var f Fleet
	var err error
	if _, perr := codec.ParseUUID(ref); perr == nil {
		f, err = s.fleetByID(ctx, x, tenant, ref)
	} else {
		f, err = scanFleet(x.QueryRowContext(ctx, `SELECT `+fleetColumns+` FROM fleets f WHERE f.name = $1 AND f.tenant_uuid = $2`, ref, tenant))
	}
	if errors.Is(err, ErrNotFound) {
		return Fleet{}, fmt.Errorf("%w: %s: no fleet %q; create it with POST /fleets", ErrInvalid, field, clip(ref))
	}
	return f, err
}

// Fleets lists tenant's fleets by name.
func (s *Store) Fleets(ctx context.Context, tenant string) ([]Fleet, error) {
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT `+fleetColumns+` FROM fleets f WHERE f.tenant_uuid = $1 ORDER BY f.name`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list fleets: %w", err)
	}
	defer rows.Close()
	out := []Fleet{}
	for rows.Next() {
		f, err := scanFleet(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// Fleet returns a fleet of tenant with its members.
func (s *Store) Fleet(ctx context.Context, tenant, id string) (Fleet, error) {
	conn, _ := s.sql()
	f, err := s.fleetByID(ctx, conn, tenant, id)
	if err != nil {
		return Fleet{}, err
	}
	if f.Members, err = s.listAgents(ctx, `a.tenant_uuid = $1 AND a.fleet_id = $2`, tenant, f.ID); err != nil {
		return Fleet{}, err
	}
	return f, nil
}

// CreateFleet adds a fleet to tenant's; by is the user, for its usage
// events.
func (s *Store) CreateFleet(ctx context.Context, tenant, by string, in FleetInput) (Fleet, error) {
	if in.Name == nil {
		return Fleet{}, fmt.Errorf("%w: name: is required", ErrInvalid)
	}
	name, err := checkFleetName(*in.Name)
	if err != nil {
		return Fleet{}, err
	}
	desc, err := checkFleetDesc(in.Description)
	if err != nil {
		return Fleet{}, err
	}
	template, err := checkTemplate(in.Template)
	if err != nil {
		return Fleet{}, err
	}
	id := codec.NewUUID().String()
	return s.fleetChange(ctx, tenant, id, "create fleet", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		now := d.TimeArg(s.now())
		_, err := tx.ExecContext(ctx, `INSERT INTO fleets (id, tenant_uuid, name, description, template, template_version, run_state, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, 1, 'running', $6, $6)`, id, tenant, name, desc, string(template), now)
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("%w: name: the tenant has a fleet named %q", ErrConflict, name)
		}
		if err != nil {
			return fmt.Errorf("create fleet: %w", err)
		}
		return s.fleetEvent(ctx, tx, d, p, tenant, id, FleetCreated, by, map[string]any{"name": name, "templateVersion": 1})
	})
}

func checkFleetDesc(desc *string) (string, error) {
	if desc == nil {
		return "", nil
	}
	if len(*desc) > maxFleetDesc {
		return "", fmt.Errorf("%w: description: at most %d bytes", ErrInvalid, maxFleetDesc)
	}
	return *desc, nil
}

// UpdateFleet changes a fleet: the given fields (replace false, PATCH) or
// all of them (replace true, PUT: name required). A changed template
// moves templateVersion and every member's target-state version; it is
// refused when some member's merged document would be invalid.
func (s *Store) UpdateFleet(ctx context.Context, tenant, id, by string, in FleetInput, replace bool) (Fleet, error) {
	if replace && in.Name == nil {
		return Fleet{}, fmt.Errorf("%w: name: is required", ErrInvalid)
	}
	var name, desc string
	var template []byte
	var err error
	if in.Name != nil {
		if name, err = checkFleetName(*in.Name); err != nil {
			return Fleet{}, err
		}
	}
	if in.Description != nil || replace {
		if desc, err = checkFleetDesc(in.Description); err != nil {
			return Fleet{}, err
		}
	}
	if in.Template != nil && string(bytes.TrimSpace(in.Template)) == "null" {
		in.Template = nil
	}
	if in.Template != nil || replace {
		if template, err = checkTemplate(in.Template); err != nil {
			return Fleet{}, err
		}
	}
	return s.fleetChange(ctx, tenant, id, "update fleet", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		f, err := s.lockFleet(ctx, tx, d, tenant, id)
		if err != nil {
			return err
		}
		changed := map[string]any{}
		if in.Name != nil && name != f.Name {
			changed["name"], f.Name = name, name
		}
		if (in.Description != nil || replace) && desc != f.Description {
			changed["description"], f.Description = true, desc
		}
		newTemplate := template != nil && !sameJSON(template, f.Template)
		if newTemplate {
			f.Template = template
			f.TemplateVersion++
		}
		if len(changed) == 0 && !newTemplate {
			return nil
		}
		_, err = tx.ExecContext(ctx, `UPDATE fleets SET name = $1, description = $2, template = $3, template_version = $4, updated_at = $5
			WHERE id = $6`, f.Name, f.Description, string(f.Template), f.TemplateVersion, d.TimeArg(s.now()), f.ID)
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("%w: name: the tenant has a fleet named %q", ErrConflict, name)
		}
		if err != nil {
			return fmt.Errorf("update fleet: %w", err)
		}
		if len(changed) > 0 {
			if err := s.fleetEvent(ctx, tx, d, p, tenant, f.ID, FleetUpdated, by, changed); err != nil {
				return err
			}
		}
		if !newTemplate {
			return nil
		}
		if err := s.fleetEvent(ctx, tx, d, p, tenant, f.ID, FleetTemplateChanged, by, map[string]any{"templateVersion": f.TemplateVersion}); err != nil {
			return err
		}
		return s.touchMembers(ctx, tx, d, p, tenant, f.ID, by, true)
	})
}

// fleetChange runs fn as inTx does and answers the fleet as it is then.
func (s *Store) fleetChange(ctx context.Context, tenant, id, what string, fn func(tx *sql.Tx, d db.Dialect, p *pending) error) (Fleet, error) {
	if err := s.inTx(ctx, what, fn); err != nil {
		return Fleet{}, err
	}
	return s.Fleet(ctx, tenant, id)
}

// sameJSON reports whether a stored document (PostgreSQL's jsonb may
// reformat it) equals b.
func sameJSON(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

// SetFleetRunState starts (control.RunRunning) or stops
// (control.RunStopped) every member of a fleet.
func (s *Store) SetFleetRunState(ctx context.Context, tenant, id, by, state string) (Fleet, error) {
	if state != control.RunRunning && state != control.RunStopped {
		return Fleet{}, fmt.Errorf("%w: runState: must be %q or %q", ErrInvalid, control.RunRunning, control.RunStopped)
	}
	return s.fleetChange(ctx, tenant, id, "set fleet run state", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		f, err := s.lockFleet(ctx, tx, d, tenant, id)
		if err != nil || f.RunState == state {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE fleets SET run_state = $1, updated_at = $2 WHERE id = $3`, state, d.TimeArg(s.now()), f.ID); err != nil {
			return fmt.Errorf("set fleet run state: %w", err)
		}
		kind := FleetStarted
		if state == control.RunStopped {
			kind = FleetStopped
		}
		if err := s.fleetEvent(ctx, tx, d, p, tenant, f.ID, kind, by, map[string]any{"members": f.MemberCount}); err != nil {
			return err
		}
		return s.touchMembers(ctx, tx, d, p, tenant, f.ID, by, false)
	})
}

// ErrFleetHasMembers answers the delete of a fleet with members.
var ErrFleetHasMembers = fmt.Errorf("%w: the fleet has members; remove them or delete with ?force=true", ErrConflict)

// DeleteFleet deletes a fleet of tenant. A fleet with members is
// ErrFleetHasMembers unless force, which takes them out first (each
// member's version moves). Provisioning keys naming it name no fleet
// afterwards.
func (s *Store) DeleteFleet(ctx context.Context, tenant, id, by string, force bool) error {
	return s.inTx(ctx, "delete fleet", func(tx *sql.Tx, d db.Dialect, p *pending) error {
		f, err := s.lockFleet(ctx, tx, d, tenant, id)
		if err != nil {
			return err
		}
		if f.MemberCount > 0 && !force {
			return ErrFleetHasMembers
		}
		uuids, err := members(ctx, tx, tenant, f.ID)
		if err != nil {
			return err
		}
		for _, u := range uuids {
			a, err := s.agent(ctx, tx, tenant, u)
			if err != nil {
				return err
			}
			// Not checked: a member whose own document leans on the
			// template gets it alone, and refuses it naming the problem,
			// until it is fixed (docs/fleets-and-jobs.md).
			if err := s.moveTx(ctx, tx, d, p, tenant, &a, "", by, false); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM fleets WHERE id = $1`, f.ID); err != nil {
			return fmt.Errorf("delete fleet: %w", err)
		}
		return s.fleetEvent(ctx, tx, d, p, tenant, f.ID, FleetDeleted, by, map[string]any{"name": f.Name, "force": force})
	})
}
