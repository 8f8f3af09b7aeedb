package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
)

// Errors the handlers turn into statuses.
var (
	ErrNotFound     = errors.New("not found")
	ErrConflict     = errors.New("conflict")
	ErrBootstrapped = errors.New("the installation already has its first admin")
	ErrTokenReuse   = errors.New("refresh token reused after rotation")
	ErrRevoked      = errors.New("revoked")
	ErrLastAdmin    = errors.New("a tenant keeps at least one active admin")
)

// Roles a user can have. Admins manage the users, keys and settings of
// their tenant; members use it.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// User is an account as the API shows it; the password hash never leaves
// the package.
type User struct {
	ID         string    `json:"id"`
	TenantUUID string    `json:"tenantId"`
	Email      string    `json:"email"`
	Username   string    `json:"username,omitempty"`
	Role       string    `json:"role"`
	Active     bool      `json:"active"`
	CreatedAt  time.Time `json:"createdAt"`
	UpdatedAt  time.Time `json:"updatedAt"`

	passwordHash string
}

// Store keeps accounts in the Cloud API's database (PostgreSQL or SQLite).
// Every method that reads or changes a tenant's records takes the tenant
// from the caller's credential and filters on it; a record of another
// tenant is ErrNotFound, never a different answer.
type Store struct {
	db  *db.DB
	now func() time.Time
	// listeners are told of committed changes to an account's rights or
	// sessions (OnChange).
	listeners []func(ctx context.Context, userID string)
}

// NewStore returns a store on d, which must be open by the first call.
func NewStore(d *db.DB) *Store {
	return &Store{db: d, now: func() time.Time { return time.Now().UTC() }}
}

func (s *Store) sql() (*sql.DB, db.Dialect) {
	return s.db.SQL(), s.db.Dialect()
}

// NewUser is what creating an account takes.
type NewUser struct {
	Email    string
	Username string
	Password string
	Role     string

	hash string // set by prepare
}

// prepare checks n and hashes its password.
func (n *NewUser) prepare() error {
	if err := n.normalize(); err != nil {
		return err
	}
	h, err := HashPassword(n.Password)
	if err != nil {
		return err
	}
	n.hash = h
	return nil
}

func (n *NewUser) normalize() error {
	n.Email = strings.ToLower(strings.TrimSpace(n.Email))
	n.Username = strings.ToLower(strings.TrimSpace(n.Username))
	if err := CheckEmail(n.Email); err != nil {
		return err
	}
	if n.Username != "" {
		if err := CheckUsername(n.Username); err != nil {
			return err
		}
	}
	if n.Role == "" {
		n.Role = RoleMember
	}
	if n.Role != RoleAdmin && n.Role != RoleMember {
		return fmt.Errorf("%w: role must be %s or %s, got %q", ErrInvalid, RoleAdmin, RoleMember, n.Role)
	}
	return CheckPassword(n.Password)
}

