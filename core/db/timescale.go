package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Readings storage modes, as MigrateResult.Storage reports them.
const (
	StorageHypertable = "hypertable" // PostgreSQL with TimescaleDB
	StoragePlain      = "plain"      // PostgreSQL without it, one table
	// StoragePartitioned is PostgreSQL without TimescaleDB and readings
	// split into daily partitions (migration 0021; docs/database.md).
	StoragePartitioned = "partitioned"
	StorageSQLite      = "sqlite"
)

// createHypertable keeps the pre-2.13 argument form, which every
// TimescaleDB 2.x accepts. migrate_data converts a plain readings table
// that already holds rows (TimescaleDB installed after edgeplat ran for a
// while); if_not_exists makes it a no-op on every later start.
const createHypertable = `SELECT create_hypertable('readings', 'time',
	chunk_time_interval => interval '1 day',
	if_not_exists => true,
	migrate_data => true)`

// timescaleStatus is what the server says about the extension.
type timescaleStatus struct {
	Available bool   // the server has the extension's files
	Installed string // version installed in this database, "" if none
	Default   string // version CREATE EXTENSION would install
}

type queryRower interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

func detectTimescale(ctx context.Context, q queryRower) (timescaleStatus, error) {
	var st timescaleStatus
	err := q.QueryRowContext(ctx, `SELECT default_version, coalesce(installed_version, '')
		FROM pg_available_extensions WHERE name = 'timescaledb'`).Scan(&st.Default, &st.Installed)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return st, nil
	case err != nil:
		return st, fmt.Errorf("detect timescaledb: %w", err)
	}
	st.Available = true
	return st, nil
}

// setupReadingsStorage makes readings a hypertable when TimescaleDB can be
// had, and otherwise leaves the plain table (same key), logging which. It
// runs after the migrations, under the migration lock, because it depends
// on the server rather than on the schema version.
//
// An extension that is available but cannot be created (not in
// shared_preload_libraries, or the role may not create it) is a warning,
// not a failure: the plain table works, and migrate_data converts it once
// the operator fixes the server.
//
// A readings table migration 0021 partitioned (TimescaleDB was not
// available then) stays partitioned: create_hypertable refuses a
// partitioned table, and converting it is the operator's choice, not
// something to do at start-up.
func (d *DB) setupReadingsStorage(ctx context.Context, conn *sql.Conn) (string, error) {
	var partitioned bool
	if err := conn.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_partitioned_table
		WHERE partrelid = 'readings'::regclass)`).Scan(&partitioned); err != nil {
		return "", fmt.Errorf("detect readings partitions: %w", err)
	}
	st, err := detectTimescale(ctx, conn)
	if err != nil {
		return "", err
	}
	if partitioned {
		reason := "timescaledb extension not available"
		if st.Available {
			reason = "readings was partitioned before timescaledb was available"
		}
		d.log.Info("readings storage", "mode", StoragePartitioned, "reason", reason)
		return StoragePartitioned, nil
	}
	if !st.Available {
		d.log.Info("readings storage", "mode", StoragePlain, "reason", "timescaledb extension not available")
		return StoragePlain, nil
	}
	if st.Installed == "" {
		if _, err := conn.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS timescaledb"); err != nil {
			d.log.Warn("readings storage", "mode", StoragePlain, "reason", "cannot create timescaledb extension",
				"timescaledb_version", st.Default, "err", err)
			return StoragePlain, nil
		}
		st.Installed = st.Default
	}
	d.setTimescale(true)
	if _, err := conn.ExecContext(ctx, createHypertable); err != nil {
		return "", fmt.Errorf("create readings hypertable: %w", err)
	}
	d.log.Info("readings storage", "mode", StorageHypertable, "timescaledb_version", st.Installed,
		"chunk_time_interval", "1 day")
	return StorageHypertable, nil
}
