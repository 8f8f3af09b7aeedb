// Package store is the agent's local database: one SQLite file in WAL mode
// under the agent's data directory (0700, the file 0600), with versioned
// migrations embedded in the binary. It holds the agent's identity, its
// protocol endpoints, settings and admin users and sessions; later the
// offline queues, baselines and drift events join it. WAL with
// synchronous=NORMAL keeps every committed transaction across a process
// kill (only a power cut can lose the last ones), and the database stays
// consistent either way.
package store

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
)

//go:embed migrations/*.sql
var migrations embed.FS

// FileName is the database file inside the agent's data directory.
const FileName = "agent.db"

// ErrNotFound is returned when the row asked for does not exist.
var ErrNotFound = errors.New("not found")

// ErrDuplicate is returned when a unique name is taken.
var ErrDuplicate = errors.New("already exists")

// Store is the agent's database. It keeps the agent's identity and
// settings itself; Admins, Endpoints and Publishing reach the table groups
// of the admin UI, the protocol endpoints and the publishing
// configuration. Its methods and theirs are safe for concurrent use.
type Store struct {
	db   *db.DB
	path string
	cond *condition

	admins     Admins
	endpoints  Endpoints
	publishing Publishing
	jobs       Jobs
	apps       Apps
}

func newStore(d *db.DB, path string, log *slog.Logger) *Store {
	cond := newCondition(d, path, log)
	return &Store{
		db: d, path: path, cond: cond,
		admins:     Admins{db: d, cond: cond},
		endpoints:  Endpoints{db: d, cond: cond},
		publishing: Publishing{db: d, cond: cond},
		jobs:       Jobs{db: d, cond: cond},
		apps:       Apps{db: d, cond: cond},
	}
}

// Admins is the admin users and their sessions.
func (s *Store) Admins() *Admins { return &s.admins }

// Endpoints is the protocol endpoints.
func (s *Store) Endpoints() *Endpoints { return &s.endpoints }

// Publishing is the publish destinations, their subscriptions and the
// protocol outputs.
func (s *Store) Publishing() *Publishing { return &s.publishing }

// Jobs is the job executions the agent received.
func (s *Store) Jobs() *Jobs { return &s.jobs }

// Apps is the standalone agent's applications and the container runtime
// configuration.
func (s *Store) Apps() *Apps { return &s.apps }

// Open creates the data directory (0700) and the database file (0600) when
// missing, opens it and applies pending migrations.
//
// A store that is damaged (a quick check fails, or SQLite finds no
// database in the file) is not used: it is moved aside as
// agent.db.corrupt-<UTC time> with its -wal and -shm, kept for recovery,
// and a fresh store gets every row that could still be read from it
// (Recovery says how many). Health reports the store unhealthy while such
// a copy is in the data directory.
func Open(ctx context.Context, dataDir string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create agent data directory %s: %w", dataDir, err)
	}
	// MkdirAll leaves an existing directory's mode alone; the directory
	// holds credentials, so it is tightened here.
	if err := os.Chmod(dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("restrict agent data directory %s: %w", dataDir, err)
	}
	path := filepath.Join(dataDir, FileName)
	s, err := openChecked(ctx, path, log)
	var ce *corruptError
	if !errors.As(err, &ce) {
		return s, err
	}
	log.Error("agent store is corrupt; moving it aside", "path", path, "reason", ce.reason)
	return recoverCorrupt(ctx, path, ce.reason, log)
}

// corruptError is openChecked's verdict on a damaged file.
type corruptError struct{ reason string }

func (e *corruptError) Error() string { return "agent store corrupt: " + e.reason }

