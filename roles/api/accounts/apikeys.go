package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// User API keys are "ek_{prefix}_{secret}": the 8-character prefix finds
// the row and is shown in listings so a user can tell keys apart; only a
// hash of the whole key is stored. A key acts as its user, in the user's
// tenant and with the user's current role, until revoked.
const (
	apiKeyScheme    = "ek_"
	apiKeyPrefixLen = 8
	apiKeySecretLen = 40
)

// APIKey is a key as listings show it.
type APIKey struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Prefix     string     `json:"prefix"`
	UserID     string     `json:"userId"`
	AgentUUID  string     `json:"agentUuid,omitempty"`
	CreatedAt  time.Time  `json:"createdAt"`
	LastUsedAt *time.Time `json:"lastUsedAt"`
	RevokedAt  *time.Time `json:"revokedAt"`
}

// IsAPIKey tells a user API key from a JWT in a Bearer header.
func IsAPIKey(s string) bool { return strings.HasPrefix(s, apiKeyScheme) }

// CreateAPIKey issues a key for userID of tenant, optionally bound to an
// agent of the same tenant. The plaintext is returned once.
func (s *Store) CreateAPIKey(ctx context.Context, tenant, userID, name, agentUUID string) (APIKey, string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > 200 {
		return APIKey{}, "", fmt.Errorf("%w: name is required, at most 200 bytes", ErrInvalid)
	}
	if agentUUID != "" {
		u, err := codec.ParseUUID(agentUUID)
		if err != nil {
			return APIKey{}, "", fmt.Errorf("%w: agentUuid must be a hyphenated UUID, got %q", ErrInvalid, truncate(agentUUID))
		}
		agentUUID = u.String()
	}
	conn, d := s.sql()
	if agentUUID != "" {
		var one int
		err := conn.QueryRowContext(ctx, `SELECT 1 FROM agents WHERE uuid = $1 AND tenant_uuid = $2`, agentUUID, tenant).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return APIKey{}, "", fmt.Errorf("agent %s: %w", agentUUID, ErrNotFound)
		}
		if err != nil {
			return APIKey{}, "", fmt.Errorf("create api key: %w", err)
		}
	}
	now := s.now()
	k := APIKey{ID: codec.NewUUID().String(), Name: name, UserID: userID, AgentUUID: agentUUID, CreatedAt: now.Truncate(time.Microsecond)}
	for attempt := 0; ; attempt++ {
		k.Prefix = secret.Random(apiKeyPrefixLen)
		plain := apiKeyScheme + k.Prefix + "_" + secret.Random(apiKeySecretLen)
		_, err := conn.ExecContext(ctx, `INSERT INTO api_keys (id, tenant_uuid, user_id, agent_uuid, name, prefix, key_hash, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
			k.ID, tenant, userID, nullString(agentUUID), name, k.Prefix, secret.Hash(plain), d.TimeArg(now))
		if db.IsUniqueViolation(err) && attempt < 3 {
			continue // a prefix collision, one in 2^47
		}
		if err != nil {
			return APIKey{}, "", fmt.Errorf("create api key: %w", err)
		}
		return k, plain, nil
	}
}

// APIKeys lists the keys of tenant, newest first; a member sees their own
// only (userID set), an admin all (userID "").
func (s *Store) APIKeys(ctx context.Context, tenant, userID string) ([]APIKey, error) {
	conn, _ := s.sql()
	q := `SELECT id, name, prefix, user_id, agent_uuid, created_at, last_used_at, revoked_at FROM api_keys WHERE tenant_uuid = $1`
	args := []any{tenant}
	if userID != "" {
		q += ` AND user_id = $2`
		args = append(args, userID)
	}
	rows, err := conn.QueryContext(ctx, q+` ORDER BY created_at DESC, id`, args...)
	if err != nil {
		return nil, fmt.Errorf("list api keys: %w", err)
	}
	defer rows.Close()
	keys := []APIKey{}
	for rows.Next() {
		var k APIKey
		var agent sql.NullString
		var created, used, revoked db.Timestamp
		if err := rows.Scan(&k.ID, &k.Name, &k.Prefix, &k.UserID, &agent, &created, &used, &revoked); err != nil {
			return nil, fmt.Errorf("list api keys: %w", err)
		}
		k.AgentUUID, k.CreatedAt, k.LastUsedAt, k.RevokedAt = agent.String, created.Time, timePtr(used), timePtr(revoked)
		keys = append(keys, k)
	}
	return keys, rows.Err()
}

// RevokeAPIKey revokes a key of tenant; a member may revoke their own
// only (userID set).
func (s *Store) RevokeAPIKey(ctx context.Context, tenant, userID, id string) error {
	if _, err := codec.ParseUUID(id); err != nil {
		return ErrNotFound
	}
	conn, d := s.sql()
	q := `UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND tenant_uuid = $3 AND revoked_at IS NULL`
	args := []any{d.TimeArg(s.now()), id, tenant}
	if userID != "" {
		q += ` AND user_id = $4`
		args = append(args, userID)
	}
	res, err := conn.ExecContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("revoke api key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// AuthenticateAPIKey returns the user a key acts as. Malformed, unknown,
// revoked keys and keys of inactive users are all ErrBadCredentials.
func (s *Store) AuthenticateAPIKey(ctx context.Context, key string) (User, APIKey, error) {
	rest, ok := strings.CutPrefix(key, apiKeyScheme)
	if !ok || len(rest) != apiKeyPrefixLen+1+apiKeySecretLen || rest[apiKeyPrefixLen] != '_' {
		return User{}, APIKey{}, ErrBadCredentials
	}
	conn, d := s.sql()
	var k APIKey
	var hash string
	var agent sql.NullString
	var used, revoked db.Timestamp
	err := conn.QueryRowContext(ctx, `SELECT id, user_id, agent_uuid, key_hash, last_used_at, revoked_at FROM api_keys WHERE prefix = $1`,
		rest[:apiKeyPrefixLen]).Scan(&k.ID, &k.UserID, &agent, &hash, &used, &revoked)
	if errors.Is(err, sql.ErrNoRows) {
		secret.Hash(key) // the same work as a known prefix
		return User{}, APIKey{}, ErrBadCredentials
	}
	if err != nil {
		return User{}, APIKey{}, fmt.Errorf("find api key: %w", err)
	}
	if !secret.Matches(hash, key) || !revoked.IsZero() {
		return User{}, APIKey{}, ErrBadCredentials
	}
	u, err := scanUser(conn.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, k.UserID))
	if errors.Is(err, ErrNotFound) || (err == nil && !u.Active) {
		return User{}, APIKey{}, ErrBadCredentials
	}
	if err != nil {
		return User{}, APIKey{}, fmt.Errorf("find api key user: %w", err)
	}
	k.AgentUUID = agent.String
	// last_used_at is advisory: written at most once a minute per key so a
	// busy script does not turn every request into a write.
	if now := s.now(); used.IsZero() || now.Sub(used.Time) > time.Minute {
		if _, err := conn.ExecContext(ctx, `UPDATE api_keys SET last_used_at = $1 WHERE id = $2`, d.TimeArg(now), k.ID); err != nil {
			return User{}, APIKey{}, fmt.Errorf("touch api key: %w", err)
		}
	}
	return u, k, nil
}

func timePtr(t db.Timestamp) *time.Time {
	if t.IsZero() {
		return nil
	}
	v := t.Time
	return &v
}
