package db

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestDBSettingsReachTheDriver: each db.* setting, changed from its
// default, changes the connection pgx makes.
func TestDBSettingsReachTheDriver(t *testing.T) {
	base := config.DB{Driver: "postgres", Host: "localhost", Port: 5432, Name: "edgeplat", User: "edgeplat", SSL: "disable",
		PoolSize: 20, StatementTimeoutMS: 45000}
	tests := []struct {
		key  string
		set  func(*config.DB)
		want func(t *testing.T, d *DB)
	}{
		{"db.host", func(c *config.DB) { c.Host = "db.internal" }, func(t *testing.T, d *DB) { eq(t, d.pg.ConnConfig.Host, "db.internal") }},
		{"db.port", func(c *config.DB) { c.Port = 6543 }, func(t *testing.T, d *DB) { eq(t, d.pg.ConnConfig.Port, uint16(6543)) }},
		{"db.name", func(c *config.DB) { c.Name = "plant7" }, func(t *testing.T, d *DB) { eq(t, d.pg.ConnConfig.Database, "plant7") }},
		{"db.user", func(c *config.DB) { c.User = "ops" }, func(t *testing.T, d *DB) { eq(t, d.pg.ConnConfig.User, "ops") }},
		{"db.password", func(c *config.DB) { c.Password = "s3cret" }, func(t *testing.T, d *DB) { eq(t, d.pg.ConnConfig.Password, "s3cret") }},
		{"db.ssl", func(c *config.DB) { c.SSL = "require" }, func(t *testing.T, d *DB) {
			if d.pg.ConnConfig.TLSConfig == nil || len(d.pg.ConnConfig.Fallbacks) != 0 {
				t.Error("DB_SSL=require leaves a plaintext connection possible")
			}
		}},
		{"db.pool_size", func(c *config.DB) { c.PoolSize = 3 }, func(t *testing.T, d *DB) { eq(t, d.pg.MaxConns, int32(3)) }},
		{"db.statement_timeout_ms", func(c *config.DB) { c.StatementTimeoutMS = 1500 }, func(t *testing.T, d *DB) {
			eq(t, d.pg.ConnConfig.RuntimeParams["statement_timeout"], "1500")
		}},
		{"db.jit", func(c *config.DB) { c.JIT = true }, func(t *testing.T, d *DB) {
			if v, set := d.pg.ConnConfig.RuntimeParams["jit"]; set {
				t.Errorf("DB_JIT=true still sets jit=%s; the server's setting should apply", v)
			}
		}},
		{"db.driver", func(c *config.DB) { c.Driver, c.SQLitePath = "sqlite", filepath.Join(t.TempDir(), "e.db") }, func(t *testing.T, d *DB) {
			eq(t, d.Dialect().Engine, SQLite)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			cfg := base
			tt.set(&cfg)
			d, err := New(cfg, nil)
			if err != nil {
				t.Fatal(err)
			}
			tt.want(t, d)
		})
	}
}

func eq[T comparable](t *testing.T, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestStatementTimeoutAndPoolSizeIntegration: DB_STATEMENT_TIMEOUT_MS
// cancels a longer statement on the server, and DB_POOL_SIZE caps the pool.
func TestStatementTimeoutAndPoolSizeIntegration(t *testing.T) {
	cfg := coretest.Postgres(t)
	cfg.StatementTimeoutMS = 200
	cfg.PoolSize = 3
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	d, err := Open(ctx, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	_, err = d.Pool().Exec(ctx, "SELECT pg_sleep(5)")
	if err == nil || !strings.Contains(err.Error(), "statement timeout") {
		t.Errorf("pg_sleep(5) under a 200 ms statement timeout: %v", err)
	}
	if got := d.PoolStats().Max; got != 3 {
		t.Errorf("pool max = %d, want DB_POOL_SIZE 3", got)
	}
}

// TestSQLitePathIsTheFile: EDGEPLAT_DB_SQLITE_PATH is where the database
// is created.
func TestSQLitePathIsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "plant.db")
	d, err := Open(t.Context(), config.DB{Driver: "sqlite", SQLitePath: path, PoolSize: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := os.Stat(path); err != nil {
		t.Errorf("db.sqlite_path %s: %v", path, err)
	}
}

// TestJITIntegration: connections run with JIT off unless db.jit is true,
// which leaves the server's setting (on, PostgreSQL's default, here).
func TestJITIntegration(t *testing.T) {
	for _, tt := range []struct {
		jit  bool
		want string
	}{{false, "off"}, {true, "on"}} {
		cfg := coretest.Postgres(t)
		cfg.JIT = tt.jit
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		d, err := Open(ctx, cfg, nil)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		var got string
		if err := d.SQL().QueryRowContext(ctx, "SHOW jit").Scan(&got); err != nil {
			t.Fatal(err)
		}
		var server string
		if err := d.SQL().QueryRowContext(ctx, "SELECT boot_val FROM pg_settings WHERE name = 'jit'").Scan(&server); err != nil {
			t.Fatal(err)
		}
		d.Close()
		cancel()
		if tt.jit && server != "on" {
			t.Skipf("this server's JIT default is %s", server)
		}
		if got != tt.want {
			t.Errorf("db.jit %v: SHOW jit = %s, want %s", tt.jit, got, tt.want)
		}
	}
}
