package accounts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// A login starts a session: a family of refresh tokens of which only the
// newest (current_jti) is valid. Refreshing swaps it for a new one in one
// conditional UPDATE, so two concurrent refreshes with the same token cannot
// both win; presenting a token that was already rotated away means it was
// copied, and the whole family is revoked (RFC 9700 section 4.14.2).

// StartSession records a new family for userID whose first token is jti.
func (s *Store) StartSession(ctx context.Context, userID, family, jti string, expires time.Time) error {
	conn, d := s.sql()
	now := s.now()
	_, err := conn.ExecContext(ctx, `INSERT INTO refresh_families (id, user_id, current_jti, created_at, rotated_at, expires_at)
		VALUES ($1, $2, $3, $4, $4, $5)`, family, userID, jti, d.TimeArg(now), d.TimeArg(expires))
	if err != nil {
		return fmt.Errorf("start session: %w", err)
	}
	return nil
}

// Rotate replaces the family's current token jti by next. A jti that is
// not the current one revokes the family and returns ErrTokenReuse; a
// revoked, expired or unknown family is ErrRevoked. The account must still
// be active; its current role is returned with it.
func (s *Store) Rotate(ctx context.Context, userID, family, jti, next string, expires time.Time) (User, error) {
	conn, d := s.sql()
	now := s.now()
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return User{}, fmt.Errorf("rotate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `UPDATE refresh_families SET current_jti = $1, rotated_at = $2, expires_at = $3
		WHERE id = $4 AND user_id = $5 AND current_jti = $6 AND revoked_at IS NULL AND expires_at > $2`,
		next, d.TimeArg(now), d.TimeArg(expires), family, userID, jti)
	if err != nil {
		return User{}, fmt.Errorf("rotate: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var revoked db.Timestamp
		err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM refresh_families WHERE id = $1 AND user_id = $2`, family, userID).Scan(&revoked)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return User{}, ErrRevoked
		case err != nil:
			return User{}, fmt.Errorf("rotate: %w", err)
		case !revoked.IsZero():
			return User{}, ErrRevoked
		}
		// Live family, stale token: a replay. Revoke and commit that even
		// though the request fails.
		if _, err := tx.ExecContext(ctx, `UPDATE refresh_families SET revoked_at = $1, revoke_reason = 'reuse' WHERE id = $2`,
			d.TimeArg(now), family); err != nil {
			return User{}, fmt.Errorf("revoke family: %w", err)
		}
		if err := tx.Commit(); err != nil {
			return User{}, fmt.Errorf("revoke family: %w", err)
		}
		s.changed(ctx, userID)
		return User{}, ErrTokenReuse
	}
	u, err := scanUser(tx.QueryRowContext(ctx, `SELECT `+userColumns+` FROM users WHERE id = $1`, userID))
	if errors.Is(err, ErrNotFound) || (err == nil && !u.Active) {
		return User{}, ErrRevoked
	}
	if err != nil {
		return User{}, fmt.Errorf("rotate: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return User{}, fmt.Errorf("rotate: commit: %w", err)
	}
	return u, nil
}

// EndSession revokes a family (logout). Ending an ended or unknown
// session is not an error: logout is idempotent.
func (s *Store) EndSession(ctx context.Context, userID, family string) error {
	conn, d := s.sql()
	_, err := conn.ExecContext(ctx, `UPDATE refresh_families SET revoked_at = $1, revoke_reason = 'logout'
		WHERE id = $2 AND user_id = $3 AND revoked_at IS NULL`, d.TimeArg(s.now()), family, userID)
	if err != nil {
		return fmt.Errorf("end session: %w", err)
	}
	s.changed(ctx, userID)
	return nil
}

func revokeUserFamilies(ctx context.Context, x execer, d db.Dialect, userID string, now time.Time, reason string) error {
	_, err := x.ExecContext(ctx, `UPDATE refresh_families SET revoked_at = $1, revoke_reason = $2 WHERE user_id = $3 AND revoked_at IS NULL`,
		d.TimeArg(now), reason, userID)
	if err != nil {
		return fmt.Errorf("revoke sessions: %w", err)
	}
	return nil
}
