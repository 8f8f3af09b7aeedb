package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// Key formats. Every key is [A-Za-z0-9_] only, so it is a valid MQTT
// username (brokerauth.ValidateIdentifier) and survives any header.
//
//	provisioning key  pk_{prefix:8}_{secret:40}
//	device API key    dk2_{kid:8}_{secret:40}   (kid: the msgId key id)
const (
	provisioningScheme = "pk_"
	deviceScheme       = "dk2_"
	prefixLen          = 8
	secretLen          = 40
	mqttPasswordLen    = 32
)

// splitKey returns the prefix (or kid) of a key of the given scheme.
func splitKey(key, scheme string) (string, bool) {
	rest, ok := strings.CutPrefix(key, scheme)
	if !ok || len(rest) != prefixLen+1+secretLen || rest[prefixLen] != '_' {
		return "", false
	}
	if !secret.IsAlphanumeric(rest[:prefixLen]) || !secret.IsAlphanumeric(rest[prefixLen+1:]) {
		return "", false
	}
	return rest[:prefixLen], true
}

// ProvisioningKey is a key as listings show it.
type ProvisioningKey struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// Fleet is the name of the fleet its agents join ("" for none),
	// FleetID its id.
	Fleet   string `json:"fleet"`
	FleetID string `json:"fleetId"`
	// AgentUUID is set on a key made to re-provision that agent.
	AgentUUID string    `json:"agentUuid,omitempty"`
	Prefix    string    `json:"prefix"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// Provisioning key lifetimes.
const (
	DefaultProvisioningTTL = 24 * time.Hour
	MaxProvisioningTTL     = 365 * 24 * time.Hour
)

// NewProvisioningKey is what creating a key takes; every field is
// optional. ExpiresAt wins over TTL; neither gives 24 h.
type NewProvisioningKey struct {
	Name string
	// Fleet names, by id or name, an existing fleet the agents join.
	Fleet string
	// AgentUUID makes a key for re-provisioning that existing agent.
	AgentUUID string
	ExpiresAt time.Time
	TTL       time.Duration
}

// CreateProvisioningKey issues a single-use key for tenant. The plaintext
// is returned once.
func (s *Store) CreateProvisioningKey(ctx context.Context, tenant, createdBy string, n NewProvisioningKey) (ProvisioningKey, string, error) {
	now := s.now()
	exp := n.ExpiresAt
	switch {
	case !exp.IsZero():
	case n.TTL != 0:
		exp = now.Add(n.TTL)
	default:
		exp = now.Add(DefaultProvisioningTTL)
	}
	if !exp.After(now) || exp.Sub(now) > MaxProvisioningTTL {
		return ProvisioningKey{}, "", fmt.Errorf("%w: the key must expire in the future and within %s", ErrInvalid, "365 days")
	}
	if len(n.Name) > maxNameLen {
		return ProvisioningKey{}, "", fmt.Errorf("%w: name: at most %d bytes", ErrInvalid, maxNameLen)
	}
	conn, d := s.sql()
	var fleet Fleet
	if strings.TrimSpace(n.Fleet) != "" {
		f, err := s.fleetByRef(ctx, conn, tenant, n.Fleet, "fleet")
		if err != nil {
			return ProvisioningKey{}, "", err
		}
		fleet = f
	}
	if n.AgentUUID != "" {
		a, err := s.agent(ctx, conn, tenant, n.AgentUUID)
		if err != nil {
			return ProvisioningKey{}, "", fmt.Errorf("agentUuid %s: %w", n.AgentUUID, err)
		}
		n.AgentUUID = a.UUID
	}
	k := ProvisioningKey{ID: codec.NewUUID().String(), Name: strings.TrimSpace(n.Name), Fleet: fleet.Name, FleetID: fleet.ID, AgentUUID: n.AgentUUID,
		CreatedAt: now.Truncate(time.Microsecond), ExpiresAt: exp.UTC().Truncate(time.Microsecond)}
	for attempt := 0; ; attempt++ {
		k.Prefix = secret.Random(prefixLen)
		plain := provisioningScheme + k.Prefix + "_" + secret.Random(secretLen)
		_, err := conn.ExecContext(ctx, `INSERT INTO provisioning_keys (id, tenant_uuid, name, fleet_id, prefix, key_hash, created_by, created_at, expires_at, agent_uuid)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			k.ID, tenant, k.Name, db.UUIDArg(k.FleetID), k.Prefix, secret.Hash(plain), db.UUIDArg(createdBy), d.TimeArg(now), d.TimeArg(k.ExpiresAt), db.UUIDArg(k.AgentUUID))
		if db.IsUniqueViolation(err) && attempt < 3 {
			continue
		}
		if err != nil {
			return ProvisioningKey{}, "", fmt.Errorf("create provisioning key: %w", err)
		}
		return k, plain, nil
	}
}

