package rollup

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/edgeplat/edgeplat/core/db"
)

// PostgreSQL estimates the recursive series walk at thousands of rows, so
// the statements built on it look expensive enough for JIT compilation,
// which then takes seconds for a statement that runs in milliseconds
// (2.4 s of 2.7 s for a 6-hour rollup chunk of 18,000 readings). The
// rollup statements run with JIT off.

// noJIT turns JIT off for the rest of tx on PostgreSQL.
func noJIT(ctx context.Context, tx *sql.Tx, d db.Dialect) error {
	if d.Engine != db.Postgres {
		return nil
	}
	if _, err := tx.ExecContext(ctx, "SET LOCAL jit = off"); err != nil {
		return fmt.Errorf("turn jit off: %w", err)
	}
	return nil
}

// ReadTx runs f in a read-only transaction on d's read handle, on
// PostgreSQL with JIT off (see above), for reads built on the series walk.
func ReadTx(ctx context.Context, d *db.DB, f func(*sql.Tx) error) error {
	var opts *sql.TxOptions
	if d.Dialect().Engine == db.Postgres {
		// SQLite's read handle is query-only already.
		opts = &sql.TxOptions{ReadOnly: true}
	}
	tx, err := d.ReadSQL().BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := noJIT(ctx, tx, d.Dialect()); err != nil {
		return err
	}
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("end read: %w", err)
	}
	return nil
}
