package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// Errors the handlers turn into statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrInvalid  = errors.New("invalid input")
	ErrConflict = errors.New("conflict")
	// ErrKeyRefused is the one answer for an unknown, used or expired
	// provisioning key: which of them it was would help a guesser.
	ErrKeyRefused = errors.New("provisioning key refused: unknown, already used or expired")
	// ErrDeviceDenied is every refused device credential.
	ErrDeviceDenied = errors.New("device credentials refused")
)

// Location is where an agent is, for the map view.
type Location struct {
	Latitude  float64 `json:"latitude"`
	Longitude float64 `json:"longitude"`
	Label     string  `json:"label,omitempty"`
}

func (l *Location) check() error {
	if l == nil {
		return nil
	}
	if math.IsNaN(l.Latitude) || l.Latitude < -90 || l.Latitude > 90 {
		return fmt.Errorf("%w: location.latitude must be -90..90, got %v", ErrInvalid, l.Latitude)
	}
	if math.IsNaN(l.Longitude) || l.Longitude < -180 || l.Longitude > 180 {
		return fmt.Errorf("%w: location.longitude must be -180..180, got %v", ErrInvalid, l.Longitude)
	}
	if len(l.Label) > 200 {
		return fmt.Errorf("%w: location.label is longer than 200 bytes", ErrInvalid)
	}
	return nil
}

// Agent is a registered edge agent.
type Agent struct {
	UUID     string `json:"uuid"`
	TenantID string `json:"tenantId"`
	Name     string `json:"name"`
	Version  string `json:"version"`
	State    string `json:"state"`
	// Fleet is the name of the agent's fleet, "" when it is in none;
	// FleetID is its id (docs/fleets-and-jobs.md).
	Fleet    string            `json:"fleet"`
	FleetID  string            `json:"fleetId"`
	Tags     map[string]string `json:"tags"`
	Location *Location         `json:"location"`
	Active   bool              `json:"active"`
	// Status is derived from Active and LastSeen (StatusOf); State is
	// the lifecycle state set through the API.
	Status    string     `json:"status"`
	LastSeen  *time.Time `json:"lastSeen"`
	CreatedAt time.Time  `json:"createdAt"`
	UpdatedAt time.Time  `json:"updatedAt"`
}

// Store keeps the agent registry, provisioning keys and device keys in the
// Cloud API's database. Every read and change of a tenant's records filters
// on the tenant taken from the caller's credential; another tenant's
// record is ErrNotFound.
type Store struct {
	db  *db.DB
	now func() time.Time
	// offlineAfter is the silence after which an agent is offline; 0 is
	// DefaultOfflineAfter.
	offlineAfter time.Duration
	// onTargetState hears of every committed target-state change.
	onTargetState func(TargetStateChange)
	// onFleetEvent hears of every committed fleet usage event.
	onFleetEvent func(tenant string, ev FleetEvent)
}

// NewStore returns a store on d, which must be open by the first call.
func NewStore(d *db.DB) *Store {
	return &Store{db: d, now: func() time.Time { return time.Now().UTC() }}
}

func (s *Store) sql() (*sql.DB, db.Dialect) {
	return s.db.SQL(), s.db.Dialect()
}

// Limits of agent metadata.
const (
	maxNameLen  = 200
	maxTags     = 64
	maxTagBytes = 200
)

func checkName(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("%w: %s is required", ErrInvalid, what)
	}
	if len(s) > maxNameLen || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return "", fmt.Errorf("%w: %s must be at most %d bytes without control characters", ErrInvalid, what, maxNameLen)
	}
	return s, nil
}

