package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Admins is the admin_users and admin_sessions tables.
type Admins struct {
	db   *db.DB
	cond *condition
}

// AdminUser is a user of the agent's admin UI. The hash never leaves the
// store's callers.
type AdminUser struct {
	Username     string
	PasswordHash string
	Active       bool
	Superuser    bool
}

// AdminPatch changes some fields of an admin user; nil leaves one alone.
type AdminPatch struct {
	Active       *bool
	Superuser    *bool
	PasswordHash *string
}

// Create adds an admin user; ErrDuplicate when the name is taken.
func (a *Admins) Create(ctx context.Context, u AdminUser) (err error) {
	defer a.cond.observe(&err)
	now := nowMS()
	_, err = a.db.SQL().ExecContext(ctx,
		`INSERT INTO admin_users (username, password_hash, is_active, is_superuser, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $5)`,
		u.Username, u.PasswordHash, u.Active, u.Superuser, now)
	if db.IsUniqueViolation(err) {
		return fmt.Errorf("admin user %q: %w", u.Username, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("insert admin user: %w", err)
	}
	return nil
}

// CreateFirst adds u only when no admin user exists yet, in one
// transaction so two concurrent setup calls cannot both succeed. It reports
// whether u was created.
func (a *Admins) CreateFirst(ctx context.Context, u AdminUser) (_ bool, err error) {
	defer a.cond.observe(&err)
	tx, err := a.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("create first admin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM admin_users`).Scan(&n); err != nil {
		return false, fmt.Errorf("create first admin: %w", err)
	}
	if n > 0 {
		return false, nil
	}
	now := nowMS()
	if _, err := tx.ExecContext(ctx,
		`INSERT INTO admin_users (username, password_hash, is_active, is_superuser, created_at, updated_at) VALUES ($1, $2, 1, 1, $3, $3)`,
		u.Username, u.PasswordHash, now); err != nil {
		return false, fmt.Errorf("create first admin: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("create first admin: %w", err)
	}
	return true, nil
}

// Get returns one admin user.
func (a *Admins) Get(ctx context.Context, username string) (_ AdminUser, err error) {
	defer a.cond.observe(&err)
	return a.get(ctx, username)
}

func (a *Admins) get(ctx context.Context, username string) (AdminUser, error) {
	u := AdminUser{Username: username}
	err := a.db.SQL().QueryRowContext(ctx,
		`SELECT password_hash, is_active, is_superuser FROM admin_users WHERE username = $1`, username).
		Scan(&u.PasswordHash, &u.Active, &u.Superuser)
	if errors.Is(err, sql.ErrNoRows) {
		return u, fmt.Errorf("admin user %q: %w", username, ErrNotFound)
	}
	if err != nil {
		return u, fmt.Errorf("read admin user: %w", err)
	}
	return u, nil
}

// List returns the admin users by name.
func (a *Admins) List(ctx context.Context) (_ []AdminUser, err error) {
	defer a.cond.observe(&err)
	rows, err := a.db.SQL().QueryContext(ctx,
		`SELECT username, password_hash, is_active, is_superuser FROM admin_users ORDER BY username`)
	if err != nil {
		return nil, fmt.Errorf("list admin users: %w", err)
	}
	defer rows.Close()
	users := []AdminUser{}
	for rows.Next() {
		var u AdminUser
		if err := rows.Scan(&u.Username, &u.PasswordHash, &u.Active, &u.Superuser); err != nil {
			return nil, fmt.Errorf("list admin users: %w", err)
		}
		users = append(users, u)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list admin users: %w", err)
	}
	return users, nil
}

// Count is the number of admin users.
func (a *Admins) Count(ctx context.Context) (_ int, err error) {
	defer a.cond.observe(&err)
	var n int
	if err := a.db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM admin_users`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count admin users: %w", err)
	}
	return n, nil
}

// Update applies p. A deactivated user or a new password ends the
// user's sessions in the same transaction.
func (a *Admins) Update(ctx context.Context, username string, p AdminPatch) (_ AdminUser, err error) {
	defer a.cond.observe(&err)
	tx, err := a.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return AdminUser{}, fmt.Errorf("update admin user: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE admin_users SET
		is_active = COALESCE($2, is_active), is_superuser = COALESCE($3, is_superuser),
		password_hash = COALESCE($4, password_hash), updated_at = $5 WHERE username = $1`,
		username, p.Active, p.Superuser, p.PasswordHash, nowMS())
	if err != nil {
		return AdminUser{}, fmt.Errorf("update admin user: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return AdminUser{}, fmt.Errorf("admin user %q: %w", username, ErrNotFound)
	}
	if (p.Active != nil && !*p.Active) || p.PasswordHash != nil {
		if _, err := tx.ExecContext(ctx, `DELETE FROM admin_sessions WHERE username = $1`, username); err != nil {
			return AdminUser{}, fmt.Errorf("update admin user: end sessions: %w", err)
		}
	}
	if err := keepsSuperuser(ctx, tx); err != nil {
		return AdminUser{}, err
	}
	if err := tx.Commit(); err != nil {
		return AdminUser{}, fmt.Errorf("update admin user: %w", err)
	}
	return a.get(ctx, username)
}

// Delete removes an admin user and, by cascade, its sessions.
func (a *Admins) Delete(ctx context.Context, username string) (err error) {
	defer a.cond.observe(&err)
	tx, err := a.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete admin user: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `DELETE FROM admin_users WHERE username = $1`, username)
	if err != nil {
		return fmt.Errorf("delete admin user: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("admin user %q: %w", username, ErrNotFound)
	}
	if err := keepsSuperuser(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete admin user: %w", err)
	}
	return nil
}

// ErrLastSuperuser refuses a change that would leave no active superuser,
// which would lock everyone out of user management.
var ErrLastSuperuser = errors.New("no active superuser would be left")

// keepsSuperuser checks, inside the changing transaction (SQLite has one
// writer, so two concurrent changes cannot both pass), that an active
// superuser remains.
func keepsSuperuser(ctx context.Context, tx *sql.Tx) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM admin_users WHERE is_active = 1 AND is_superuser = 1`).Scan(&n); err != nil {
		return fmt.Errorf("count superusers: %w", err)
	}
	if n == 0 {
		return ErrLastSuperuser
	}
	return nil
}

// CreateSession records a session by the hash of its id.
func (a *Admins) CreateSession(ctx context.Context, idHash, username string, expires time.Time) (err error) {
	defer a.cond.observe(&err)
	_, err = a.db.SQL().ExecContext(ctx,
		`INSERT INTO admin_sessions (id_hash, username, created_at, expires_at) VALUES ($1, $2, $3, $4)`,
		idHash, username, nowMS(), expires.UnixMilli())
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	return nil
}

// SessionUser returns the active user of an unexpired session;
// ErrNotFound for an unknown, expired or deactivated one.
func (a *Admins) SessionUser(ctx context.Context, idHash string, now time.Time) (_ AdminUser, err error) {
	defer a.cond.observe(&err)
	var u AdminUser
	err = a.db.SQL().QueryRowContext(ctx, `SELECT u.username, u.password_hash, u.is_active, u.is_superuser
		FROM admin_sessions s JOIN admin_users u ON u.username = s.username
		WHERE s.id_hash = $1 AND s.expires_at > $2 AND u.is_active = 1`, idHash, now.UnixMilli()).
		Scan(&u.Username, &u.PasswordHash, &u.Active, &u.Superuser)
	if errors.Is(err, sql.ErrNoRows) {
		return u, fmt.Errorf("session: %w", ErrNotFound)
	}
	if err != nil {
		return u, fmt.Errorf("read session: %w", err)
	}
	return u, nil
}

// DeleteSession ends a session.
func (a *Admins) DeleteSession(ctx context.Context, idHash string) (err error) {
	defer a.cond.observe(&err)
	if _, err := a.db.SQL().ExecContext(ctx, `DELETE FROM admin_sessions WHERE id_hash = $1`, idHash); err != nil {
		return fmt.Errorf("delete session: %w", err)
	}
	return nil
}

// PurgeSessions deletes expired sessions and returns how many.
func (a *Admins) PurgeSessions(ctx context.Context, now time.Time) (_ int64, err error) {
	defer a.cond.observe(&err)
	res, err := a.db.SQL().ExecContext(ctx, `DELETE FROM admin_sessions WHERE expires_at <= $1`, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("purge sessions: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