// execer is what a transaction and a database share.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// createTenant inserts a tenant and returns its UUID.
func (s *Store) createTenant(ctx context.Context, x execer, d db.Dialect, name string) (string, error) {
	id := codec.NewUUID().String()
	if _, err := x.ExecContext(ctx, `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
		id, name, d.TimeArg(s.now())); err != nil {
		return "", fmt.Errorf("create tenant: %w", err)
	}
	return id, nil
}

// insertUser hashes the password and inserts the account.
// insertUser inserts the account n describes; n.hash must be set (by
// prepare), since hashing inside a transaction would hold it for the hash.
func (s *Store) insertUser(ctx context.Context, x execer, d db.Dialect, tenant string, n NewUser) (User, error) {
	if n.hash == "" {
		panic("BUG: accounts.insertUser without a prepared password hash")
	}
	hash := n.hash
	now := s.now()
	u := User{ID: codec.NewUUID().String(), TenantUUID: tenant, Email: n.Email, Username: n.Username, Role: n.Role, Active: true,
		CreatedAt: now.Truncate(time.Microsecond), UpdatedAt: now.Truncate(time.Microsecond)}
	_, err := x.ExecContext(ctx, `INSERT INTO users (id, tenant_uuid, email, username, password_hash, role, active, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		u.ID, tenant, u.Email, nullString(u.Username), hash, u.Role, true, d.TimeArg(now), d.TimeArg(now))
	if db.IsUniqueViolation(err) {
		return User{}, fmt.Errorf("%w: an account with this e-mail or user name exists", ErrConflict)
	}
	if err != nil {
		return User{}, fmt.Errorf("create user: %w", err)
	}
	return u, nil
}

// Bootstrap creates the installation's first tenant and its admin. It
// works once: the installation row it inserts in the same transaction is
// the lock, so concurrent calls and calls after a restart get
// ErrBootstrapped, as does a call once any account exists.
func (s *Store) Bootstrap(ctx context.Context, n NewUser) (User, error) {
	n.Role = RoleAdmin
	if err := n.prepare(); err != nil {
		return User{}, err
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("bootstrap: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `INSERT INTO installation (name, set_at) VALUES ('bootstrap_admin', $1) ON CONFLICT DO NOTHING`,
		d.TimeArg(s.now()))
	if err != nil {
		return User{}, fmt.Errorf("bootstrap: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return User{}, ErrBootstrapped
	}
	var exists int
	switch err := tx.QueryRowContext(ctx, `SELECT 1 FROM users LIMIT 1`).Scan(&exists); {
	case err == nil:
		return User{}, ErrBootstrapped
	case !errors.Is(err, sql.ErrNoRows):
		return User{}, fmt.Errorf("bootstrap: %w", err)
	}
	tenant, err := s.createTenant(ctx, tx, d, "Default")
	if err != nil {
		return User{}, err
	}
	u, err := s.insertUser(ctx, tx, d, tenant, n)
	if err != nil {
		return User{}, err
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("bootstrap: commit: %w", err)
	}
	return u, nil
}

// Register creates a new tenant named tenantName whose first account, n,
// is its admin.
func (s *Store) Register(ctx context.Context, tenantName string, n NewUser) (User, error) {
	n.Role = RoleAdmin
	if err := n.prepare(); err != nil {
		return User{}, err
	}
	tenantName = strings.TrimSpace(tenantName)
	if tenantName == "" {
		tenantName = n.Email
	}
	if len(tenantName) > 200 {
		return User{}, fmt.Errorf("%w: tenantName is longer than 200 bytes", ErrInvalid)
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("register: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	tenant, err := s.createTenant(ctx, tx, d, tenantName)
	if err != nil {
		return User{}, err
	}
	u, err := s.insertUser(ctx, tx, d, tenant, n)
	if err != nil {
		return User{}, err
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("register: commit: %w", err)
	}
	return u, nil
}

// CreateUser adds an account to tenant.
func (s *Store) CreateUser(ctx context.Context, tenant string, n NewUser) (User, error) {
	if err := n.prepare(); err != nil {
		return User{}, err
	}
	conn, d := s.sql()
	return s.insertUser(ctx, conn, d, tenant, n)
}

const userColumns = `id, tenant_uuid, email, username, password_hash, role, active, created_at, updated_at`

func scanUser(row interface{ Scan(...any) error }) (User, error) {
	var u User
	var username sql.NullString
	var created, updated db.Timestamp
	if err := row.Scan(&u.ID, &u.TenantUUID, &u.Email, &username, &u.passwordHash, &u.Role, &u.Active, &created, &updated); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return User{}, ErrNotFound
		}
		return User{}, err
	}
	u.Username, u.CreatedAt, u.UpdatedAt = username.String, created.Time, updated.Time
	return u, nil
}

// Authenticate checks a login (an e-mail or a user name) and password. An
// unknown login, an inactive account and a wrong password are all
// ErrBadCredentials, and take the same time; for an existing account the
// returned User carries its tenant only, so the failure can be audited
// where the tenant's admins see it.
func (s *Store) Authenticate(ctx context.Context, login, password string) (User, error) {
	login = strings.ToLower(strings.TrimSpace(login))
	conn, _ := s.sql()
	u, err := scanUser(conn.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1 OR username = $1`, login))
	switch {
	case errors.Is(err, ErrNotFound):
		VerifyPassword(dummyHash(), password)
		return User{}, ErrBadCredentials
	case err != nil:
		return User{}, fmt.Errorf("find account: %w", err)
	}
	if !VerifyPassword(u.passwordHash, password) || !u.Active {
		// Only the tenant comes back, for the audit record of the failure;
		// the caller answers as for an unknown account.
		return User{TenantUUID: u.TenantUUID}, ErrBadCredentials
	}
	return u, nil
}

// UserByEmail returns the active account with e-mail email, for a
// sign-in an identity provider vouched for; ErrNotFound otherwise.
func (s *Store) UserByEmail(ctx context.Context, email string) (User, error) {
	conn, _ := s.sql()
	u, err := scanUser(conn.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE email = $1`, strings.ToLower(strings.TrimSpace(email))))
	if err == nil && !u.Active {
		return User{}, ErrNotFound
	}
	if err != nil && !errors.Is(err, ErrNotFound) {
		return User{}, fmt.Errorf("find account: %w", err)
	}
	return u, err
}

// ErrBadCredentials is the one answer to every failed login.
var ErrBadCredentials = errors.New("invalid login or password")

// User returns an account of tenant.
func (s *Store) User(ctx context.Context, tenant, id string) (User, error) {
	if _, err := codec.ParseUUID(id); err != nil {
		return User{}, ErrNotFound
	}
	conn, _ := s.sql()
	u, err := scanUser(conn.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 AND tenant_uuid = $2`, id, tenant))
	if err != nil && !errors.Is(err, ErrNotFound) {
		return User{}, fmt.Errorf("get user: %w", err)
	}
	return u, err
}

// Users lists the accounts of tenant, oldest first.
func (s *Store) Users(ctx context.Context, tenant string) ([]User, error) {
	conn, _ := s.sql()
	rows, err := conn.QueryContext(ctx, `SELECT `+userColumns+` FROM users WHERE tenant_uuid = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list users: %w", err)
	}
	defer rows.Close()
	users := []User{}
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, fmt.Errorf("list users: %w", err)
		}
		users = append(users, u)
	}
	return users, rows.Err()
}

