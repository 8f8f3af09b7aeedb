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

// An invitation lets someone join a tenant: an admin names the address and
// the role, the invitee gets a link with a single-use token and sets their
// own password. Tokens are stored as hashes and expire.

// Invite is a pending invitation as listings show it.
type Invite struct {
	ID        string    `json:"id"`
	Email     string    `json:"email"`
	Role      string    `json:"role"`
	InvitedBy string    `json:"invitedBy,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
	ExpiresAt time.Time `json:"expiresAt"`
}

const inviteTokenLen = 48

// CreateInvite invites email into tenant with role. An address that has an
// account, or a pending invitation to this tenant, is ErrConflict.
func (s *Store) CreateInvite(ctx context.Context, tenant, invitedBy, email, role string, ttl time.Duration) (Invite, string, error) {
	email = strings.ToLower(strings.TrimSpace(email))
	if err := CheckEmail(email); err != nil {
		return Invite{}, "", err
	}
	if role == "" {
		role = RoleMember
	}
	if role != RoleAdmin && role != RoleMember {
		return Invite{}, "", fmt.Errorf("%w: role must be %s or %s, got %q", ErrInvalid, RoleAdmin, RoleMember, role)
	}
	conn, d := s.sql()
	now := s.now()
	var one int
	err := conn.QueryRowContext(ctx, `SELECT 1 FROM users WHERE email = $1`, email).Scan(&one)
	if err == nil {
		return Invite{}, "", fmt.Errorf("%w: %s already has an account", ErrConflict, email)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Invite{}, "", fmt.Errorf("create invite: %w", err)
	}
	err = conn.QueryRowContext(ctx, `SELECT 1 FROM invites WHERE tenant_uuid = $1 AND email = $2 AND expires_at > $3`,
		tenant, email, d.TimeArg(now)).Scan(&one)
	if err == nil {
		return Invite{}, "", fmt.Errorf("%w: %s has a pending invitation; cancel it to send a new one", ErrConflict, email)
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return Invite{}, "", fmt.Errorf("create invite: %w", err)
	}
	token := secret.Random(inviteTokenLen)
	inv := Invite{ID: codec.NewUUID().String(), Email: email, Role: role, InvitedBy: invitedBy, CreatedAt: now.Truncate(time.Microsecond),
		ExpiresAt: now.Add(ttl).Truncate(time.Microsecond)}
	if _, err := conn.ExecContext(ctx, `INSERT INTO invites (id, tenant_uuid, email, role, token_hash, invited_by, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, inv.ID, tenant, email, role, secret.Hash(token), db.UUIDArg(invitedBy),
		d.TimeArg(now), d.TimeArg(inv.ExpiresAt)); err != nil {
		return Invite{}, "", fmt.Errorf("create invite: %w", err)
	}
	return inv, token, nil
}

// Invites lists tenant's pending invitations, newest first.
func (s *Store) Invites(ctx context.Context, tenant string) ([]Invite, error) {
	conn, d := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT id, email, role, invited_by, created_at, expires_at FROM invites
		WHERE tenant_uuid = $1 AND expires_at > $2 ORDER BY created_at DESC, id`, tenant, d.TimeArg(s.now()))
	if err != nil {
		return nil, fmt.Errorf("list invites: %w", err)
	}
	defer rows.Close()
	out := []Invite{}
	for rows.Next() {
		var inv Invite
		var by sql.NullString
		var created, expires db.Timestamp
		if err := rows.Scan(&inv.ID, &inv.Email, &inv.Role, &by, &created, &expires); err != nil {
			return nil, fmt.Errorf("list invites: %w", err)
		}
		inv.InvitedBy, inv.CreatedAt, inv.ExpiresAt = by.String, created.Time, expires.Time
		out = append(out, inv)
	}
	return out, rows.Err()
}

// CancelInvite deletes a pending invitation of tenant.
func (s *Store) CancelInvite(ctx context.Context, tenant, id string) error {
	if _, err := codec.ParseUUID(id); err != nil {
		return ErrNotFound
	}
	conn, _ := s.sql()
	res, err := conn.ExecContext(ctx, `DELETE FROM invites WHERE id = $1 AND tenant_uuid = $2`, id, tenant)
	if err != nil {
		return fmt.Errorf("cancel invite: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// AcceptInvite creates the invited account with the invitee's password
// (and optional user name), consuming the token in the same transaction.
// Unknown, used and expired tokens are ErrRevoked.
func (s *Store) AcceptInvite(ctx context.Context, token, username, password string) (User, error) {
	if err := CheckPassword(password); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("accept invite: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var tenant, email, role string
	err = tx.QueryRowContext(ctx, `DELETE FROM invites WHERE token_hash = $1 AND expires_at > $2 RETURNING tenant_uuid, email, role`,
		secret.Hash(token), d.TimeArg(s.now())).Scan(&tenant, &email, &role)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrRevoked
	}
	if err != nil {
		return User{}, fmt.Errorf("accept invite: %w", err)
	}
	n := NewUser{Email: email, Username: username, Password: password, Role: role, hash: hash}
	if err := n.normalize(); err != nil {
		return User{}, err
	}
	u, err := s.insertUser(ctx, tx, d, tenant, n)
	if err != nil {
		return User{}, err
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("accept invite: commit: %w", err)
	}
	return u, nil
}