// ProvisioningKeys lists tenant's unused, unexpired keys.
func (s *Store) ProvisioningKeys(ctx context.Context, tenant string) ([]ProvisioningKey, error) {
	conn, d := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT k.id, k.name, COALESCE(f.name, ''), k.fleet_id, k.prefix, k.created_at, k.expires_at, k.agent_uuid
		FROM provisioning_keys k LEFT JOIN fleets f ON f.id = k.fleet_id
		WHERE k.tenant_uuid = $1 AND k.expires_at > $2 ORDER BY k.created_at DESC, k.id`, tenant, d.TimeArg(s.now()))
	if err != nil {
		return nil, fmt.Errorf("list provisioning keys: %w", err)
	}
	defer rows.Close()
	keys := []ProvisioningKey{}
	for rows.Next() {
		var k ProvisioningKey
		var created, expires db.Timestamp
		var agent, fleet sql.NullString
		if err := rows.Scan(&k.ID, &k.Name, &k.Fleet, &fleet, &k.Prefix, &created, &expires, &agent); err != nil {
			return nil, fmt.Errorf("list provisioning keys: %w", err)
		}
		k.CreatedAt, k.ExpiresAt, k.AgentUUID, k.FleetID = created.Time, expires.Time, agent.String, fleet.String
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// DeleteProvisioningKey revokes an unused key of tenant.
func (s *Store) DeleteProvisioningKey(ctx context.Context, tenant, id string) error {
	if _, err := codec.ParseUUID(id); err != nil {
		return ErrNotFound
	}
	conn, _ := s.sql()
	res, err := conn.ExecContext(ctx, `DELETE FROM provisioning_keys WHERE id = $1 AND tenant_uuid = $2`, id, tenant)
	if err != nil {
		return fmt.Errorf("delete provisioning key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Registration is an agent registering itself with a provisioning key.
// AgentUUID is the agent's own id when it has one (a re-provisioned agent
// keeps its UUID); otherwise one is assigned.
type Registration struct {
	Key       string
	AgentName string
	AgentUUID string
	Version   string
}

// Credentials are what an agent receives once: its device API key (also
// its MQTT username) and MQTT password.
type Credentials struct {
	Agent        Agent
	APIKey       string
	Kid          string
	MQTTPassword string
}

// Register consumes a provisioning key and registers the agent in the
// key's tenant and fleet (a usage event agent_added whose actor is the
// key, and a first target-state version with the fleet's template). The key is deleted by the same statement that
// checks it, so of two registrations with one key exactly one wins; an
// unknown, used or expired key is ErrKeyRefused. admit is the licence
// check. A key created for an existing agent (NewProvisioningKey.AgentUUID)
// re-provisions it: its old device keys are revoked (their kids are
// returned in revoked) and new credentials issued. Any other key cannot
// take over a registered agent.
func (s *Store) Register(ctx context.Context, r Registration, admit func(agents int) error) (creds Credentials, revoked []string, err error) {
	prefix, ok := splitKey(strings.TrimSpace(r.Key), provisioningScheme)
	if !ok {
		return Credentials{}, nil, ErrKeyRefused
	}
	n := NewAgent{UUID: r.AgentUUID, Name: r.AgentName, Version: r.Version}
	if err := n.check(); err != nil {
		return Credentials{}, nil, err
	}
	given := r.AgentUUID != ""
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return Credentials{}, nil, fmt.Errorf("register: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	now := s.now()
	var keyID, tenant string
	var bound, fleet sql.NullString
	err = tx.QueryRowContext(ctx, `DELETE FROM provisioning_keys WHERE prefix = $1 AND key_hash = $2 AND expires_at > $3
		RETURNING id, tenant_uuid, fleet_id, agent_uuid`, prefix, secret.Hash(strings.TrimSpace(r.Key)), d.TimeArg(now)).Scan(&keyID, &tenant, &fleet, &bound)
	if errors.Is(err, sql.ErrNoRows) {
		return Credentials{}, nil, ErrKeyRefused
	}
	if err != nil {
		return Credentials{}, nil, fmt.Errorf("register: use key: %w", err)
	}
	if bound.Valid {
		// A key made for one agent re-provisions that agent and no other.
		if given && n.UUID != bound.String {
			return Credentials{}, nil, fmt.Errorf("%w: this provisioning key was made for agent %s", ErrConflict, bound.String)
		}
		n.UUID, given = bound.String, true
	}
	var agent Agent
	var owner string
	switch err := tx.QueryRowContext(ctx, `SELECT tenant_uuid FROM agents WHERE uuid = $1`, n.UUID).Scan(&owner); {
	case errors.Is(err, sql.ErrNoRows):
		if err := s.admit(ctx, tx, d, admit); err != nil {
			return Credentials{}, nil, err
		}
		if agent, err = s.insertAgent(ctx, tx, d, tenant, n); err != nil {
			return Credentials{}, nil, err
		}
	case err != nil:
		return Credentials{}, nil, fmt.Errorf("register: %w", err)
	case owner != tenant || !bound.Valid:
		// Taking over a registered agent needs a key an admin made for
		// it; the same answer whichever tenant has the UUID.
		return Credentials{}, nil, fmt.Errorf("%w: agent %s is registered; re-provisioning it takes a provisioning key created for it (agentUuid)", ErrConflict, n.UUID)
	default:
		if revoked, err = agentKids(ctx, tx, tenant, n.UUID); err != nil {
			return Credentials{}, nil, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM device_keys WHERE agent_uuid = $1`, n.UUID); err != nil {
			return Credentials{}, nil, fmt.Errorf("register: revoke old keys: %w", err)
		}
		// active is left as it is: re-provisioning does not undo an
		// admin's disabling.
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET name = $1, version = $2, updated_at = $3 WHERE uuid = $4`,
			n.Name, n.Version, d.TimeArg(now), n.UUID); err != nil {
			return Credentials{}, nil, fmt.Errorf("register: %w", err)
		}
		if agent, err = s.agent(ctx, tx, tenant, n.UUID); err != nil {
			return Credentials{}, nil, err
		}
	}
	var p pending
	if fleet.Valid {
		if err := s.moveTx(ctx, tx, d, &p, tenant, &agent, strings.ToLower(fleet.String), KeyActor(keyID), true); err != nil {
			return Credentials{}, nil, err
		}
	}
	creds, err = s.issue(ctx, tx, d, tenant, agent.UUID)
	if err != nil {
		return Credentials{}, nil, err
	}
	if err := tx.Commit(); err != nil {
		return Credentials{}, nil, fmt.Errorf("register: commit: %w", err)
	}
	s.flush(p)
	creds.Agent = agent
	return creds, revoked, nil
}

// KeyActor is the actor of what a provisioning key does, in usage events.
func KeyActor(keyID string) string { return "provisioning-key:" + keyID }

// issue creates a device key and MQTT password for an agent.
func (s *Store) issue(ctx context.Context, x execer, d db.Dialect, tenant, agent string) (Credentials, error) {
	var kid string
	for attempt := 0; ; attempt++ {
		kid = secret.Random(prefixLen)
		var one int
		err := x.QueryRowContext(ctx, `SELECT 1 FROM device_keys WHERE kid = $1`, kid).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return Credentials{}, fmt.Errorf("issue device key: %w", err)
		}
		if attempt == 3 {
			return Credentials{}, errors.New("issue device key: no free key id after 4 draws")
		}
	}
	c := Credentials{Kid: kid, APIKey: deviceScheme + kid + "_" + secret.Random(secretLen), MQTTPassword: secret.Random(mqttPasswordLen)}
	if err := brokerauth.ValidateIdentifier(c.APIKey); err != nil {
		panic("BUG: a generated device key is not a valid MQTT username: " + err.Error())
	}
	if _, err := x.ExecContext(ctx, `INSERT INTO device_keys (kid, tenant_uuid, agent_uuid, key_hash, mqtt_password_hash, created_at)
		VALUES ($1, $2, $3, $4, $5, $6)`, kid, tenant, agent, secret.Hash(c.APIKey), secret.Hash(c.MQTTPassword), d.TimeArg(s.now())); err != nil {
		return Credentials{}, fmt.Errorf("issue device key: %w", err)
	}
	return c, nil
}

// IssueDeviceKey gives an agent of tenant another device key and MQTT
// password (POST /auth/api-keys).
func (s *Store) IssueDeviceKey(ctx context.Context, tenant, agentUUID string) (Credentials, error) {
	conn, d := s.sql()
	a, err := s.agent(ctx, conn, tenant, agentUUID)
	if err != nil {
		return Credentials{}, err
	}
	c, err := s.issue(ctx, conn, d, tenant, a.UUID)
	c.Agent = a
	return c, err
}

// RevokeDeviceKey revokes one device key of an agent of tenant by its kid.
func (s *Store) RevokeDeviceKey(ctx context.Context, tenant, agent, kid string) error {
	id, err := codec.ParseUUID(agent)
	if err != nil {
		return ErrNotFound
	}
	conn, d := s.sql()
	res, err := conn.ExecContext(ctx, `UPDATE device_keys SET revoked_at = $1 WHERE kid = $2 AND agent_uuid = $3 AND tenant_uuid = $4
		AND revoked_at IS NULL`, d.TimeArg(s.now()), kid, id.String(), tenant)
	if err != nil {
		return fmt.Errorf("revoke device key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Device is who a device API key belongs to.
type Device struct {
	TenantUUID string
	AgentUUID  string
	Kid        string
}

// deviceRow finds a live key by its kid and checks it in constant time;
// the MQTT password hash comes along for the broker check.
func (s *Store) deviceRow(ctx context.Context, key string) (Device, string, error) {
	kid, ok := splitKey(key, deviceScheme)
	if !ok {
		return Device{}, "", ErrDeviceDenied
	}
	conn, _ := s.sql()
	var dev Device
	var keyHash, pwHash string
	var revoked db.Timestamp
	var active bool
	err := conn.QueryRowContext(ctx, `SELECT k.tenant_uuid, k.agent_uuid, k.key_hash, k.mqtt_password_hash, k.revoked_at, a.active
		FROM device_keys k JOIN agents a ON a.uuid = k.agent_uuid WHERE k.kid = $1`, kid).
		Scan(&dev.TenantUUID, &dev.AgentUUID, &keyHash, &pwHash, &revoked, &active)
	if errors.Is(err, sql.ErrNoRows) {
		secret.Hash(key)
		return Device{}, "", ErrDeviceDenied
	}
	if err != nil {
		return Device{}, "", fmt.Errorf("find device key: %w", err)
	}
	if !secret.Matches(keyHash, key) || !revoked.IsZero() || !active {
		return Device{}, "", ErrDeviceDenied
	}
	dev.Kid = kid
	return dev, pwHash, nil
}

// DeviceByKey authenticates an X-Device-API-Key header.
func (s *Store) DeviceByKey(ctx context.Context, key string) (Device, error) {
	dev, _, err := s.deviceRow(ctx, key)
	return dev, err
}

// AuthenticateDevice implements brokerauth.Store: the MQTT username is the
// device API key, the password the MQTT password issued with it.
func (s *Store) AuthenticateDevice(ctx context.Context, username, password string) (brokerauth.Identity, error) {
	dev, pwHash, err := s.deviceRow(ctx, username)
	if errors.Is(err, ErrDeviceDenied) {
		return brokerauth.Identity{}, fmt.Errorf("%w: %w", brokerauth.ErrDenied, err)
	}
	if err != nil {
		return brokerauth.Identity{}, err
	}
	if !secret.Matches(pwHash, password) {
		return brokerauth.Identity{}, fmt.Errorf("%w: wrong MQTT password", brokerauth.ErrDenied)
	}
	return brokerauth.Identity{Username: username, TenantUUID: dev.TenantUUID, AgentUUID: dev.AgentUUID}, nil
}

var _ brokerauth.Store = (*Store)(nil)

// DeviceKeyPrefix is the start every device key with this kid has: what
// the broker's authorizer forgets when the key is revoked.
func DeviceKeyPrefix(kid string) string { return deviceScheme + kid + "_" }

// DeviceKey is a device key as listings show it: its id, never the key.
type DeviceKey struct {
	Kid       string     `json:"kid"`
	CreatedAt time.Time  `json:"createdAt"`
	RevokedAt *time.Time `json:"revokedAt"`
}

// DeviceKeys lists the keys of an agent of tenant, newest first.
func (s *Store) DeviceKeys(ctx context.Context, tenant, agent string) ([]DeviceKey, error) {
	conn, _ := s.sql()
	a, err := s.agent(ctx, conn, tenant, agent)
	if err != nil {
		return nil, err
	}
	rows, err := conn.QueryContext(ctx, `SELECT kid, created_at, revoked_at FROM device_keys WHERE agent_uuid = $1 AND tenant_uuid = $2
		ORDER BY created_at DESC, kid`, a.UUID, tenant)
	if err != nil {
		return nil, fmt.Errorf("list device keys: %w", err)
	}
	defer rows.Close()
	keys := []DeviceKey{}
	for rows.Next() {
		var k DeviceKey
		var created, revoked db.Timestamp
		if err := rows.Scan(&k.Kid, &created, &revoked); err != nil {
			return nil, fmt.Errorf("list device keys: %w", err)
		}
		k.CreatedAt = created.Time
		if !revoked.IsZero() {
			t := revoked.Time
			k.RevokedAt = &t
		}
		keys = append(keys, k)
	}
	return keys, rows.Err()
}