// UserUpdate is a partial update; nil fields are left alone.
type UserUpdate struct {
	Email    *string `json:"email"`
	Username *string `json:"username"`
	Role     *string `json:"role"`
	Active   *bool   `json:"active"`
}

// UpdateUser applies up to an account of tenant. Demoting or deactivating
// the tenant's last active admin is ErrLastAdmin: nobody could undo it.
func (s *Store) UpdateUser(ctx context.Context, tenant, id string, up UserUpdate) (User, error) {
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("update user: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := codec.ParseUUID(id); err != nil {
		return User{}, ErrNotFound
	}
	if err := lockTenant(ctx, tx, d, tenant); err != nil {
		return User{}, err
	}
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 AND tenant_uuid = $2`, id, tenant))
	if err != nil {
		return User{}, err
	}
	if up.Email != nil {
		e := strings.ToLower(strings.TrimSpace(*up.Email))
		if err := CheckEmail(e); err != nil {
			return User{}, err
		}
		u.Email = e
	}
	if up.Username != nil {
		n := strings.ToLower(strings.TrimSpace(*up.Username))
		if n != "" {
			if err := CheckUsername(n); err != nil {
				return User{}, err
			}
		}
		u.Username = n
	}
	wasAdmin := u.Role == RoleAdmin && u.Active
	if up.Role != nil {
		if *up.Role != RoleAdmin && *up.Role != RoleMember {
			return User{}, fmt.Errorf("%w: role must be %s or %s, got %q", ErrInvalid, RoleAdmin, RoleMember, *up.Role)
		}
		u.Role = *up.Role
	}
	if up.Active != nil {
		u.Active = *up.Active
	}
	if wasAdmin && (u.Role != RoleAdmin || !u.Active) {
		if err := lastAdminGuard(ctx, tx, tenant, id); err != nil {
			return User{}, err
		}
	}
	now := s.now()
	_, err = tx.ExecContext(ctx, `UPDATE users SET email = $1, username = $2, role = $3, active = $4, updated_at = $5
		WHERE id = $6 AND tenant_uuid = $7`, u.Email, nullString(u.Username), u.Role, u.Active, d.TimeArg(now), id, tenant)
	if db.IsUniqueViolation(err) {
		return User{}, fmt.Errorf("%w: an account with this e-mail or user name exists", ErrConflict)
	}
	if err != nil {
		return User{}, fmt.Errorf("update user: %w", err)
	}
	if !u.Active {
		if err := revokeUserFamilies(ctx, tx, d, id, now, "deactivated"); err != nil {
			return User{}, err
		}
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("update user: commit: %w", err)
	}
	s.changed(ctx, id)
	u.UpdatedAt = now.Truncate(time.Microsecond)
	return u, nil
}

// lockTenant serializes the changes to one tenant's admins. On PostgreSQL
// two transactions demoting the last two admins each would both count one
// other admin under read committed; the tenant row lock makes the second
// wait and count again. SQLite serializes writers anyway.
func lockTenant(ctx context.Context, tx *sql.Tx, d db.Dialect, tenant string) error {
	if d.Engine != db.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `SELECT 1 FROM tenants WHERE uuid = $1 FOR UPDATE`, tenant); err != nil {
		return fmt.Errorf("lock tenant: %w", err)
	}
	return nil
}

// lastAdminGuard refuses to take away the last other active admin of
// tenant; callers hold lockTenant.
func lastAdminGuard(ctx context.Context, tx *sql.Tx, tenant, except string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE tenant_uuid = $1 AND role = 'admin' AND active AND id <> $2`,
		tenant, except).Scan(&n); err != nil {
		return fmt.Errorf("count admins: %w", err)
	}
	if n == 0 {
		return ErrLastAdmin
	}
	return nil
}

