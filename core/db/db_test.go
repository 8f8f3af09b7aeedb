package db

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestReadingsKeyIntegration: a resent sample (same agent, metric and time)
// adds nothing under ON CONFLICT DO NOTHING, on both engines; a BAD read
// with a null value is stored.
func TestReadingsKeyIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := migratedDB(t, cfg)
		ctx := testCtx(t)
		ts := d.Dialect().TimeArg(time.Date(2024, 3, 10, 10, 0, 0, 123456000, time.UTC))
		insert := func(metric string, value any, quality string) int64 {
			t.Helper()
			res, err := d.SQL().ExecContext(ctx, insertReading, ts, testAgent, metric, value, "modbus", "C", quality, "press", "t1")
			if err != nil {
				t.Fatalf("insert %s: %v", metric, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		if n := insert("press.temp", 21.5, "GOOD"); n != 1 {
			t.Errorf("first insert affected %d rows", n)
		}
		if n := insert("press.temp", 99.0, "GOOD"); n != 0 {
			t.Errorf("duplicate insert affected %d rows, want 0", n)
		}
		if n := insert("press.fault", nil, "BAD"); n != 1 {
			t.Errorf("null-value insert affected %d rows", n)
		}

		var count int
		var value float64
		var tsOut Timestamp
		if err := d.ReadSQL().QueryRowContext(ctx,
			"SELECT count(*) OVER (), value, time FROM readings WHERE metric_name = $1", "press.temp").
			Scan(&count, &value, &tsOut); err != nil {
			t.Fatal(err)
		}
		if count != 1 || value != 21.5 {
			t.Errorf("press.temp: %d rows, value %v; want 1 row keeping the first value 21.5", count, value)
		}
		if want := time.Date(2024, 3, 10, 10, 0, 0, 123456000, time.UTC); !tsOut.Equal(want) {
			t.Errorf("time round trip: %v, want %v", tsOut.Time, want)
		}
		var nullValue *float64
		if err := d.ReadSQL().QueryRowContext(ctx,
			"SELECT value FROM readings WHERE metric_name = $1", "press.fault").Scan(&nullValue); err != nil || nullValue != nil {
			t.Errorf("BAD reading value = %v, %v; want NULL", nullValue, err)
		}
	})
}

func TestPoolStatsIntegration(t *testing.T) {
	forEachEngine(t, func(t *testing.T, cfg config.DB) {
		d := migratedDB(t, cfg)
		ctx := testCtx(t)
		wantMax := map[Engine]int{Postgres: cfg.PoolSize, SQLite: 1}[Engine(cfg.Driver)]
		if s := d.PoolStats(); s.InUse != 0 || s.Max != wantMax {
			t.Fatalf("idle stats = %+v, want 0 in use of %d", s, wantMax)
		}
		// A transaction on SQL holds a connection on both engines: the
		// pgx pool's (the stdlib view shares it) or SQLite's writer.
		tx, err := d.SQL().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := d.PoolStats()
		if s.InUse != 1 || s.Max != wantMax {
			t.Errorf("stats in a transaction = %+v, want 1 in use of %d", s, wantMax)
		}
		if got, want := s.Saturation(), 1/float64(wantMax); got != want {
			t.Errorf("saturation = %v, want %v", got, want)
		}
		// A health check must not wait for the writer.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		if err := d.Ping(pctx); err != nil {
			t.Errorf("ping during a write transaction: %v", err)
		}
		cancel()
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		if s := d.PoolStats(); s.InUse != 0 {
			t.Errorf("stats after rollback = %+v", s)
		}
	})
	if (PoolStats{}).Saturation() != 0 {
		t.Error("zero PoolStats saturation is not 0")
	}
}

