package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Settings returns the stored settings document, nil when none was saved.
func (s *Store) Settings(ctx context.Context) (_ []byte, err error) {
	defer s.cond.observe(&err)
	var body string
	err = s.db.SQL().QueryRowContext(ctx, `SELECT body FROM settings WHERE id = 1`).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read settings: %w", err)
	}
	return []byte(body), nil
}

// SaveSettings replaces the settings document.
func (s *Store) SaveSettings(ctx context.Context, body []byte) (err error) {
	defer s.cond.observe(&err)
	_, err = s.db.SQL().ExecContext(ctx,
		`INSERT INTO settings (id, body, updated_at) VALUES (1, $1, $2)
		 ON CONFLICT (id) DO UPDATE SET body = excluded.body, updated_at = excluded.updated_at`, string(body), nowMS())
	if err != nil {
		return fmt.Errorf("save settings: %w", err)
	}
	return nil
}
