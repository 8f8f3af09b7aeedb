package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/edgeplat/edgeplat/config"
)

const (
	// applicationName shows in pg_stat_activity, so a DBA can tell edgeplat's
	// sessions from everyone else's.
	applicationName = "edgeplat"
	// pgConnectTimeout bounds one connection attempt; without it a
	// black-holed host hangs the dial for the kernel's TCP timeout.
	pgConnectTimeout = 10 * time.Second
	// pgHealthCheckPeriod is how often idle connections are checked and
	// expired ones replaced, so a failover is noticed between bursts rather
	// than by the next request.
	pgHealthCheckPeriod = 30 * time.Second
	pgMaxConnLifetime   = time.Hour
	pgMaxConnIdleTime   = 10 * time.Minute
	// minPostgresVersion is PostgreSQL 14, the first with date_bin, which
	// Dialect.TimeBucket uses without TimescaleDB.
	minPostgresVersion = 140000
)

// sslMode maps db.ssl onto libpq's sslmode; config accepts true and false
// for operators used to boolean flags.
func sslMode(s string) (string, error) {
	switch s {
	case "", "false":
		return "disable", nil
	case "true":
		return "require", nil
	case "disable", "prefer", "require", "verify-ca", "verify-full":
		return s, nil
	}
	return "", fmt.Errorf("db ssl mode %q: want disable, prefer, require, verify-ca, verify-full, true or false", s)
}

// postgresConfig builds the pool configuration from cfg without I/O.
func postgresConfig(cfg config.DB) (*pgxpool.Config, error) {
	if cfg.Host == "" || cfg.Name == "" || cfg.User == "" {
		return nil, errors.New("postgres needs db host, name and user")
	}
	if cfg.Port < 1 || cfg.Port > 65535 {
		return nil, fmt.Errorf("postgres port must be 1..65535, got %d", cfg.Port)
	}
	mode, err := sslMode(cfg.SSL)
	if err != nil {
		return nil, err
	}
	u := url.URL{
		Scheme: "postgres",
		Host:   net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port)),
		Path:   "/" + cfg.Name,
		User:   url.User(cfg.User),
	}
	if cfg.Password.IsSet() {
		// An unset password leaves room for ~/.pgpass, as libpq does.
		u.User = url.UserPassword(cfg.User, cfg.Password.Reveal())
	}
	u.RawQuery = url.Values{"sslmode": {mode}}.Encode()
	pc, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		// pgconn redacts the password in its parse errors.
		return nil, fmt.Errorf("parse postgres config: %w", err)
	}
	pc.MaxConns = int32(cfg.PoolSize)
	pc.MinConns = 0
	pc.HealthCheckPeriod = pgHealthCheckPeriod
	pc.MaxConnLifetime = pgMaxConnLifetime
	// Jitter keeps a pool opened all at once from reconnecting all at once.
	pc.MaxConnLifetimeJitter = pgMaxConnLifetime / 10
	pc.MaxConnIdleTime = pgMaxConnIdleTime
	pc.ConnConfig.ConnectTimeout = pgConnectTimeout
	// Startup parameters rather than SET after connect: they cost no round
	// trip, and RESET/DISCARD ALL return to them instead of to the server
	// default.
	pc.ConnConfig.RuntimeParams["application_name"] = applicationName
	pc.ConnConfig.RuntimeParams["statement_timeout"] = strconv.Itoa(cfg.StatementTimeoutMS)
	if !cfg.JIT {
		// The recursive series walk of the readings reads is estimated at
		// thousands of rows, which puts short statements past
		// jit_above_cost: one agent's latest values took 135 ms with JIT
		// and 47 ms without, a rollup chunk 2.7 s of which 2.4 s compiling
		// (docs/database.md).
		pc.ConnConfig.RuntimeParams["jit"] = "off"
	}
	return pc, nil
}

// openPostgres opens the pool and checks the server version. d.mu is held.
func (d *DB) openPostgres(ctx context.Context) error {
	start := time.Now()
	pool, err := pgxpool.NewWithConfig(ctx, d.pg)
	if err != nil {
		return fmt.Errorf("open postgres pool: %w", err)
	}
	var version int
	var timescale bool
	err = pool.QueryRow(ctx, `SELECT current_setting('server_version_num')::int,
		EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'timescaledb')`).Scan(&version, &timescale)
	if err != nil {
		pool.Close()
		return connectError(d.cfg, err)
	}
	if version < minPostgresVersion {
		pool.Close()
		return fmt.Errorf("connect postgres: server version %d.%d is too old, edgeplat needs PostgreSQL 14 or newer",
			version/10000, version%10000)
	}
	d.pool = pool
	d.timescale = timescale
	d.write = stdlib.OpenDBFromPool(pool)
	d.read = d.write
	d.log.Info("database open", "engine", "postgres", "host", d.pg.ConnConfig.Host,
		"database", d.pg.ConnConfig.Database, "server_version", version, "timescaledb", timescale,
		"pool_size", d.pg.MaxConns, "duration", time.Since(start).Round(time.Millisecond))
	return nil
}

// migrationConn opens a connection outside the pool for the migration run:
// it holds the advisory lock, and closing it releases the lock even if the
// unlock statement never ran, which a pooled connection could not promise.
// It has no statement timeout, since a large migration or hypertable
// conversion may rightly run for longer than any query should. database/sql
// rather than a bare pgx.Conn lets one runner serve both engines.
func (d *DB) migrationConn(ctx context.Context) (*sql.Conn, func(), error) {
	cc := d.pg.ConnConfig.Copy()
	cc.RuntimeParams["statement_timeout"] = "0"
	cc.RuntimeParams["application_name"] = applicationName + "-migrate"
	sdb := stdlib.OpenDB(*cc)
	sdb.SetMaxOpenConns(1)
	conn, err := sdb.Conn(ctx)
	if err != nil {
		_ = sdb.Close()
		return nil, nil, fmt.Errorf("connect postgres for migrations: %w", err)
	}
	return conn, func() { _ = conn.Close(); _ = sdb.Close() }, nil
}