func checkTags(tags map[string]string) error {
	if len(tags) > maxTags {
		return fmt.Errorf("%w: at most %d tags, got %d", ErrInvalid, maxTags, len(tags))
	}
	for k, v := range tags {
		if strings.TrimSpace(k) == "" || len(k) > maxTagBytes || len(v) > maxTagBytes {
			return fmt.Errorf("%w: tag keys must be non-blank and tag keys and values at most %d bytes (tag %q)", ErrInvalid, maxTagBytes, clip(k))
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// ParseAgentUUID returns s as a canonical agent UUID.
func ParseAgentUUID(s string) (string, error) {
	u, err := codec.ParseUUID(s)
	if err != nil {
		return "", fmt.Errorf("%w: uuid must be a hyphenated UUID, got %q", ErrInvalid, clip(s))
	}
	return u.String(), nil
}

// NewAgent is a registry record created by a user (POST /agents) or by
// self-registration.
type NewAgent struct {
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Version string `json:"version"`
	// Fleet names the fleet the agent joins, by id or name; it must
	// exist.
	Fleet    string            `json:"fleet"`
	Tags     map[string]string `json:"tags"`
	Location *Location         `json:"location"`
	// By is who creates the agent, for its fleet's usage events.
	By string `json:"-"`
}

func (n *NewAgent) check() error {
	var err error
	if n.Name, err = checkName("name", n.Name); err != nil {
		return err
	}
	if n.UUID == "" {
		n.UUID = codec.NewUUID().String()
	} else if n.UUID, err = ParseAgentUUID(n.UUID); err != nil {
		return err
	}
	if len(n.Version) > 100 {
		return fmt.Errorf("%w: version is longer than 100 bytes", ErrInvalid)
	}
	n.Fleet = strings.TrimSpace(n.Fleet)
	if n.Tags == nil {
		n.Tags = map[string]string{}
	}
	if err := checkTags(n.Tags); err != nil {
		return err
	}
	return n.Location.check()
}

func (s *Store) insertAgent(ctx context.Context, x execer, d db.Dialect, tenant string, n NewAgent) (Agent, error) {
	now := s.now()
	tags, _ := json.Marshal(n.Tags)
	var loc any
	if n.Location != nil {
		b, _ := json.Marshal(n.Location)
		loc = string(b)
	}
	_, err := x.ExecContext(ctx, `INSERT INTO agents (uuid, tenant_uuid, name, version, state, tags, location, active, created_at, updated_at)
		VALUES ($1, $2, $3, $4, 'registered', $5, $6, $7, $8, $8)`,
		n.UUID, tenant, n.Name, n.Version, string(tags), loc, true, d.TimeArg(now))
	if db.IsUniqueViolation(err) {
		return Agent{}, fmt.Errorf("%w: an agent with uuid %s exists", ErrConflict, n.UUID)
	}
	if err != nil {
		return Agent{}, fmt.Errorf("create agent: %w", err)
	}
	t := now.Truncate(time.Microsecond)
	return Agent{UUID: n.UUID, TenantID: tenant, Name: n.Name, Version: n.Version, State: "registered",
		Tags: n.Tags, Location: n.Location, Active: true, Status: StatusNeverSeen, CreatedAt: t, UpdatedAt: t}, nil
}

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// CreateAgent adds a record to tenant's registry; admit decides, from the
// number of agents installed, whether the licence allows one more.
func (s *Store) CreateAgent(ctx context.Context, tenant string, n NewAgent, admit func(agents int) error) (Agent, error) {
	if err := n.check(); err != nil {
		return Agent{}, err
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Agent{}, fmt.Errorf("create agent: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var f Fleet
	if n.Fleet != "" {
		if f, err = s.fleetByRef(ctx, tx, tenant, n.Fleet, "fleet"); err != nil {
			return Agent{}, err
		}
	}
	if err := s.admit(ctx, tx, d, admit); err != nil {
		return Agent{}, err
	}
	a, err := s.insertAgent(ctx, tx, d, tenant, n)
	if err != nil {
		return Agent{}, err
	}
	var p pending
	if f.ID != "" {
		if err := s.moveTx(ctx, tx, d, &p, tenant, &a, f.ID, n.By, true); err != nil {
			return Agent{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return Agent{}, fmt.Errorf("create agent: commit: %w", err)
	}
	s.flush(p)
	return a, nil
}

// admit runs the licence check against the installation's agent count
// inside the registering transaction. On PostgreSQL an advisory lock
// serializes registrations, so two at once cannot both take the last
// place; SQLite serializes writers anyway.
func (s *Store) admit(ctx context.Context, tx *sql.Tx, d db.Dialect, admit func(int) error) error {
	if admit == nil {
		return nil
	}
	if d.Engine == db.Postgres {
		if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock(7305104951)`); err != nil {
			return fmt.Errorf("lock registrations: %w", err)
		}
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM agents`).Scan(&n); err != nil {
		return fmt.Errorf("count agents: %w", err)
	}
	return admit(n)
}

// CountAgents is the installation's number of agents, for licence usage.
func (s *Store) CountAgents(ctx context.Context) (int, error) {
	conn, _ := s.sql()
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM agents`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count agents: %w", err)
	}
	return n, nil
}

// agentColumns are read FROM agentTables, whose alias a is the agent.
const (
	agentColumns = `a.uuid, a.tenant_uuid, a.name, a.version, a.state, COALESCE(f.name, ''), a.fleet_id, a.tags, a.location, a.active,
		a.last_seen, a.created_at, a.updated_at`
	agentTables = `agents a LEFT JOIN fleets f ON f.id = a.fleet_id`
)

func scanAgent(row interface{ Scan(...any) error }) (Agent, error) {
	var a Agent
	var tags string
	var loc, fleetID sql.NullString
	var lastSeen, created, updated db.Timestamp
	if err := row.Scan(&a.UUID, &a.TenantID, &a.Name, &a.Version, &a.State, &a.Fleet, &fleetID, &tags, &loc, &a.Active, &lastSeen,
		&created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Agent{}, ErrNotFound
		}
		return Agent{}, err
	}
	if err := json.Unmarshal([]byte(tags), &a.Tags); err != nil {
		return Agent{}, fmt.Errorf("agent %s tags: %w", a.UUID, err)
	}
	if loc.Valid && loc.String != "" && loc.String != "null" {
		a.Location = new(Location)
		if err := json.Unmarshal([]byte(loc.String), a.Location); err != nil {
			return Agent{}, fmt.Errorf("agent %s location: %w", a.UUID, err)
		}
	}
	if !lastSeen.IsZero() {
		t := lastSeen.Time
		a.LastSeen = &t
	}
	a.CreatedAt, a.UpdatedAt, a.FleetID = created.Time, updated.Time, fleetID.String
	return a, nil
}

// Agent returns an agent of tenant.
func (s *Store) Agent(ctx context.Context, tenant, uuid string) (Agent, error) {
	conn, _ := s.sql()
	return s.agent(ctx, conn, tenant, uuid)
}

func (s *Store) agent(ctx context.Context, x execer, tenant, uuid string) (Agent, error) {
	id, err := codec.ParseUUID(uuid)
	if err != nil {
		return Agent{}, ErrNotFound
	}
	a, err := scanAgent(x.QueryRowContext(ctx, `SELECT `+agentColumns+` FROM `+agentTables+` WHERE a.uuid = $1 AND a.tenant_uuid = $2`, id.String(), tenant))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return Agent{}, fmt.Errorf("get agent: %w", err)
	}
	if err == nil {
		s.withStatus(&a)
	}
	return a, err
}

// Owned returns which of uuids are agents of tenant's registry, in one
// query whatever their number: POST /readings checks every agent of a
// batch, and a round trip per agent made a body of many agents cost as
// many sequential queries. Malformed ids are nobody's agent.
func (s *Store) Owned(ctx context.Context, tenant string, uuids []string) (map[string]bool, error) {
	owned := make(map[string]bool, len(uuids))
	args := []any{tenant}
	var in strings.Builder
	seen := make(map[string]bool, len(uuids))
	for _, u := range uuids {
		id, err := codec.ParseUUID(u)
		if err != nil || seen[id.String()] {
			continue
		}
		seen[id.String()] = true
		args = append(args, id.String())
		if in.Len() > 0 {
			in.WriteByte(',')
		}
		fmt.Fprintf(&in, "$%d", len(args))
	}
	if len(args) == 1 {
		return owned, nil
	}
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT uuid FROM agents WHERE tenant_uuid = $1 AND uuid IN (`+in.String()+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("check agents of tenant: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var u string
		if err := rows.Scan(&u); err != nil {
			return nil, fmt.Errorf("check agents of tenant: %w", err)
		}
		owned[strings.ToLower(u)] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check agents of tenant: %w", err)
	}
	return owned, nil
}

// Agents lists tenant's agents by name.
func (s *Store) Agents(ctx context.Context, tenant string) ([]Agent, error) {
	return s.listAgents(ctx, `a.tenant_uuid = $1`, tenant)
}

// listAgents lists the agents that meet where (on agentTables) by name.
func (s *Store) listAgents(ctx context.Context, where string, args ...any) ([]Agent, error) {
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT `+agentColumns+` FROM `+agentTables+` WHERE `+where+` ORDER BY a.name, a.uuid`, args...)
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	defer rows.Close()
	agents := []Agent{}
	for rows.Next() {
		a, err := scanAgent(rows)
		if err != nil {
			return nil, fmt.Errorf("list agents: %w", err)
		}
		s.withStatus(&a)
		agents = append(agents, a)
	}
	return agents, rows.Err()
}

// AgentsByTags lists tenant's agents that carry every tag of want (a value
// of "*" matches any value of that key).
func (s *Store) AgentsByTags(ctx context.Context, tenant string, want map[string]string) ([]Agent, error) {
	return s.AgentsMatching(ctx, tenant, equalityQuery(want))
}

// AgentsMatching lists tenant's agents whose tags meet every condition
// (ParseTagQuery).
func (s *Store) AgentsMatching(ctx context.Context, tenant string, conds []TagCond) ([]Agent, error) {
	all, err := s.Agents(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []Agent{}
	for _, a := range all {
		if matchConds(a.Tags, conds) {
			out = append(out, a)
		}
	}
	return out, nil
}

func matchTags(have, want map[string]string) bool { return matchConds(have, equalityQuery(want)) }

// AgentUpdate is a partial metadata update; nil fields are left alone.
type AgentUpdate struct {
	Name    *string `json:"name"`
	Version *string `json:"version"`
	// Fleet moves the agent to the fleet of that id or name; "" takes it
	// out of its fleet.
	Fleet    *string   `json:"fleet"`
	State    *string   `json:"state"`
	Location *Location `json:"location"`
	// By is who changes the agent, for the fleets' usage events.
	By string `json:"-"`
}

// UpdateAgent applies up to an agent of tenant.
func (s *Store) UpdateAgent(ctx context.Context, tenant, uuid string, up AgentUpdate) (Agent, error) {
	return s.modify(ctx, tenant, uuid, up.By, up.Fleet, func(a *Agent) error {
		var err error
		if up.Name != nil {
			if a.Name, err = checkName("name", *up.Name); err != nil {
				return err
			}
		}
		if up.Version != nil {
			if len(*up.Version) > 100 {
				return fmt.Errorf("%w: version is longer than 100 bytes", ErrInvalid)
			}
			a.Version = *up.Version
		}
		if up.State != nil {
			if a.State, err = checkName("state", *up.State); err != nil {
				return err
			}
		}
		if up.Location != nil {
			if err := up.Location.check(); err != nil {
				return err
			}
			a.Location = up.Location
		}
		return nil
	})
}

// SetActive enables or disables an agent; a disabled agent's device keys
// stop working until it is enabled again.
func (s *Store) SetActive(ctx context.Context, tenant, uuid string, active bool) (Agent, error) {
	return s.modify(ctx, tenant, uuid, "", nil, func(a *Agent) error { a.Active = active; return nil })
}

// SetTags replaces an agent's tags.
func (s *Store) SetTags(ctx context.Context, tenant, uuid string, tags map[string]string) (Agent, error) {
	if tags == nil {
		tags = map[string]string{}
	}
	if err := checkTags(tags); err != nil {
		return Agent{}, err
	}
	return s.modify(ctx, tenant, uuid, "", nil, func(a *Agent) error { a.Tags = tags; return nil })
}

// modify reads an agent, lets fn change it and writes it back in one
// transaction. A fleet reference (id or name, "" for none) moves the
// agent to that fleet in the same transaction, as POST /fleets/:id/agents
// does.
func (s *Store) modify(ctx context.Context, tenant, uuid, by string, fleetRef *string, fn func(*Agent) error) (Agent, error) {
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Agent{}, fmt.Errorf("update agent: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	a, err := s.agent(ctx, tx, tenant, uuid)
	if err != nil {
		return Agent{}, err
	}
	if err := fn(&a); err != nil {
		return Agent{}, err
	}
	var p pending
	if fleetRef != nil {
		to := ""
		if ref := strings.TrimSpace(*fleetRef); ref != "" {
			f, err := s.fleetByRef(ctx, tx, tenant, ref, "fleet")
			if err != nil {
				return Agent{}, err
			}
			to = f.ID
		}
		if err := s.moveTx(ctx, tx, d, &p, tenant, &a, to, by, true); err != nil {
			return Agent{}, err
		}
	}
	tags, _ := json.Marshal(a.Tags)
	var loc any
	if a.Location != nil {
		b, _ := json.Marshal(a.Location)
		loc = string(b)
	}
	now := s.now()
	if _, err := tx.ExecContext(ctx, `UPDATE agents SET name = $1, version = $2, state = $3, tags = $4, location = $5,
		active = $6, updated_at = $7 WHERE uuid = $8 AND tenant_uuid = $9`,
		a.Name, a.Version, a.State, string(tags), loc, a.Active, d.TimeArg(now), a.UUID, tenant); err != nil {
		return Agent{}, fmt.Errorf("update agent: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Agent{}, fmt.Errorf("update agent: commit: %w", err)
	}
	s.flush(p)
	a.UpdatedAt = now.Truncate(time.Microsecond)
	s.withStatus(&a)
	return a, nil
}

// DeleteAgent removes an agent of tenant with its device keys, and returns
// the key ids that stopped working.
func (s *Store) DeleteAgent(ctx context.Context, tenant, uuid string) ([]string, error) {
	id, err := codec.ParseUUID(uuid)
	if err != nil {
		return nil, ErrNotFound
	}
	conn, _ := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("delete agent: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	kids, err := agentKids(ctx, tx, tenant, id.String())
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM agents WHERE uuid = $1 AND tenant_uuid = $2`, id.String(), tenant)
	if err != nil {
		return nil, fmt.Errorf("delete agent: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, ErrNotFound
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("delete agent: commit: %w", err)
	}
	return kids, nil
}

func agentKids(ctx context.Context, x execer, tenant, agent string) ([]string, error) {
	rows, err := x.QueryContext(ctx, `SELECT kid FROM device_keys WHERE agent_uuid = $1 AND tenant_uuid = $2`, agent, tenant)
	if err != nil {
		return nil, fmt.Errorf("list device keys: %w", err)
	}
	defer rows.Close()
	var kids []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, fmt.Errorf("list device keys: %w", err)
		}
		kids = append(kids, k)
	}
	return kids, rows.Err()
}

// LocationTag is the tag that places an agent without a location field
// on the map: "latitude,longitude" in decimal degrees.
const LocationTag = "location"

// locationTag parses a location tag; nil when v is not one.
func locationTag(v string) *Location {
	lat, lon, ok := strings.Cut(v, ",")
	if !ok {
		return nil
	}
	la, err1 := strconv.ParseFloat(strings.TrimSpace(lat), 64)
	lo, err2 := strconv.ParseFloat(strings.TrimSpace(lon), 64)
	l := &Location{Latitude: la, Longitude: lo}
	if err1 != nil || err2 != nil || math.IsInf(la, 0) || math.IsInf(lo, 0) || l.check() != nil {
		return nil
	}
	return l
}

// Locations lists the agents of tenant that have a location: the location
// field, else a location tag (LocationTag).
func (s *Store) Locations(ctx context.Context, tenant string) ([]Agent, error) {
	all, err := s.Agents(ctx, tenant)
	if err != nil {
		return nil, err
	}
	out := []Agent{}
	for _, a := range all {
		if a.Location == nil {
			a.Location = locationTag(a.Tags[LocationTag])
		}
		if a.Location != nil {
			out = append(out, a)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
