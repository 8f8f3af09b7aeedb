package db

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The runner is our own rather than pressly/goose or golang-migrate: neither
// stores or verifies a checksum of applied files, which is the check that
// catches an edited migration, and what remains (ordering, a lock, one
// transaction each) is short.

//go:embed migrations
var embeddedMigrations embed.FS

// migrationLockKey is the pg_advisory_lock key every replica takes around
// migrations ("edgeplat" in ASCII). Advisory locks are scoped to one
// database, so databases sharing a server do not wait for each other.
const migrationLockKey int64 = 0x65646765706c6174

// Errors Migrate returns (wrapped) when it refuses to start.
var (
	// ErrMigrationChanged: an applied migration's file differs from what
	// was applied. Applied migrations are history; change the schema with a
	// new one.
	ErrMigrationChanged = errors.New("applied migration was changed")
	// ErrSchemaNewer: the database was migrated by a newer binary.
	// Downgrades are not supported.
	ErrSchemaNewer = errors.New("database schema is newer than this binary")
)

var migrationFileRE = regexp.MustCompile(`^([0-9]{4,})_([a-z0-9_]+)\.sql$`)

var schemaMigrationsDDL = map[Engine]string{
	Postgres: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    bigint      PRIMARY KEY,
		name       text        NOT NULL,
		checksum   text        NOT NULL,
		applied_at timestamptz NOT NULL)`,
	SQLite: `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		checksum   TEXT    NOT NULL,
		applied_at INTEGER NOT NULL) STRICT`,
}

type migration struct {
	version  int64
	name     string // file name without .sql: 0001_readings
	checksum string // hex SHA-256 of the file
	sql      string
}

type appliedMigration struct {
	version        int64
	name, checksum string
}

// MigrateResult reports what Migrate did.
type MigrateResult struct {
	// From and To are the schema versions before and after; 0 is empty.
	From, To int64
	// Applied names the migrations this call applied. It is empty when the
	// schema was current, including when another replica applied them
	// while this one waited for the lock.
	Applied []string
	// Storage is how readings is kept: StorageHypertable,
	// StoragePartitioned or StoragePlain on PostgreSQL, StorageSQLite on
	// SQLite.
	Storage string
}

// Migrate brings the schema up to the binary's latest migration, then sets
// up readings storage (a TimescaleDB hypertable when available). It is safe
// to call from several processes at once: each migration is applied once.
func (d *DB) Migrate(ctx context.Context) (MigrateResult, error) {
	return d.migrate(ctx, embeddedMigrations, path.Join("migrations", string(d.engine)), true)
}

// MigrateFS applies another schema's migrations, the files dir/NNNN_name.sql
// of fsys, with the same locking, checksums and bookkeeping as Migrate. The
// agent keeps its own database this way. It does not set up readings
// storage.
func (d *DB) MigrateFS(ctx context.Context, fsys fs.FS, dir string) (MigrateResult, error) {
	return d.migrate(ctx, fsys, dir, false)
}

func (d *DB) migrate(ctx context.Context, fsys fs.FS, dir string, readings bool) (MigrateResult, error) {
	start := time.Now()
	var res MigrateResult
	ms, err := loadMigrations(fsys, dir)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	conn, release, err := d.lockMigrations(ctx)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	defer release()

	if _, err := conn.ExecContext(ctx, schemaMigrationsDDL[d.engine]); err != nil {
		return res, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	applied, err := loadApplied(ctx, conn)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	from, pending, err := plan(ms, applied)
	if err != nil {
		return res, fmt.Errorf("migrate: %w", err)
	}
	res.From, res.To = from, from
	if len(pending) > 0 {
		d.log.Info("applying migrations", "from", from, "to", ms[len(ms)-1].version, "pending", len(pending))
	}
	dialect := d.Dialect()
	for _, m := range pending {
		t := time.Now()
		did, err := applyMigration(ctx, conn, dialect, m)
		if err != nil {
			return res, fmt.Errorf("apply migration %s: %w", m.name, err)
		}
		res.To = m.version
		if did {
			res.Applied = append(res.Applied, m.name)
			d.log.Info("applied migration", "version", m.version, "name", m.name,
				"duration", time.Since(t).Round(time.Microsecond))
		}
	}

	res.Storage = StorageSQLite
	if d.engine == Postgres && readings {
		if res.Storage, err = d.setupReadingsStorage(ctx, conn); err != nil {
			return res, fmt.Errorf("migrate: %w", err)
		}
	}
	d.log.Info("schema ready", "version", res.To, "applied", len(res.Applied), "storage", res.Storage,
		"duration", time.Since(start).Round(time.Millisecond))
	return res, nil
}

// lockMigrations returns the connection the run uses, holding the
// migration lock on PostgreSQL, and a function releasing both.
//
// On SQLite the connection is the process's only writer, which keeps this
// process's writers out during the run; other processes are kept out per
// migration by BEGIN IMMEDIATE (see applyMigration), since SQLite has no
// lock that outlives a transaction.
func (d *DB) lockMigrations(ctx context.Context) (*sql.Conn, func(), error) {
	switch d.engine {
	case Postgres:
		if d.Pool() == nil {
			return nil, nil, errors.New("db not open")
		}
		conn, closeConn, err := d.migrationConn(ctx)
		if err != nil {
			return nil, nil, err
		}
		var got bool
		if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", migrationLockKey).Scan(&got); err != nil {
			closeConn()
			return nil, nil, fmt.Errorf("take migration lock: %w", err)
		}
		if !got {
			d.log.Info("waiting for migration lock held by another process")
			t := time.Now()
			if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLockKey); err != nil {
				closeConn()
				return nil, nil, fmt.Errorf("wait for migration lock: %w", err)
			}
			d.log.Info("took migration lock", "waited", time.Since(t).Round(time.Millisecond))
		}
		return conn, func() {
			// Closing the session releases the lock anyway; unlocking first
			// just hands it over without waiting for the close to land.
			uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", migrationLockKey)
			cancel()
			closeConn()
		}, nil
	case SQLite:
		w := d.SQL()
		if w == nil {
			return nil, nil, errors.New("db not open")
		}
		conn, err := w.Conn(ctx)
		if err != nil {
			return nil, nil, fmt.Errorf("take sqlite writer: %w", err)
		}
		return conn, func() { _ = conn.Close() }, nil
	}
	panic("BUG: migrate on a DB not made by New")
}

// loadMigrations reads dir's NNNN_name.sql files in version order.
func loadMigrations(fsys fs.FS, dir string) ([]migration, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var ms []migration
	seen := map[int64]string{}
	for _, e := range entries {
		match := migrationFileRE.FindStringSubmatch(e.Name())
		if e.IsDir() || match == nil {
			return nil, fmt.Errorf("migration file %s: name must be NNNN_name.sql", e.Name())
		}
		v, err := strconv.ParseInt(match[1], 10, 64)
		if err != nil || v == 0 {
			return nil, fmt.Errorf("migration file %s: version must be a positive number", e.Name())
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migration files %s and %s share version %d", other, e.Name(), v)
		}
		seen[v] = e.Name()
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		if strings.TrimSpace(string(b)) == "" {
			return nil, fmt.Errorf("migration file %s is empty", e.Name())
		}
		sum := sha256.Sum256(b)
		ms = append(ms, migration{
			version:  v,
			name:     strings.TrimSuffix(e.Name(), ".sql"),
			checksum: hex.EncodeToString(sum[:]),
			sql:      string(b),
		})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

func loadApplied(ctx context.Context, conn *sql.Conn) ([]appliedMigration, error) {
	rows, err := conn.QueryContext(ctx, "SELECT version, name, checksum FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []appliedMigration
	for rows.Next() {
		var a appliedMigration
		if err := rows.Scan(&a.version, &a.name, &a.checksum); err != nil {
			return nil, fmt.Errorf("read schema_migrations: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read schema_migrations: %w", err)
	}
	return out, nil
}

// plan checks the applied history against the binary's migrations and
// returns the current version and what is left to apply.
func plan(ms []migration, applied []appliedMigration) (int64, []migration, error) {
	latest := ms[len(ms)-1]
	if n := len(applied); n > 0 && applied[n-1].version > latest.version {
		a := applied[n-1]
		return 0, nil, fmt.Errorf("%w: database is at version %d (%s), this binary knows up to %d (%s); run a newer edgeplat",
			ErrSchemaNewer, a.version, a.name, latest.version, latest.name)
	}
	known := make(map[int64]migration, len(ms))
	for _, m := range ms {
		known[m.version] = m
	}
	var from int64
	done := map[int64]bool{}
	for _, a := range applied {
		m, ok := known[a.version]
		if !ok {
			return 0, nil, fmt.Errorf("applied migration %d (%s) is not in this binary", a.version, a.name)
		}
		if err := sameChecksum(m, a.checksum); err != nil {
			return 0, nil, err
		}
		done[a.version] = true
		from = max(from, a.version)
	}
	var pending []migration
	for _, m := range ms {
		if done[m.version] {
			continue
		}
		if m.version < from {
			// Applying it now would run it after migrations written
			// later, an order no one tested.
			return 0, nil, fmt.Errorf("migration %s was never applied but the database is already at version %d: renumber it above %d",
				m.name, from, from)
		}
		pending = append(pending, m)
	}
	return from, pending, nil
}

func sameChecksum(m migration, applied string) error {
	if m.checksum == applied {
		return nil
	}
	return fmt.Errorf("%w: %s.sql (file sha256 %.12s, applied %.12s); restore the file and put the change in a new migration",
		ErrMigrationChanged, m.name, m.checksum, applied)
}

// applyMigration runs m and records it in one transaction. It re-checks
// schema_migrations inside the transaction because on SQLite another
// process may have applied m since the plan was read; BEGIN IMMEDIATE (the
// writer's _txlock) makes that check and the apply atomic. It reports
// whether it applied m.
func applyMigration(ctx context.Context, conn *sql.Conn, dialect Dialect, m migration) (bool, error) {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	var sum string
	err = tx.QueryRowContext(ctx, "SELECT checksum FROM schema_migrations WHERE version = $1", m.version).Scan(&sum)
	switch {
	case err == nil:
		return false, sameChecksum(m, sum)
	case !errors.Is(err, sql.ErrNoRows):
		return false, fmt.Errorf("check schema_migrations: %w", err)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return false, err
	}
	if _, err := tx.ExecContext(ctx,
		"INSERT INTO schema_migrations (version, name, checksum, applied_at) VALUES ($1, $2, $3, $4)",
		m.version, m.name, m.checksum, dialect.TimeArg(time.Now().UTC())); err != nil {
		return false, fmt.Errorf("record: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}
