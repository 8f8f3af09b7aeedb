package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"strings"
	"time"
)

// Password-reset tokens are random, kept only as hashes, used once and
// short-lived; using one ends every session of the account.

// resetTokenLen gives about 285 bits.
const resetTokenLen = 48

// StartReset creates a reset token for the account with e-mail email.
// ok is false for an unknown or inactive account; callers answer the same
// in both cases, so the endpoint does not reveal who has an account.
func (s *Store) StartReset(ctx context.Context, email string, ttl time.Duration) (u User, token string, ok bool, err error) {
	email = strings.ToLower(strings.TrimSpace(email))
	conn, _ := s.sql()
	u, err = scanUser(conn.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, email))
	if errors.Is(err, ErrNotFound) || (err == nil && !u.Active) {
		return User{}, "", false, nil
	}
	if err != nil {
		return User{}, "", false, fmt.Errorf("find account: %w", err)
	}
	token, err = s.resetFor(ctx, u.ID, ttl)
	return u, token, err == nil, err
}

// StartResetFor creates a reset token for an account of tenant (the
// admin-triggered reset).
func (s *Store) StartResetFor(ctx context.Context, tenant, userID string, ttl time.Duration) (User, string, error) {
	u, err := s.User(ctx, tenant, userID)
	if err != nil {
		return User{}, "", err
	}
	token, err := s.resetFor(ctx, u.ID, ttl)
	return u, token, err
}

func (s *Store) resetFor(ctx context.Context, userID string, ttl time.Duration) (string, error) {
	token := secret.Random(resetTokenLen)
	conn, d := s.sql()
	now := s.now()
	if _, err := conn.ExecContext(ctx, `DELETE FROM password_resets WHERE user_id = $1 OR expires_at <= $2`, userID, d.TimeArg(now)); err != nil {
		return "", fmt.Errorf("reset: %w", err)
	}
	if _, err := conn.ExecContext(ctx, `INSERT INTO password_resets (token_hash, user_id, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		secret.Hash(token), userID, d.TimeArg(now), d.TimeArg(now.Add(ttl))); err != nil {
		return "", fmt.Errorf("reset: %w", err)
	}
	return token, nil
}

// FinishReset sets a new password with a reset token, which it consumes.
// Unknown, used and expired tokens are all ErrRevoked.
func (s *Store) FinishReset(ctx context.Context, token, password string) (User, error) {
	if err := CheckPassword(password); err != nil {
		return User{}, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return User{}, err
	}
	// The token is consumed by the transaction that sets the password: a
	// failure leaves both as they were.
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("reset: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var userID string
	err = tx.QueryRowContext(ctx, `DELETE FROM password_resets WHERE token_hash = $1 AND expires_at > $2 RETURNING user_id`,
		secret.Hash(token), d.TimeArg(s.now())).Scan(&userID)
	if errors.Is(err, sql.ErrNoRows) {
		return User{}, ErrRevoked
	}
	if err != nil {
		return User{}, fmt.Errorf("reset: %w", err)
	}
	if err := s.writePassword(ctx, tx, d, userID, hash, "password reset"); err != nil {
		return User{}, err
	}
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, userID))
	if err != nil {
		return User{}, fmt.Errorf("reset: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("reset: commit: %w", err)
	}
	s.changed(ctx, userID)
	return u, nil
}
