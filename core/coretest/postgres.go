package coretest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeplat/edgeplat/config"
)

// Postgres returns the configuration of a fresh, empty database on the test
// PostgreSQL server, dropped again when the test ends. Each call gets its
// own database, so tests can run in parallel and leave nothing behind.
//
// The server is found through EDGEPLAT_TEST_PG_HOST, _PORT, _USER and
// _PASSWORD (default 127.0.0.1:5432, user postgres, no password); the user
// must be allowed to create databases. In -short mode the test is skipped.
// An unreachable server skips the test locally and fails it under CI (see
// Unavailable).
func Postgres(t testing.TB) config.DB {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs PostgreSQL, skipped in -short mode")
	}
	host := Addr("EDGEPLAT_TEST_PG_HOST", "127.0.0.1")
	port, err := strconv.Atoi(Addr("EDGEPLAT_TEST_PG_PORT", "5432"))
	if err != nil {
		t.Fatalf("EDGEPLAT_TEST_PG_PORT: %v", err)
	}
	cfg := config.DB{
		Driver:             "postgres",
		Host:               host,
		Port:               port,
		User:               Addr("EDGEPLAT_TEST_PG_USER", "postgres"),
		Password:           config.Secret(Addr("EDGEPLAT_TEST_PG_PASSWORD", "")),
		SSL:                "disable",
		PoolSize:           10,
		StatementTimeoutMS: 30000,
	}
	addr := net.JoinHostPort(host, strconv.Itoa(port))

	var b [8]byte
	_, _ = rand.Read(b[:])
	cfg.Name = "edgeplat_test_" + hex.EncodeToString(b[:])

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, adminDSN(cfg))
	if err != nil {
		Unavailable(t, "PostgreSQL", addr, err)
		return cfg
	}
	defer admin.Close(ctx)
	// The name is ours and made of [a-z0-9_], so quoting is enough.
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{cfg.Name}.Sanitize()); err != nil {
		t.Fatalf("create test database %s on %s: %v", cfg.Name, addr, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, adminDSN(cfg))
		if err != nil {
			t.Errorf("drop test database %s: %v", cfg.Name, err)
			return
		}
		defer c.Close(ctx)
		// FORCE ends sessions a failed test left open, so the drop cannot
		// hang or leave the database behind.
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{cfg.Name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop test database %s: %v", cfg.Name, err)
		}
	})
	return cfg
}

// adminDSN points at the server's postgres database, from which test
// databases are created and dropped.
func adminDSN(cfg config.DB) string {
	u := url.URL{
		Scheme:   "postgres",
		Host:     net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		Path:     "/postgres",
		User:     url.User(cfg.User),
		RawQuery: "sslmode=disable&connect_timeout=5&application_name=edgeplat-test",
	}
	if cfg.Password.IsSet() {
		u.User = url.UserPassword(cfg.User, cfg.Password.Reveal())
	}
	return u.String()
}

// SQLite returns the configuration of a database file in a fresh temporary
// directory that the test removes when it ends.
func SQLite(t testing.TB) config.DB {
	t.Helper()
	return config.DB{
		Driver:             "sqlite",
		SQLitePath:         filepath.Join(t.TempDir(), "edgeplat.db"),
		PoolSize:           4,
		StatementTimeoutMS: 30000,
	}
}