// DeleteUser removes an account of tenant with its sessions and keys.
func (s *Store) DeleteUser(ctx context.Context, tenant, id string) error {
	if _, err := codec.ParseUUID(id); err != nil {
		return ErrNotFound
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("delete user: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := lockTenant(ctx, tx, d, tenant); err != nil {
		return err
	}
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1 AND tenant_uuid = $2`, id, tenant))
	if err != nil {
		return err
	}
	if u.Role == RoleAdmin && u.Active {
		if err := lastAdminGuard(ctx, tx, tenant, id); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM users WHERE id = $1 AND tenant_uuid = $2`, id, tenant); err != nil {
		return fmt.Errorf("delete user: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("delete user: commit: %w", err)
	}
	s.changed(ctx, id)
	return nil
}

// ChangePassword sets a new password after checking the current one, and
// ends every session of the account: whoever knew the old password may
// hold a refresh token.
func (s *Store) ChangePassword(ctx context.Context, tenant, userID, current, next string) error {
	u, err := s.User(ctx, tenant, userID)
	if errors.Is(err, ErrNotFound) {
		return ErrBadCredentials
	}
	if err != nil {
		return err
	}
	if !VerifyPassword(u.passwordHash, current) {
		return ErrBadCredentials
	}
	return s.setPassword(ctx, userID, next, "password changed")
}

func (s *Store) setPassword(ctx context.Context, userID, next, reason string) error {
	if err := CheckPassword(next); err != nil {
		return err
	}
	// Hashed before the transaction: on SQLite a transaction holds the one
	// writer, which must not wait for a password hash.
	hash, err := HashPassword(next)
	if err != nil {
		return err
	}
	conn, d := s.sql()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set password: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := s.writePassword(ctx, tx, d, userID, hash, reason); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set password: commit: %w", err)
	}
	s.changed(ctx, userID)
	return nil
}

// writePassword stores a password hash and ends the account's sessions.
func (s *Store) writePassword(ctx context.Context, tx *sql.Tx, d db.Dialect, userID, hash, reason string) error {
	now := s.now()
	res, err := tx.ExecContext(ctx, `UPDATE users SET password_hash = $1, updated_at = $2 WHERE id = $3`, hash, d.TimeArg(now), userID)
	if err != nil {
		return fmt.Errorf("set password: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return revokeUserFamilies(ctx, tx, d, userID, now, reason)
}

func nullString(s string) sql.NullString { return sql.NullString{String: s, Valid: s != ""} }
