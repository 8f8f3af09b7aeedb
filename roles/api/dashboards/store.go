package dashboards

import (
	"context"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

var (
	// ErrNotFound is a layout or agent that is not the caller's tenant's.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is a request that breaks a rule (422).
	ErrInvalid = errors.New("validation failed")
	// ErrConflict is a name the device already has (409).
	ErrConflict = errors.New("conflict")
	// ErrLimit is a device that has all the layouts it may have (422
	// limit_exceeded).
	ErrLimit = errors.New("limit exceeded")
)

// VersionError is an update that named a version other than the
// layout's current one (409 version_conflict).
type VersionError struct {
	Current, Given int64
}

func (e *VersionError) Error() string {
	return fmt.Sprintf("the layout is at version %d, not %d: read it again and reapply the change", e.Current, e.Given)
}

// Limits of a layout's record.
const (
	MaxName = 100
	// MaxPerDevice bounds an agent's layouts, and so what GET
	// /dashboard-layouts/:deviceUuid/all answers in one piece.
	MaxPerDevice = 100
	// DefaultLimit and MaxLimit page GET /dashboard-layouts.
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Dashboard is a stored layout of an agent, or the generated default of
// one that has none (ID nil, Generated true).
type Dashboard struct {
	ID         *string    `json:"id"`
	DeviceUUID string     `json:"deviceUuid"`
	Name       string     `json:"name"`
	IsDefault  bool       `json:"isDefault"`
	Version    int64      `json:"version"`
	Layout     Layout     `json:"layout"`
	CreatedAt  *time.Time `json:"createdAt"`
	UpdatedAt  *time.Time `json:"updatedAt"`
	Generated  bool       `json:"generated,omitempty"`
}

// store keeps layouts in the cloud database; every statement filters on
// the caller's tenant.
type store struct {
	db  *db.DB
	now func() time.Time
}

// rowQuerier is a *sql.DB or a *sql.Tx.
type rowQuerier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// stamp is the clock at the database's precision (microseconds), so a
// time written and read back compares equal.
func (s *store) stamp() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func (s *store) t(t time.Time) any { return s.db.Dialect().TimeArg(t) }

// CheckName trims a layout's name and checks it: 1..MaxName characters
// without control characters.
func CheckName(name string) (string, error) {
	n := strings.TrimSpace(name)
	if n == "" || utf8.RuneCountInString(n) > MaxName || strings.ContainsFunc(n, isControl) {
		return "", fmt.Errorf("%w: name: must be 1..%d characters without control characters", ErrInvalid, MaxName)
	}
	return n, nil
}

// agent returns the name of tenant's agent, ErrNotFound for another
// tenant's or none. In a PostgreSQL transaction it locks the agent's row:
// every write of a device's layouts takes that lock first, so two moves
// of its default flag never interleave (SQLite's one writer connection
// orders them already).
func (s *store) agent(ctx context.Context, q rowQuerier, tenant, agent string, lock bool) (string, error) {
	u, err := codec.ParseUUID(agent)
	if err != nil {
		return "", fmt.Errorf("%w: agent %s", ErrNotFound, quote(agent))
	}
	query := `SELECT name FROM agents WHERE uuid = $1 AND tenant_uuid = $2`
	if lock && s.db.Dialect().Engine == db.Postgres {
		query += ` FOR UPDATE`
	}
	var name string
	err = q.QueryRowContext(ctx, query, u.String(), tenant).Scan(&name)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: agent %s", ErrNotFound, u.String())
	}
	if err != nil {
		return "", fmt.Errorf("look up agent %s: %w", u.String(), err)
	}
	return name, nil
}

const columns = `id, agent_uuid, name, is_default, version, layout, created_at, updated_at`

func scan(r interface{ Scan(...any) error }) (Dashboard, error) {
	var (
		d                Dashboard
		id, agent, doc   string
		isDefault        any
		created, updated db.Timestamp
	)
	if err := r.Scan(&id, &agent, &d.Name, &isDefault, &d.Version, &doc, &created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Dashboard{}, ErrNotFound
		}
		return Dashboard{}, fmt.Errorf("read layout: %w", err)
	}
	if err := json.Unmarshal([]byte(doc), &d.Layout); err != nil {
		return Dashboard{}, fmt.Errorf("read layout %s: %w", id, err)
	}
	d.ID, d.DeviceUUID = &id, agent
	d.IsDefault = isDefault == true || isDefault == int64(1)
	d.CreatedAt, d.UpdatedAt = &created.Time, &updated.Time
	return d, nil
}

