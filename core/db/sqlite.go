package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"

	// The pure-Go driver keeps CGO_ENABLED=0 builds working; it registers
	// itself as "sqlite".
	_ "modernc.org/sqlite"
)

const (
	// sqliteBusyTimeout is how long a statement waits for a lock held by
	// another process (a second edgeplat, the sqlite3 shell, a backup)
	// before failing with SQLITE_BUSY. Inside one process the single writer
	// connection means writers queue in database/sql instead.
	sqliteBusyTimeout = 5 * time.Second
	// sqliteReaderIdle caps idle reader connections: each keeps its own
	// page cache, and all-in-one runs on small boxes.
	sqliteReaderIdle = 4
)

// prepareSQLite validates the path and builds the two DSNs, without I/O.
// Pragmas go in the DSN so the driver applies them to every new
// connection: busy_timeout, foreign_keys and synchronous are
// per-connection settings that a pool would otherwise lose on reconnect.
func (d *DB) prepareSQLite(cfg config.DB) error {
	p := cfg.SQLitePath
	switch {
	case p == "":
		return errors.New("sqlite needs db sqlite_path")
	case p == ":memory:" || strings.HasPrefix(p, "file:"):
		// Each connection of an in-memory database is a separate database,
		// and URIs would bypass the file checks below.
		return fmt.Errorf("sqlite path %q: must be a plain file path", p)
	case strings.Contains(p, "?"):
		return fmt.Errorf("sqlite path %q: must not contain '?'", p)
	}
	common := fmt.Sprintf("_pragma=busy_timeout(%d)&_pragma=foreign_keys(1)&_pragma=synchronous(NORMAL)",
		sqliteBusyTimeout.Milliseconds())
	d.path = p
	// journal_mode is persistent in the file, so only the writer sets it;
	// _txlock=immediate makes every BeginTx take the write lock up front.
	d.writeDSN = p + "?" + common + "&_pragma=journal_mode(WAL)&_txlock=immediate"
	// query_only turns an accidental write through the read pool into an
	// error instead of a second writer contending for the lock.
	d.readDSN = p + "?" + common + "&_pragma=query_only(1)"
	return nil
}

// openSQLite opens the writer and the readers. d.mu is held.
func (d *DB) openSQLite(ctx context.Context) error {
	start := time.Now()
	if err := prepareSQLiteFile(d.path, d.log); err != nil {
		return err
	}
	w, err := sql.Open("sqlite", d.writeDSN)
	if err != nil {
		return fmt.Errorf("open sqlite writer %s: %w", d.path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	var mode string
	if err := w.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		_ = w.Close()
		return fmt.Errorf("open sqlite writer %s: %w", d.path, err)
	}
	if mode != "wal" {
		_ = w.Close()
		return fmt.Errorf("open sqlite %s: journal mode is %q, want wal (a network or read-only filesystem?)", d.path, mode)
	}
	r, err := sql.Open("sqlite", d.readDSN)
	if err != nil {
		_ = w.Close()
		return fmt.Errorf("open sqlite readers %s: %w", d.path, err)
	}
	r.SetMaxOpenConns(d.cfg.PoolSize)
	r.SetMaxIdleConns(min(d.cfg.PoolSize, sqliteReaderIdle))
	r.SetConnMaxIdleTime(5 * time.Minute)
	if err := r.PingContext(ctx); err != nil {
		_ = r.Close()
		_ = w.Close()
		return fmt.Errorf("open sqlite readers %s: %w", d.path, err)
	}
	// SQLite gives the -wal and -shm files the main file's mode, but ones
	// left by an older run keep whatever they had.
	for _, sfx := range []string{"-wal", "-shm"} {
		if err := restrictMode(d.path+sfx, d.log); err != nil && !errors.Is(err, os.ErrNotExist) {
			_ = r.Close()
			_ = w.Close()
			return err
		}
	}
	d.write, d.read = w, r
	d.log.Info("database open", "engine", "sqlite", "path", d.path, "journal_mode", mode,
		"synchronous", "normal", "readers", d.cfg.PoolSize, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// prepareSQLiteFile creates the directory (0700) and the file (0600) before
// SQLite does, since SQLite would create the file world-readable, and the
// database holds users, keys and telemetry.
func prepareSQLiteFile(path string, log *slog.Logger) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create sqlite directory: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create sqlite file: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("create sqlite file: %w", err)
	}
	return restrictMode(path, log)
}

// restrictMode takes group and other access away from an existing file.
func restrictMode(path string, log *slog.Logger) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	if fi.Mode().Perm()&0o077 == 0 {
		return nil
	}
	if err := os.Chmod(path, fi.Mode().Perm()&0o700); err != nil {
		return fmt.Errorf("restrict sqlite file mode: %w", err)
	}
	log.Warn("restricted sqlite file mode", "path", path, "was", fi.Mode().Perm().String())
	return nil
}

// checkpoint runs a TRUNCATE checkpoint on the writer. Running it on the
// writer connection orders it after in-flight writes instead of racing them.
func checkpoint(ctx context.Context, w *sql.DB) error {
	var busy, frames, done int
	if err := w.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &frames, &done); err != nil {
		return fmt.Errorf("wal checkpoint: %w", err)
	}
	if busy != 0 {
		return fmt.Errorf("wal checkpoint: blocked by a reader (%d of %d frames copied)", done, frames)
	}
	return nil
}
