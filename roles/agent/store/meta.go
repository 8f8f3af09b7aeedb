package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Meta returns a value of the agent's key/value metadata (its UUID, its
// message sequence), ErrNotFound when unset.
func (s *Store) Meta(ctx context.Context, key string) (_ string, err error) {
	defer s.cond.observe(&err)
	return s.meta(ctx, key)
}

func (s *Store) meta(ctx context.Context, key string) (string, error) {
	var v string
	err := s.db.SQL().QueryRowContext(ctx, `SELECT value FROM agent_meta WHERE key = $1`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	if err != nil {
		return "", fmt.Errorf("read meta %s: %w", key, err)
	}
	return v, nil
}

// SetMeta writes a metadata value.
func (s *Store) SetMeta(ctx context.Context, key, value string) (err error) {
	defer s.cond.observe(&err)
	_, err = s.db.SQL().ExecContext(ctx,
		`INSERT INTO agent_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = excluded.value`, key, value)
	if err != nil {
		return fmt.Errorf("write meta %s: %w", key, err)
	}
	return nil
}

// MetaOrCreate returns the value of key, first storing make()'s result when
// it is unset. The agent's UUID is made once this way and kept for life.
func (s *Store) MetaOrCreate(ctx context.Context, key string, make func() string) (_ string, err error) {
	defer s.cond.observe(&err)
	if _, err := s.db.SQL().ExecContext(ctx,
		`INSERT INTO agent_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING`, key, make()); err != nil {
		return "", fmt.Errorf("create meta %s: %w", key, err)
	}
	return s.meta(ctx, key)
}
