package admin

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// row is one stored override.
type row struct {
	Key       string
	Value     json.RawMessage
	UpdatedAt time.Time
	UpdatedBy string
}

// store reads and writes table system_config.
type store struct {
	db *db.DB
}

// all returns every stored override by key.
func (s *store) all(ctx context.Context) (map[string]row, error) {
	rows, err := s.db.ReadSQL().QueryContext(ctx, `SELECT key, value, updated_at, updated_by FROM system_config`)
	if err != nil {
		return nil, fmt.Errorf("read system config: %w", err)
	}
	defer rows.Close()
	out := map[string]row{}
	for rows.Next() {
		var r row
		var v string
		var at db.Timestamp
		if err := rows.Scan(&r.Key, &v, &at, &r.UpdatedBy); err != nil {
			return nil, fmt.Errorf("read system config: %w", err)
		}
		r.Value, r.UpdatedAt = json.RawMessage(v), at.Time
		out[r.Key] = r
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read system config: %w", err)
	}
	return out, nil
}

// change is one key of a PUT: set to Value, or reset (back to the
// configured value) when Value is nil.
type change struct {
	Key   string
	Value json.RawMessage
}

// write stores changes in one transaction, so a PUT is applied whole or
// not at all.
func (s *store) write(ctx context.Context, changes []change, by string, at time.Time) error {
	tx, err := s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("write system config: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	d := s.db.Dialect()
	for _, c := range changes {
		var err error
		if c.Value == nil {
			_, err = tx.ExecContext(ctx, `DELETE FROM system_config WHERE key = $1`, c.Key)
		} else {
			err = upsert(ctx, tx, c.Key, string(c.Value), d.TimeArg(at), by)
		}
		if err != nil {
			return fmt.Errorf("write system config %s: %w", c.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("write system config: commit: %w", err)
	}
	return nil
}

func upsert(ctx context.Context, tx *sql.Tx, key, value string, at any, by string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO system_config (key, value, updated_at, updated_by) VALUES ($1, $2, $3, $4)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at, updated_by = excluded.updated_by`,
		key, value, at, by)
	return err
}
