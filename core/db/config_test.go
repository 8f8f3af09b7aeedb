package db

import (
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func pgCfg() config.DB {
	return config.DB{Driver: "postgres", Host: "db.example", Port: 5432, Name: "edgeplat", User: "edgeplat",
		Password: "p@ss:/w?rd", SSL: "disable", PoolSize: 20, StatementTimeoutMS: 45000}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		edit func(*config.DB)
		want string
	}{
		{"unknown driver", func(c *config.DB) { c.Driver = "mysql" }, "unknown driver"},
		{"pool size", func(c *config.DB) { c.PoolSize = 0 }, "pool size"},
		{"negative timeout", func(c *config.DB) { c.StatementTimeoutMS = -1 }, "statement timeout"},
		{"no host", func(c *config.DB) { c.Host = "" }, "host"},
		{"bad port", func(c *config.DB) { c.Port = 70000 }, "port"},
		{"bad ssl", func(c *config.DB) { c.SSL = "sometimes" }, "ssl mode"},
		{"sqlite no path", func(c *config.DB) { c.Driver, c.SQLitePath = "sqlite", "" }, "sqlite_path"},
		{"sqlite memory", func(c *config.DB) { c.Driver, c.SQLitePath = "sqlite", ":memory:" }, "plain file path"},
		{"sqlite uri", func(c *config.DB) { c.Driver, c.SQLitePath = "sqlite", "file:x.db?mode=ro" }, "plain file path"},
		{"sqlite query", func(c *config.DB) { c.Driver, c.SQLitePath = "sqlite", "/tmp/x?.db" }, "'?'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := pgCfg()
			tt.edit(&c)
			_, err := New(c, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestNewDoesNoIO: a host that does not exist is fine until Open.
func TestNewDoesNoIO(t *testing.T) {
	c := pgCfg()
	c.Host = "no-such-host.invalid"
	d, err := New(c, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if d.Pool() != nil || d.SQL() != nil || d.PoolStats() != (PoolStats{}) {
		t.Fatal("New opened something")
	}
	if got := d.Dialect(); got != (Dialect{Engine: Postgres}) {
		t.Fatalf("Dialect = %+v", got)
	}
	if err := d.Ping(t.Context()); err == nil {
		t.Fatal("Ping before Open succeeded")
	}
	if err := d.Close(); err != nil {
		t.Fatalf("Close before Open: %v", err)
	}
}

func TestSSLMode(t *testing.T) {
	for in, want := range map[string]string{
		"": "disable", "false": "disable", "true": "require", "disable": "disable", "prefer": "prefer",
		"require": "require", "verify-ca": "verify-ca", "verify-full": "verify-full",
	} {
		got, err := sslMode(in)
		if err != nil || got != want {
			t.Errorf("sslMode(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := sslMode("on"); err == nil {
		t.Error("sslMode(on) succeeded")
	}
}

func TestPostgresConfig(t *testing.T) {
	pc, err := postgresConfig(pgCfg())
	if err != nil {
		t.Fatal(err)
	}
	cc := pc.ConnConfig
	checks := []struct {
		what      string
		got, want any
	}{
		{"max conns", pc.MaxConns, int32(20)},
		{"min conns", pc.MinConns, int32(0)},
		{"health check", pc.HealthCheckPeriod, 30 * time.Second},
		{"lifetime", pc.MaxConnLifetime, time.Hour},
		{"host", cc.Host, "db.example"},
		{"port", cc.Port, uint16(5432)},
		{"database", cc.Database, "edgeplat"},
		{"user", cc.User, "edgeplat"},
		{"password survives escaping", cc.Password, "p@ss:/w?rd"},
		{"connect timeout", cc.ConnectTimeout, 10 * time.Second},
		{"application_name", cc.RuntimeParams["application_name"], "edgeplat"},
		{"statement_timeout", cc.RuntimeParams["statement_timeout"], "45000"},
		{"no TLS when disabled", cc.TLSConfig == nil, true},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
		}
	}

	c := pgCfg()
	c.SSL = "true"
	pc, err = postgresConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	if pc.ConnConfig.TLSConfig == nil {
		t.Error("ssl=true did not require TLS")
	}
	if len(pc.ConnConfig.Fallbacks) != 0 {
		t.Error("ssl=true allows a plaintext fallback")
	}
}

func TestSQLiteDSNs(t *testing.T) {
	d, err := New(config.DB{Driver: "sqlite", SQLitePath: "/data/edgeplat.db", PoolSize: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"busy_timeout(5000)", "foreign_keys(1)", "synchronous(NORMAL)", "journal_mode(WAL)", "_txlock=immediate"} {
		if !strings.Contains(d.writeDSN, want) {
			t.Errorf("writer DSN %q lacks %s", d.writeDSN, want)
		}
	}
	for _, want := range []string{"busy_timeout(5000)", "foreign_keys(1)", "query_only(1)"} {
		if !strings.Contains(d.readDSN, want) {
			t.Errorf("reader DSN %q lacks %s", d.readDSN, want)
		}
	}
	if strings.Contains(d.readDSN, "journal_mode") || strings.Contains(d.readDSN, "_txlock") {
		t.Errorf("reader DSN %q changes the journal or takes write locks", d.readDSN)
	}
	if d.Dialect() != (Dialect{Engine: SQLite}) {
		t.Errorf("Dialect = %+v", d.Dialect())
	}
}
