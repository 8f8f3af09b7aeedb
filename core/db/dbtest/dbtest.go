// Package dbtest gives integration tests a migrated database of either
// engine. It lives apart from core/coretest because core/db's own tests use
// coretest, which therefore cannot import core/db.
package dbtest

import (
	"context"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
)

// Migrated opens and migrates a fresh database of engine, "postgres" or
// "sqlite". Both skip in -short mode; PostgreSQL also when no server is
// reachable (failing under CI instead).
func Migrated(t testing.TB, engine string) *db.DB {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: skipped in -short mode")
	}
	var cfg config.DB
	if engine == "postgres" {
		cfg = coretest.Postgres(t)
	} else {
		cfg = coretest.SQLite(t)
	}
	return Open(t, cfg)
}

// Open opens and migrates the database cfg names and closes it when the
// test ends.
func Open(t testing.TB, cfg config.DB) *db.DB {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := db.Open(ctx, cfg, nil)
	if err != nil {
		t.Fatalf("open %s: %v", cfg.Driver, err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return d
}
