package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/edgeplat/edgeplat/config"
)

// closeCheckpointTimeout bounds the WAL checkpoint Close runs, so a stuck
// reader cannot hold shutdown past the lifecycle grace period.
const closeCheckpointTimeout = 5 * time.Second

// DB is an open cloud database. Its methods are safe for concurrent use.
type DB struct {
	cfg    config.DB
	log    *slog.Logger
	engine Engine

	pg *pgxpool.Config // postgres: built by New, used by Open
	// sqlite: file path and the DSNs of the writer and the readers.
	path, writeDSN, readDSN string

	mu        sync.RWMutex
	timescale bool
	pool      *pgxpool.Pool
	write     *sql.DB // sqlite writer; on postgres the stdlib view of pool
	read      *sql.DB // sqlite readers; on postgres the same as write
	closed    bool
}

// PoolStats is a snapshot of connection use, for the autoscaler's
// pool-saturation signal.
//
// On PostgreSQL it describes the pgx pool (which the database/sql view
// shares). On SQLite it describes the single writer connection, Max 1: that
// connection is what ingest workers queue for, so more workers cannot help
// once it is busy, which is exactly what a saturation signal should say.
// ReadSQL().Stats() has the readers' numbers.
type PoolStats struct {
	InUse int
	Idle  int
	Max   int
	// WaitCount and WaitDuration are cumulative: acquisitions that had to
	// wait for a connection, and the total time they waited.
	WaitCount    int64
	WaitDuration time.Duration
}

// Saturation is InUse/Max, 0 when Max is 0.
func (s PoolStats) Saturation() float64 {
	if s.Max == 0 {
		return 0
	}
	return float64(s.InUse) / float64(s.Max)
}

// New validates cfg and prepares the driver configuration without any I/O.
// log may be nil.
func New(cfg config.DB, log *slog.Logger) (*DB, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &DB{cfg: cfg, log: log.With("component", "db")}
	if cfg.PoolSize < 1 {
		return nil, fmt.Errorf("new db: pool size must be at least 1, got %d", cfg.PoolSize)
	}
	if cfg.StatementTimeoutMS < 0 {
		return nil, fmt.Errorf("new db: statement timeout must not be negative, got %d ms", cfg.StatementTimeoutMS)
	}
	switch cfg.Driver {
	case "postgres":
		pc, err := postgresConfig(cfg)
		if err != nil {
			return nil, fmt.Errorf("new db: %w", err)
		}
		d.engine, d.pg = Postgres, pc
	case "sqlite":
		if err := d.prepareSQLite(cfg); err != nil {
			return nil, fmt.Errorf("new db: %w", err)
		}
		d.engine = SQLite
	default:
		return nil, fmt.Errorf("new db: unknown driver %q (want postgres or sqlite)", cfg.Driver)
	}
	return d, nil
}

// Open is New followed by (*DB).Open. It does not migrate; call Migrate.
func Open(ctx context.Context, cfg config.DB, log *slog.Logger) (*DB, error) {
	d, err := New(cfg, log)
	if err != nil {
		return nil, err
	}
	if err := d.Open(ctx); err != nil {
		return nil, err
	}
	return d, nil
}

// Open connects and checks the server is usable. On failure nothing stays
// open. Calling Open twice is a bug.
func (d *DB) Open(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil || d.write != nil || d.closed {
		panic("BUG: db.Open called on a DB that was already opened")
	}
	switch d.engine {
	case Postgres:
		return d.openPostgres(ctx)
	case SQLite:
		return d.openSQLite(ctx)
	}
	panic("BUG: db.Open on a DB not made by New")
}

// Dialect describes the SQL differences of this database. Timescale becomes
// true once the extension is installed, at Open or during Migrate.
func (d *DB) Dialect() Dialect {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return Dialect{Engine: d.engine, Timescale: d.timescale}
}

// Pool is the pgx pool on PostgreSQL, for CopyFrom and batches; nil on
// SQLite and before Open.
func (d *DB) Pool() *pgxpool.Pool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.pool
}