// byID reads tenant's layout id; another tenant's is ErrNotFound.
func (s *store) byID(ctx context.Context, q rowQuerier, tenant, id string, lock bool) (Dashboard, error) {
	u, err := codec.ParseUUID(id)
	if err != nil {
		return Dashboard{}, fmt.Errorf("%w: layout %s", ErrNotFound, quote(id))
	}
	query := `SELECT ` + columns + ` FROM dashboard_layouts WHERE id = $1 AND tenant_uuid = $2`
	if lock && s.db.Dialect().Engine == db.Postgres {
		query += ` FOR UPDATE`
	}
	d, err := scan(q.QueryRowContext(ctx, query, u.String(), tenant))
	if errors.Is(err, ErrNotFound) {
		return Dashboard{}, fmt.Errorf("%w: layout %s", ErrNotFound, u.String())
	}
	return d, err
}

// defaultOf reads the agent's default layout, ErrNotFound when it has
// none. The agent must be known to be tenant's.
func (s *store) defaultOf(ctx context.Context, tenant, agent string) (Dashboard, error) {
	return scan(s.db.ReadSQL().QueryRowContext(ctx, `SELECT `+columns+` FROM dashboard_layouts
WHERE agent_uuid = $1 AND tenant_uuid = $2 AND is_default = $3`, agent, tenant, true))
}

// filter selects a page of the tenant's layouts, ordered by agent and
// name; after is the last (agent, name) of the previous page.
type filter struct {
	tenant, agent string
	limit         int
	after         *[2]string
}

func (s *store) list(ctx context.Context, f filter) ([]Dashboard, *string, error) {
	var b db.SQLBuilder
	b.Write(`SELECT `+columns+` FROM dashboard_layouts WHERE tenant_uuid = `, b.Arg(f.tenant))
	if f.agent != "" {
		b.Write(` AND agent_uuid = `, b.Arg(f.agent))
	}
	name := "name"
	if s.db.Dialect().Engine == db.Postgres {
		// Byte order, as SQLite's BINARY: the cursor means the same on
		// both engines whatever the database's collation.
		name = `name COLLATE "C"`
	}
	if f.after != nil {
		a := b.Arg(f.after[0])
		b.Write(` AND (agent_uuid > `, a, ` OR (agent_uuid = `, a, ` AND `, name, ` > `, b.Arg(f.after[1]), `))`)
	}
	b.Write(` ORDER BY agent_uuid, `, name, ` LIMIT `, b.Arg(f.limit+1))
	rows, err := s.db.ReadSQL().QueryContext(ctx, b.String(), b.Args()...)
	if err != nil {
		return nil, nil, fmt.Errorf("list layouts: %w", err)
	}
	defer rows.Close()
	out := []Dashboard{}
	var next *string
	for rows.Next() {
		if len(out) == f.limit {
			last := out[len(out)-1]
			cur := encodeCursor(last.DeviceUUID, last.Name)
			next = &cur
			break
		}
		d, err := scan(rows)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, d)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("list layouts: %w", err)
	}
	return out, next, nil
}

func encodeCursor(agent, name string) string {
	b, _ := json.Marshal([2]string{agent, name})
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeCursor(s string) (*[2]string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	var c [2]string
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		return nil, errors.New("cursor is not one this API returned")
	}
	return &c, nil
}

