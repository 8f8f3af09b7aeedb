package retention

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// Defaults of Options and of api.readings_retention.
const (
	DefaultRetention = 30 * day
	DefaultEvery     = time.Hour
	// DefaultAhead days of partitions exist after today, so a day's
	// partition is made a week before its first reading, and a serve-api
	// down for a few days still leaves them in place.
	DefaultAhead = 7
	DefaultBatch = 5000
	DefaultPause = 20 * time.Millisecond
)

// lockKey is the transaction advisory lock replicas take around a round
// ("rdngrtn1" in ASCII); see core/db's migrationLockKey for the other.
const lockKey int64 = 0x72646e6772746e31

// Modes as Result reports them.
const (
	ModePartitions = "partitions" // PostgreSQL, readings partitioned by day
	ModeChunks     = "chunks"     // TimescaleDB hypertable
	ModeRows       = "rows"       // SQLite, or PostgreSQL with one table
)

// Options tune a Maintainer; zero values take the defaults.
type Options struct {
	Every   time.Duration // between rounds
	Ahead   int           // days of partitions after today
	Batch   int           // rows one DELETE removes at most (ModeRows)
	Pause   time.Duration // after each full batch (ModeRows)
	Now     func() time.Time
	Metrics *Metrics
	Log     *slog.Logger
}

// Maintainer is the lifecycle service keeping readings' partitions and
// retention.
type Maintainer struct {
	db *db.DB
	// retention is a time.Duration; PUT /admin/system-config changes it
	// between rounds (SetRetention).
	retention atomic.Int64
	o         Options
}

// New returns the service; retention <= 0 keeps every reading (partitions
// are still made ahead).
func New(d *db.DB, retention time.Duration, o Options) *Maintainer {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Ahead <= 0 {
		o.Ahead = DefaultAhead
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Pause < 0 {
		o.Pause = 0
	} else if o.Pause == 0 {
		o.Pause = DefaultPause
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	m := &Maintainer{db: d, o: o}
	m.SetRetention(retention)
	return m
}

// Retention is the retention in effect; 0 keeps everything.
func (m *Maintainer) Retention() time.Duration { return time.Duration(m.retention.Load()) }

// SetRetention changes the retention from the next round on; <= 0 keeps
// everything.
func (m *Maintainer) SetRetention(d time.Duration) { m.retention.Store(int64(max(d, 0))) }

// Result reports one round.
type Result struct {
	Mode string
	// Skipped: another replica held the lock; this round did nothing.
	Skipped bool
	// Before and After list the partitions in time order (ModePartitions).
	Before, After []string
	Created       []string
	Dropped       []string // partitions or chunks
	Moved         int64    // rows moved out of readings_future
	Deleted       int64    // rows deleted (ModeRows)
}

// Name implements lifecycle.Service.
func (m *Maintainer) Name() string { return "api-readings-retention" }

// Start implements lifecycle.Service.
func (m *Maintainer) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (m *Maintainer) Stop(context.Context) error { return nil }

// Run maintains at once and then every Options.Every until ctx ends; a
// failed round is logged and counted, and the next one tries again.
func (m *Maintainer) Run(ctx context.Context) error {
	for {
		if _, err := m.Maintain(ctx); err != nil && ctx.Err() == nil {
			m.o.Metrics.errs.Inc()
			m.o.Log.Warn("readings maintenance", "err", err)
		}
		if !lifecycle.Sleep(ctx, m.o.Every) {
			return nil
		}
	}
}

// Maintain runs one round.
func (m *Maintainer) Maintain(ctx context.Context) (Result, error) {
	if m.db.Dialect().Engine == db.SQLite {
		return m.deleteRows(ctx)
	}
	var partitioned bool
	if err := m.db.SQL().QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM pg_partitioned_table
		WHERE partrelid = 'readings'::regclass)`).Scan(&partitioned); err != nil {
		return Result{}, fmt.Errorf("detect readings partitions: %w", err)
	}
	switch {
	case partitioned:
		return m.maintainPartitions(ctx)
	case m.db.Dialect().Timescale:
		return m.dropChunks(ctx)
	}
	return m.deleteRows(ctx)
}

// locked runs f in a transaction holding the advisory lock, and reports
// false without running it when another replica holds the lock.
func (m *Maintainer) locked(ctx context.Context, f func(tx *sql.Tx) error) (bool, error) {
	tx, err := m.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // no-op after Commit
	var got bool
	if err := tx.QueryRowContext(ctx, "SELECT pg_try_advisory_xact_lock($1)", lockKey).Scan(&got); err != nil {
		return false, fmt.Errorf("take readings maintenance lock: %w", err)
	}
	if !got {
		return false, nil
	}
	if err := f(tx); err != nil {
		return true, err
	}
	if err := tx.Commit(); err != nil {
		return true, fmt.Errorf("commit: %w", err)
	}
	return true, nil
}

// dropChunks lets TimescaleDB drop the hypertable's chunks entirely older
// than the retention; it makes chunks itself as rows arrive.
func (m *Maintainer) dropChunks(ctx context.Context) (Result, error) {
	res := Result{Mode: ModeChunks}
	retention := m.Retention()
	if retention <= 0 {
		return res, nil
	}
	cutoff := m.o.Now().Add(-retention)
	got, err := m.locked(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, "SELECT drop_chunks('readings', older_than => $1::timestamptz)", cutoff)
		if err != nil {
			return fmt.Errorf("drop readings chunks: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var name string
			if err := rows.Scan(&name); err != nil {
				return fmt.Errorf("drop readings chunks: %w", err)
			}
			res.Dropped = append(res.Dropped, name)
		}
		return rows.Err()
	})
	res.Skipped = !got
	if err != nil {
		return res, err
	}
	m.o.Metrics.dropped.Add(float64(len(res.Dropped)))
	if len(res.Dropped) > 0 {
		m.o.Log.Info("readings chunks dropped", "chunks", len(res.Dropped), "older_than", cutoff.UTC(), "retention", retention)
	}
	return res, nil
}

var _ lifecycle.Service = (*Maintainer)(nil)
