package db

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestMain fails the run if a test leaves a goroutine behind: a pool's
// health checker or a database/sql opener that was never closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// forEachEngine runs fn against a fresh SQLite file and a fresh PostgreSQL
// database. The PostgreSQL half skips in -short mode and when no server is
// reachable (failing under CI instead).
func forEachEngine(t *testing.T, fn func(t *testing.T, cfg config.DB)) {
	t.Helper()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		fn(t, coretest.SQLite(t))
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		fn(t, coretest.Postgres(t))
	})
}

// openDB opens cfg and closes it when the test ends.
func openDB(t testing.TB, cfg config.DB) *DB {
	t.Helper()
	d, err := Open(testCtx(t), cfg, testLogger(t))
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return d
}

// migratedDB opens cfg and applies the embedded migrations.
func migratedDB(t testing.TB, cfg config.DB) *DB {
	t.Helper()
	d := openDB(t, cfg)
	if _, err := d.Migrate(testCtx(t)); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}

func embeddedCount(t testing.TB, e Engine) int {
	t.Helper()
	ms, err := loadMigrations(embeddedMigrations, "migrations/"+string(e))
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

const testAgent = "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f"

// insertReading is the portable single-row insert: the same text runs on
// both engines.
const insertReading = `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT DO NOTHING`

// readingColumns are readings' columns in insertReading's order, for CopyFrom.
var readingColumns = []string{"time", "agent_uuid", "metric_name", "value", "protocol", "unit", "quality", "device_name", "tenant_id"}