func TestPostgresSessionIntegration(t *testing.T) {
	cfg := coretest.Postgres(t)
	cfg.StatementTimeoutMS = 1500
	d := openDB(t, cfg)
	ctx := testCtx(t)
	var timeout, app string
	if err := d.Pool().QueryRow(ctx, "SELECT current_setting('statement_timeout'), current_setting('application_name')").
		Scan(&timeout, &app); err != nil {
		t.Fatal(err)
	}
	if timeout != "1500ms" || app != "edgeplat" {
		t.Errorf("session: statement_timeout %q, application_name %q; want 1500ms, edgeplat", timeout, app)
	}
	// The timeout is enforced, and survives the stdlib view and DISCARD ALL.
	if _, err := d.SQL().ExecContext(ctx, "DISCARD ALL"); err != nil {
		t.Fatal(err)
	}
	_, err := d.SQL().ExecContext(ctx, "SELECT pg_sleep(5)")
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("pg_sleep(5) with a 1.5 s timeout = %v", err)
	}
	if d.SQL() != d.ReadSQL() {
		t.Error("postgres ReadSQL is not SQL")
	}
	if err := d.Checkpoint(ctx); err != nil {
		t.Errorf("checkpoint on postgres: %v", err)
	}
}

// TestPostgresCopyIntegration: the ingest path's CopyFrom works against the
// migrated table with the types ingest has at hand (a string UUID).
func TestPostgresCopyIntegration(t *testing.T) {
	d := migratedDB(t, coretest.Postgres(t))
	ctx := testCtx(t)
	base := time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC)
	rows := [][]any{
		{base, testAgent, "a.b", 1.5, "opcua", "bar", "GOOD", "a", "t1"},
		{base.Add(time.Second), testAgent, "a.b", nil, "opcua", "bar", "BAD", "a", "t1"},
	}
	n, err := d.Pool().CopyFrom(ctx, pgx.Identifier{"readings"}, readingColumns, pgx.CopyFromRows(rows))
	if err != nil || n != 2 {
		t.Fatalf("copy = %d, %v", n, err)
	}
}

// TestTimescaleIntegration checks detection against the server and that
// storage follows it. On this project's machines TimescaleDB is not
// installed, so the plain path runs and detection must say unavailable;
// where it is installed, readings must have become a hypertable.
func TestTimescaleIntegration(t *testing.T) {
	d := openDB(t, coretest.Postgres(t))
	ctx := testCtx(t)
	st, err := detectTimescale(ctx, d.SQL())
	if err != nil {
		t.Fatal(err)
	}
	var files bool
	if err := d.Pool().QueryRow(ctx,
		"SELECT EXISTS (SELECT 1 FROM pg_available_extension_versions WHERE name = 'timescaledb')").Scan(&files); err != nil {
		t.Fatal(err)
	}
	if st.Available != files {
		t.Fatalf("detection says available=%v, pg_available_extension_versions says %v", st.Available, files)
	}
	res, err := d.Migrate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Available {
		t.Logf("timescaledb unavailable on this server: checking the plain path")
		if res.Storage != StoragePartitioned || d.Dialect().Timescale {
			t.Errorf("storage %q, dialect %s; want partitioned plain postgres", res.Storage, d.Dialect())
		}
		return
	}
	if res.Storage != StorageHypertable || !d.Dialect().Timescale {
		t.Fatalf("storage %q, dialect %s; want a hypertable", res.Storage, d.Dialect())
	}
	var interval time.Duration
	if err := d.Pool().QueryRow(ctx, `SELECT time_interval FROM timescaledb_information.dimensions
		WHERE hypertable_name = 'readings' AND column_name = 'time'`).Scan(&interval); err != nil {
		t.Fatal(err)
	}
	if interval != 24*time.Hour {
		t.Errorf("chunk interval %s, want 24h", interval)
	}
}

// TestOpenFailsCleanly: an unreachable server is an error from Open that
// leaves nothing running (TestMain's leak check sees the pool's goroutines).
func TestOpenFailsCleanly(t *testing.T) {
	cfg := config.DB{Driver: "postgres", Host: "127.0.0.1", Port: coretest.FreePort(t), Name: "x", User: "x",
		SSL: "disable", PoolSize: 2}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	d, err := Open(ctx, cfg, testLogger(t))
	if err == nil {
		_ = d.Close()
		t.Fatal("open of a closed port succeeded")
	}
	if want := fmt.Sprintf("cannot reach PostgreSQL at 127.0.0.1:%d (DB_HOST, DB_PORT): connection refused", cfg.Port); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say what failed (%q)", err, want)
	}

	// A SQLite directory that cannot be created.
	file := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, config.DB{Driver: "sqlite", SQLitePath: filepath.Join(file, "x.db"), PoolSize: 1}, nil)
	if err == nil || !strings.Contains(err.Error(), "create sqlite directory") {
		t.Errorf("sqlite under a plain file: %v", err)
	}
}