// SQL is the database/sql handle for writes and for reads that must see
// them. On SQLite it is the single writer connection (see the package doc);
// on PostgreSQL a view over Pool. Nil before Open.
func (d *DB) SQL() *sql.DB {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.write
}

// ReadSQL is the database/sql handle for queries that only read: on SQLite a
// pool of query_only connections that run alongside the writer, on
// PostgreSQL the same handle as SQL. Nil before Open.
func (d *DB) ReadSQL() *sql.DB {
	d.mu.RLock()
	defer d.mu.RUnlock()
	return d.read
}

// Ping checks the database answers; it fits health.Check. On SQLite it
// asks a reader, so a long write transaction holding the one writer
// connection does not make the database look down.
func (d *DB) Ping(ctx context.Context) error {
	d.mu.RLock()
	pool, read := d.pool, d.read
	d.mu.RUnlock()
	switch {
	case pool != nil:
		if err := pool.Ping(ctx); err != nil {
			return fmt.Errorf("ping postgres: %w", err)
		}
	case read != nil:
		// PingContext alone may reuse an idle connection without touching
		// the file; a query reads the schema, which does.
		var n int
		if err := read.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_schema").Scan(&n); err != nil {
			return fmt.Errorf("ping sqlite: %w", err)
		}
	default:
		return errors.New("ping db: not open")
	}
	return nil
}

// PoolStats reports connection use; the zero value before Open.
func (d *DB) PoolStats() PoolStats {
	d.mu.RLock()
	pool, write := d.pool, d.write
	d.mu.RUnlock()
	switch {
	case pool != nil:
		s := pool.Stat()
		return PoolStats{
			InUse:        int(s.AcquiredConns()),
			Idle:         int(s.IdleConns()),
			Max:          int(s.MaxConns()),
			WaitCount:    s.EmptyAcquireCount(),
			WaitDuration: s.EmptyAcquireWaitTime(),
		}
	case write != nil:
		s := write.Stats()
		return PoolStats{
			InUse:        s.InUse,
			Idle:         s.Idle,
			Max:          s.MaxOpenConnections,
			WaitCount:    s.WaitCount,
			WaitDuration: s.WaitDuration,
		}
	}
	return PoolStats{}
}

// Close releases every connection. On SQLite it first checkpoints the WAL
// into the main file (bounded by a few seconds), so a clean shutdown leaves
// one self-contained file. Close is idempotent.
func (d *DB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil
	}
	d.closed = true
	var errs []error
	switch d.engine {
	case Postgres:
		if d.write != nil {
			// The stdlib view holds no connections of its own (no idle
			// ones); closing it ends its opener goroutine.
			errs = append(errs, d.write.Close())
		}
		if d.pool != nil {
			d.pool.Close()
		}
	case SQLite:
		if d.read != nil {
			// Readers go first so none pins the WAL during the checkpoint.
			errs = append(errs, d.read.Close())
		}
		if d.write != nil {
			ctx, cancel := context.WithTimeout(context.Background(), closeCheckpointTimeout)
			if err := checkpoint(ctx, d.write); err != nil {
				d.log.Warn("wal checkpoint on close failed", "err", err)
			}
			cancel()
			errs = append(errs, d.write.Close())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close db: %w", err)
	}
	return nil
}

// Checkpoint copies the SQLite WAL into the main database file and truncates
// the WAL. It is a no-op on PostgreSQL.
func (d *DB) Checkpoint(ctx context.Context) error {
	d.mu.RLock()
	engine, write := d.engine, d.write
	d.mu.RUnlock()
	if engine != SQLite {
		return nil
	}
	if write == nil {
		return errors.New("checkpoint: db not open")
	}
	return checkpoint(ctx, write)
}

func (d *DB) setTimescale(on bool) {
	d.mu.Lock()
	d.timescale = on
	d.mu.Unlock()
}