// openChecked opens path, runs a quick check and migrates; a damaged file
// is a *corruptError.
func openChecked(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	d, err := db.New(config.DB{Driver: "sqlite", SQLitePath: path, PoolSize: 2}, log)
	if err != nil {
		return nil, fmt.Errorf("open agent store: %w", err)
	}
	if err := d.Open(ctx); err != nil {
		if IsCorrupt(err) {
			return nil, &corruptError{reason: err.Error()}
		}
		return nil, fmt.Errorf("open agent store: %w", err)
	}
	s := newStore(d, path, log)
	// quick_check reads every page but skips the index cross-checks of
	// integrity_check: 10,000 queued records take milliseconds, and a
	// damaged file is found before the agent trusts it.
	verdict, err := s.cond.quickCheck(ctx)
	if err == nil && verdict != "ok" {
		err = &corruptError{reason: "quick_check: " + firstLine(verdict, nil)}
	} else if IsCorrupt(err) {
		err = &corruptError{reason: err.Error()}
	}
	if err == nil {
		if _, err = d.MigrateFS(ctx, migrations, "migrations"); IsCorrupt(err) {
			err = &corruptError{reason: err.Error()}
		}
	}
	if err != nil {
		// A damaged file may fail its closing checkpoint too.
		_ = s.Close()
		var ce *corruptError
		if errors.As(err, &ce) {
			return nil, err
		}
		return nil, fmt.Errorf("open agent store: %w", err)
	}
	return s, nil
}

// openFresh opens a new, empty store at path.
func openFresh(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	s, err := openChecked(ctx, path, log)
	var ce *corruptError
	if errors.As(err, &ce) {
		return nil, fmt.Errorf("a new agent store at %s is corrupt at once (%s): the disk may be failing", path, ce.reason)
	}
	return s, err
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close stops a running corruption check and waits for it, then
// checkpoints the WAL into the main file and closes the database.
func (s *Store) Close() error {
	s.cond.stopChecks()
	return s.db.Close()
}

// Ping checks the database answers.
func (s *Store) Ping(ctx context.Context) error { return s.cond.ping(ctx) }

// IntegrityCheck runs PRAGMA integrity_check and returns its verdict, "ok"
// for a sound file.
func (s *Store) IntegrityCheck(ctx context.Context) (_ string, err error) {
	defer s.cond.observe(&err)
	var verdict string
	if err := s.db.ReadSQL().QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&verdict); err != nil {
		return "", fmt.Errorf("integrity check: %w", err)
	}
	return verdict, nil
}

// TableStat is one table of Stats.
type TableStat struct {
	Name string `json:"name"`
	Rows int64  `json:"rows"`
}

// Stats is the database summary of GET /v1/db/stats.
type Stats struct {
	Path       string      `json:"path"`
	Exists     bool        `json:"exists"`
	SizeBytes  int64       `json:"sizeBytes"`
	SizeMB     float64     `json:"sizeMb"`
	TableCount int         `json:"tableCount"`
	Tables     []TableStat `json:"tables"`
}

// Stats reports the file size (with its WAL) and every table's row count.
func (s *Store) Stats(ctx context.Context) (_ Stats, err error) {
	defer s.cond.observe(&err)
	st := Stats{Path: s.path, Tables: []TableStat{}}
	for _, sfx := range []string{"", "-wal"} {
		fi, err := os.Stat(s.path + sfx)
		if err != nil {
			continue
		}
		if sfx == "" {
			st.Exists = true
		}
		st.SizeBytes += fi.Size()
	}
	st.SizeMB = float64(st.SizeBytes*100/(1<<20)) / 100
	r := s.db.ReadSQL()
	rows, err := r.QueryContext(ctx, `SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name`)
	if err != nil {
		return st, fmt.Errorf("list tables: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			_ = rows.Close()
			return st, fmt.Errorf("list tables: %w", err)
		}
		names = append(names, n)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return st, fmt.Errorf("list tables: %w", err)
	}
	for _, n := range names {
		var c int64
		// Names come from sqlite_master, not from a request.
		if err := r.QueryRowContext(ctx, `SELECT COUNT(*) FROM "`+n+`"`).Scan(&c); err != nil {
			return st, fmt.Errorf("count %s: %w", n, err)
		}
		st.Tables = append(st.Tables, TableStat{Name: n, Rows: c})
	}
	st.TableCount = len(st.Tables)
	return st, nil
}

func nowMS() int64 { return time.Now().UnixMilli() }