// create stores a layout for tenant's agent. The agent's first layout is
// its default whatever isDefault says; a new default takes the flag from
// the one before, in the same transaction.
func (s *store) create(ctx context.Context, tenant, agent, actor, name string, l Layout, isDefault bool) (Dashboard, error) {
	doc, err := json.Marshal(l)
	if err != nil {
		return Dashboard{}, fmt.Errorf("encode layout: %w", err)
	}
	tx, err := s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return Dashboard{}, fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := s.agent(ctx, tx, tenant, agent, true); err != nil {
		return Dashboard{}, err
	}
	var others int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM dashboard_layouts WHERE agent_uuid = $1 AND tenant_uuid = $2`,
		agent, tenant).Scan(&others); err != nil {
		return Dashboard{}, fmt.Errorf("count layouts: %w", err)
	}
	if others >= MaxPerDevice {
		return Dashboard{}, fmt.Errorf("%w: device %s has %d layouts, the most it may have; delete one first", ErrLimit, agent, others)
	}
	if others == 0 {
		isDefault = true
	} else if isDefault {
		if err := clearDefault(ctx, tx, tenant, agent, ""); err != nil {
			return Dashboard{}, err
		}
	}
	id, now := codec.NewUUID().String(), s.stamp()
	_, err = tx.ExecContext(ctx, `INSERT INTO dashboard_layouts (id, tenant_uuid, agent_uuid, name, is_default, version, layout, created_by, created_at, updated_at)
VALUES ($1, $2, $3, $4, $5, 1, $6, $7, $8, $8)`, id, tenant, agent, name, isDefault, string(doc), actor, s.t(now))
	if db.IsUniqueViolation(err) {
		return Dashboard{}, nameTaken(agent, name)
	}
	if err != nil {
		return Dashboard{}, fmt.Errorf("insert layout: %w", err)
	}
	return s.commitRead(ctx, tx, tenant, id)
}

// commitRead reads layout id back in tx, as it is to be committed, and
// commits.
func (s *store) commitRead(ctx context.Context, tx *sql.Tx, tenant, id string) (Dashboard, error) {
	d, err := s.byID(ctx, tx, tenant, id, false)
	if err != nil {
		return Dashboard{}, err
	}
	if err := tx.Commit(); err != nil {
		return Dashboard{}, fmt.Errorf("commit layout %s: %w", id, err)
	}
	return d, nil
}

// lockLayout begins a transaction holding the lock of the agent of
// tenant's layout id, and reads the layout under it: what was read
// before the lock may have moved.
func (s *store) lockLayout(ctx context.Context, tenant, id string) (*sql.Tx, Dashboard, error) {
	cur, err := s.byID(ctx, s.db.SQL(), tenant, id, false)
	if err != nil {
		return nil, Dashboard{}, err
	}
	tx, err := s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return nil, Dashboard{}, fmt.Errorf("begin: %w", err)
	}
	if _, err := s.agent(ctx, tx, tenant, cur.DeviceUUID, true); err != nil {
		tx.Rollback() //nolint:errcheck // the error at hand is the one to report
		return nil, Dashboard{}, err
	}
	if cur, err = s.byID(ctx, tx, tenant, id, true); err != nil {
		tx.Rollback() //nolint:errcheck // the error at hand is the one to report
		return nil, Dashboard{}, err
	}
	return tx, cur, nil
}

func nameTaken(agent, name string) error {
	return fmt.Errorf("%w: device %s already has a layout named %s", ErrConflict, agent, strconv.Quote(name))
}

// clearDefault takes the default flag off the agent's layouts but keep.
func clearDefault(ctx context.Context, tx *sql.Tx, tenant, agent, keep string) error {
	q := `UPDATE dashboard_layouts SET is_default = $1 WHERE agent_uuid = $2 AND tenant_uuid = $3 AND is_default = $4`
	args := []any{false, agent, tenant, true}
	if keep != "" {
		q += ` AND id <> $5`
		args = append(args, keep)
	}
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("clear default layout of %s: %w", agent, err)
	}
	return nil
}

// change is an update's fields; nil ones stay as they are.
type change struct {
	name      *string
	layout    *Layout
	isDefault *bool
	version   *int64
}

// update applies ch to tenant's layout id and moves its version on.
func (s *store) update(ctx context.Context, tenant, id string, ch change) (Dashboard, error) {
	tx, cur, err := s.lockLayout(ctx, tenant, id)
	if err != nil {
		return Dashboard{}, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if ch.version != nil && *ch.version != cur.Version {
		return Dashboard{}, &VersionError{Current: cur.Version, Given: *ch.version}
	}
	if ch.isDefault != nil && !*ch.isDefault && cur.IsDefault {
		return Dashboard{}, fmt.Errorf("%w: isDefault: a device with layouts keeps one default; make another layout the default instead", ErrInvalid)
	}
	next := cur
	if ch.name != nil {
		next.Name = *ch.name
	}
	if ch.layout != nil {
		next.Layout = *ch.layout
	}
	if ch.isDefault != nil && *ch.isDefault && !cur.IsDefault {
		if err := clearDefault(ctx, tx, tenant, cur.DeviceUUID, id); err != nil {
			return Dashboard{}, err
		}
		next.IsDefault = true
	}
	doc, err := json.Marshal(next.Layout)
	if err != nil {
		return Dashboard{}, fmt.Errorf("encode layout: %w", err)
	}
	res, err := tx.ExecContext(ctx, `UPDATE dashboard_layouts SET name = $1, layout = $2, is_default = $3, version = version + 1, updated_at = $4
WHERE id = $5 AND tenant_uuid = $6 AND version = $7`, next.Name, string(doc), next.IsDefault, s.t(s.stamp()), id, tenant, cur.Version)
	if db.IsUniqueViolation(err) {
		return Dashboard{}, nameTaken(cur.DeviceUUID, next.Name)
	}
	if err != nil {
		return Dashboard{}, fmt.Errorf("update layout %s: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Dashboard{}, fmt.Errorf("update layout %s: %w", id, err)
	}
	if n != 1 {
		panic(fmt.Sprintf("BUG: layout %s moved under its agent's lock (%d rows updated)", id, n))
	}
	return s.commitRead(ctx, tx, tenant, id)
}

// remove deletes tenant's layout id. When it was the default, the
// agent's most recently updated other layout becomes the default; its id
// is returned ("" for none).
func (s *store) remove(ctx context.Context, tenant, id string) (Dashboard, string, error) {
	tx, cur, err := s.lockLayout(ctx, tenant, id)
	if err != nil {
		return Dashboard{}, "", err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, `DELETE FROM dashboard_layouts WHERE id = $1 AND tenant_uuid = $2`, id, tenant); err != nil {
		return Dashboard{}, "", fmt.Errorf("delete layout %s: %w", id, err)
	}
	promoted := ""
	if cur.IsDefault {
		err := tx.QueryRowContext(ctx, `SELECT id FROM dashboard_layouts WHERE agent_uuid = $1 AND tenant_uuid = $2
ORDER BY updated_at DESC, id DESC LIMIT 1`, cur.DeviceUUID, tenant).Scan(&promoted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return Dashboard{}, "", fmt.Errorf("find next default layout: %w", err)
		default:
			// The flag moves without a new version: the promoted
			// layout's own content is as its editors left it.
			if _, err := tx.ExecContext(ctx, `UPDATE dashboard_layouts SET is_default = $1 WHERE id = $2`, true, promoted); err != nil {
				return Dashboard{}, "", fmt.Errorf("promote layout %s: %w", promoted, err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return Dashboard{}, "", fmt.Errorf("commit delete: %w", err)
	}
	return cur, promoted, nil
}
