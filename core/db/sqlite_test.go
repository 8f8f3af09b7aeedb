package db

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func fileMode(t *testing.T, p string) os.FileMode {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestSQLiteFilesAndPragmas(t *testing.T) {
	cfg := coretest.SQLite(t)
	dir := filepath.Join(filepath.Dir(cfg.SQLitePath), "data", "cloud")
	cfg.SQLitePath = filepath.Join(dir, "edgeplat.db")
	d := migratedDB(t, cfg)
	ctx := testCtx(t)
	if _, err := d.SQL().ExecContext(ctx, insertReading, d.Dialect().TimeArg(time.Now()), testAgent, "m", 1.0, nil, nil, nil, nil, nil); err != nil {
		t.Fatal(err)
	}

	if got := fileMode(t, dir); got != 0o700 {
		t.Errorf("directory mode %v, want 0700", got)
	}
	for _, sfx := range []string{"", "-wal", "-shm"} {
		if got := fileMode(t, cfg.SQLitePath+sfx); got != 0o600 {
			t.Errorf("%s mode %v, want 0600", filepath.Base(cfg.SQLitePath+sfx), got)
		}
	}

	// Per-connection settings hold on both handles, journal mode on the file.
	want := map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000", "synchronous": "1"}
	for handle, sdb := range map[string]*sql.DB{"writer": d.SQL(), "reader": d.ReadSQL()} {
		for p, w := range want {
			var got string
			if err := sdb.QueryRowContext(ctx, "PRAGMA "+p).Scan(&got); err != nil || got != w {
				t.Errorf("%s: PRAGMA %s = %q, %v; want %q", handle, p, got, err, w)
			}
		}
	}
	var q string
	if err := d.ReadSQL().QueryRowContext(ctx, "PRAGMA query_only").Scan(&q); err != nil || q != "1" {
		t.Errorf("reader query_only = %q, %v; want 1", q, err)
	}
}

func TestSQLiteTightensLooseFileMode(t *testing.T) {
	cfg := coretest.SQLite(t)
	if err := os.WriteFile(cfg.SQLitePath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.SQLitePath, 0o644); err != nil { // past the umask
		t.Fatal(err)
	}
	openDB(t, cfg)
	if got := fileMode(t, cfg.SQLitePath); got != 0o600 {
		t.Errorf("mode %v after open, want 0600", got)
	}
}

func TestSQLiteReadPoolRefusesWrites(t *testing.T) {
	d := migratedDB(t, coretest.SQLite(t))
	_, err := d.ReadSQL().ExecContext(testCtx(t), insertReading, int64(1), testAgent, "m", 1.0, nil, nil, nil, nil, nil)
	if err == nil || !strings.Contains(strings.ToLower(err.Error()), "readonly") {
		t.Fatalf("insert through ReadSQL = %v, want a read-only error", err)
	}
}

func TestSQLiteCheckpoint(t *testing.T) {
	cfg := coretest.SQLite(t)
	d := migratedDB(t, cfg)
	ctx := testCtx(t)
	for i := range 100 {
		if _, err := d.SQL().ExecContext(ctx, insertReading, int64(i), testAgent, "m", float64(i), nil, nil, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	wal := cfg.SQLitePath + "-wal"
	if fi, err := os.Stat(wal); err != nil || fi.Size() == 0 {
		t.Fatalf("WAL before checkpoint: %v, %v; want a non-empty file", fi, err)
	}
	if err := d.Checkpoint(ctx); err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	if fi, err := os.Stat(wal); err != nil || fi.Size() != 0 {
		t.Fatalf("WAL after TRUNCATE checkpoint: size %v, %v; want 0", fi.Size(), err)
	}

	// Close checkpoints too; the rows are in the main file afterwards.
	if _, err := d.SQL().ExecContext(ctx, insertReading, int64(1000), testAgent, "m", 1.0, nil, nil, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(wal); err == nil && fi.Size() != 0 {
		t.Errorf("WAL after Close has %d bytes", fi.Size())
	}
	d2 := openDB(t, cfg)
	var n int
	if err := d2.ReadSQL().QueryRowContext(ctx, "SELECT count(*) FROM readings").Scan(&n); err != nil || n != 101 {
		t.Fatalf("rows after reopen = %d, %v; want 101", n, err)
	}
}

// TestSQLiteConcurrentWriters is the writer discipline's point: many
// goroutines writing transactions at once all succeed, with no
// SQLITE_BUSY, while readers keep reading.
func TestSQLiteConcurrentWriters(t *testing.T) {
	d := migratedDB(t, coretest.SQLite(t))
	ctx := testCtx(t)
	const writers, txs, rowsPerTx = 16, 20, 10
	var wg sync.WaitGroup
	errs := make(chan error, writers*txs+writers)
	for w := range writers {
		wg.Go(func() {
			for i := range txs {
				// Read-then-write inside the transaction: with deferred
				// transactions this is where SQLITE_BUSY upgrades happen.
				tx, err := d.SQL().BeginTx(ctx, nil)
				if err != nil {
					errs <- err
					return
				}
				var n int
				if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM readings").Scan(&n); err != nil {
					errs <- err
					_ = tx.Rollback()
					return
				}
				for r := range rowsPerTx {
					ts := int64((w*txs+i)*rowsPerTx + r)
					if _, err := tx.ExecContext(ctx, insertReading, ts, testAgent, "m", 1.0, nil, nil, nil, nil, nil); err != nil {
						errs <- err
						_ = tx.Rollback()
						return
					}
				}
				if err := tx.Commit(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	for range writers {
		wg.Go(func() {
			for range txs {
				var n int
				if err := d.ReadSQL().QueryRowContext(ctx, "SELECT count(*) FROM readings").Scan(&n); err != nil {
					errs <- fmt.Errorf("reader: %w", err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	var n int
	if err := d.ReadSQL().QueryRowContext(ctx, "SELECT count(*) FROM readings").Scan(&n); err != nil || n != writers*txs*rowsPerTx {
		t.Fatalf("rows = %d, %v; want %d", n, err, writers*txs*rowsPerTx)
	}
}

// TestSQLiteStrictTypes: the schema refuses what would silently sort or
// compare wrongly: a time as text, a UUID not in canonical form.
func TestSQLiteStrictTypes(t *testing.T) {
	d := migratedDB(t, coretest.SQLite(t))
	ctx := testCtx(t)
	bad := []struct {
		name string
		args []any
	}{
		{"time.Time instead of micros", []any{time.Now(), testAgent}},
		{"upper-case uuid", []any{int64(1), strings.ToUpper(testAgent)}},
		{"short uuid", []any{int64(1), "3f2b8c1e"}},
	}
	for _, b := range bad {
		args := append(b.args, "m", 1.0, nil, nil, nil, nil, nil)
		if _, err := d.SQL().ExecContext(ctx, insertReading, args...); err == nil {
			t.Errorf("%s: insert succeeded", b.name)
		}
	}
	if _, err := d.SQL().ExecContext(ctx,
		"INSERT INTO agent_logs (time, message, data) VALUES ($1, $2, $3)", int64(1), "x", "{not json"); err == nil {
		t.Error("agent_logs accepted invalid JSON")
	}
}
