package store

import (
	"context"
	"errors"
	"fmt"
)

// FactoryReset deletes everything the agent stored but its UUID and its
// message sequences, in one transaction: endpoints, settings, admin users
// and sessions, cloud credentials and target state, publishing
// configuration, offline queues and dead letters. The UUID stays so the
// cloud can re-provision the same agent; the sequences stay so a message
// id is never handed out twice.
func (s *Store) FactoryReset(ctx context.Context) (err error) {
	defer s.cond.observe(&err)
	tx, err := s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("factory reset: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table'
		AND name NOT LIKE 'sqlite_%' AND name NOT IN ('schema_migrations', 'agent_meta') ORDER BY name`)
	if err != nil {
		return fmt.Errorf("factory reset: list tables: %w", err)
	}
	var tables []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			_ = rows.Close()
			return fmt.Errorf("factory reset: list tables: %w", err)
		}
		tables = append(tables, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return fmt.Errorf("factory reset: list tables: %w", err)
	}
	for _, t := range tables {
		// Names come from sqlite_master, not from a request.
		if _, err := tx.ExecContext(ctx, `DELETE FROM "`+t+`"`); err != nil {
			return fmt.Errorf("factory reset: empty %s: %w", t, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM agent_meta WHERE key <> 'uuid' AND key NOT LIKE 'sequence.%'`); err != nil {
		return fmt.Errorf("factory reset: agent_meta: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("factory reset: %w", err)
	}
	return nil
}
