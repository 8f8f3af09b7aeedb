package accounts

import (
	"context"
	"fmt"
)

// HasAdmin reports whether any tenant of the installation has an admin,
// active or not: all-in-one's first-admin credentials apply only before
// one exists.
func (s *Store) HasAdmin(ctx context.Context) (bool, error) {
	conn, _ := s.sql()
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE role = 'admin'`).Scan(&n); err != nil {
		return false, fmt.Errorf("count admins: %w", err)
	}
	return n > 0, nil
}

// PasswordMatches reports whether password is the account's, checked the
// way a login checks it; false for a User the store did not read, which
// carries no hash.
func (u User) PasswordMatches(password string) bool { return VerifyPassword(u.passwordHash, password) }
