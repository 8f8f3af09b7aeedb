package redis

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

func TestPersistenceFromConfig(t *testing.T) {
	tests := []struct {
		name string
		conf map[string]string
		want streamstore.Persistence
	}{
		{"nothing", map[string]string{"appendonly": "no", "appendfsync": "everysec", "save": ""},
			streamstore.Persistence{AOFFsync: "everysec", RDBKnown: true, Source: "config"}},
		{"aof everysec", map[string]string{"appendonly": "yes", "appendfsync": "everysec", "save": ""},
			streamstore.Persistence{AOF: true, AOFFsync: "everysec", RDBKnown: true, Source: "config"}},
		{"rdb save points", map[string]string{"appendonly": "no", "appendfsync": "everysec", "save": "3600 1 300 100 60 10000"},
			streamstore.Persistence{AOFFsync: "everysec", RDB: true, RDBKnown: true, Source: "config"}},
		{"both", map[string]string{"appendonly": "YES", "appendfsync": "always", "save": "900 1"},
			streamstore.Persistence{AOF: true, AOFFsync: "always", RDB: true, RDBKnown: true, Source: "config"}},
		{"blank save", map[string]string{"appendonly": "no", "save": "  "},
			streamstore.Persistence{RDBKnown: true, Source: "config"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := persistenceFromConfig(tc.conf)
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if got.Durable() != (tc.want.AOF || tc.want.RDB) {
				t.Errorf("Durable() = %v", got.Durable())
			}
		})
	}
}

func TestPersistenceFromInfo(t *testing.T) {
	const head = "# Persistence\r\nloading:0\r\nasync_loading:0\r\nrdb_changes_since_last_save:12\r\nrdb_bgsave_in_progress:0\r\nrdb_last_save_time:1700000000\r\n"
	tests := []struct {
		name string
		info string
		want streamstore.Persistence
	}{
		{"aof off, no snapshot", head + "rdb_saves:0\r\nrdb_last_bgsave_time_sec:-1\r\naof_enabled:0\r\naof_rewrite_in_progress:0\r\n",
			streamstore.Persistence{Source: "info"}},
		{"aof on", head + "rdb_saves:0\r\nrdb_last_bgsave_time_sec:-1\r\naof_enabled:1\r\naof_rewrite_in_progress:0\r\n",
			streamstore.Persistence{AOF: true, Source: "info"}},
		{"snapshots taken (redis 7)", head + "rdb_saves:3\r\nrdb_last_bgsave_time_sec:0\r\naof_enabled:0\r\n",
			streamstore.Persistence{RDB: true, RDBKnown: true, Source: "info"}},
		{"snapshot taken (redis 6)", head + "rdb_last_bgsave_time_sec:1\r\naof_enabled:0\r\n",
			streamstore.Persistence{RDB: true, RDBKnown: true, Source: "info"}},
		{"garbage", "no colon here\r\n\r\n", streamstore.Persistence{Source: "info"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := persistenceFromInfo(tc.info); got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestCheckPersistenceIntegration reads real servers' settings, over
// CONFIG GET and, with CONFIG renamed away, over INFO, and checks what
// CheckPersistence tells the operator.
func TestCheckPersistenceIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("needs redis-server; -short given")
	}
	noConfig := []string{"--rename-command", "CONFIG", ""}
	tests := []struct {
		name    string
		opts    coretest.RedisOptions
		durable bool
		source  string
		warn    string // in the log line; "" for none
	}{
		{"no persistence", coretest.RedisOptions{AppendOnly: "no"}, false, "config", "STREAM STORE HAS NO PERSISTENCE"},
		{"aof everysec", coretest.RedisOptions{AppendFsync: "everysec"}, true, "config", ""},
		{"rdb only", coretest.RedisOptions{AppendOnly: "no", Save: "3600 1"}, true, "config", "RDB snapshots only"},
		{"no config, aof", coretest.RedisOptions{Args: noConfig}, true, "info", ""},
		{"no config, nothing", coretest.RedisOptions{AppendOnly: "no", Args: noConfig}, false, "info", "snapshot settings cannot be read"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			srv := coretest.PrivateRedisWith(t, tc.opts)
			st, err := New(Options{Addrs: []string{srv.Addr()}})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			var buf bytes.Buffer
			p, ok := streamstore.CheckPersistence(context.Background(), st, slog.New(slog.NewTextHandler(&buf, nil)))
			if !ok || p.Durable() != tc.durable || p.Source != tc.source {
				t.Fatalf("CheckPersistence = %+v, %v; want durable %v from %s", p, ok, tc.durable, tc.source)
			}
			line := buf.String()
			if tc.warn == "" && strings.Contains(line, "level=WARN") {
				t.Errorf("warned on a durable server: %s", line)
			}
			if tc.warn != "" && (!strings.Contains(line, "level=WARN") || !strings.Contains(line, tc.warn)) {
				t.Errorf("log = %q, want a warning with %q", line, tc.warn)
			}
		})
	}
}
