package ingest

import (
	"github.com/edgeplat/edgeplat/core/rt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// TestWarnsWhenRedisKeepsNothingIntegration: ingest reads the stream
// store's persistence at start and warns when a Redis restart would lose
// its backlog (docs/stream-contract.md), and says nothing of the kind when
// the append-only file is on.
func TestWarnsWhenRedisKeepsNothingIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	for _, tt := range []struct {
		name string
		opts coretest.RedisOptions
		warn bool
	}{
		{"no persistence", coretest.RedisOptions{AppendOnly: "no"}, true},
		{"append-only file", coretest.RedisOptions{AppendFsync: "everysec"}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := coretest.PrivateRedisWith(t, tt.opts)
			store, err := redisstore.New(redisstore.Options{Addrs: []string{srv.Addr()}})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = store.Close() })
			h := newHarness(t, coretest.SQLite(t), store)
			var logs coretest.SyncBuffer
			h.rt = &rt.Runtime{Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: h.rt.Metrics, Health: h.rt.Health}
			h.start()
			coretest.Eventually(t, 10*time.Second, "ingest started", func() bool { return strings.Contains(logs.String(), "ingestion starting") })
			h.stop()
			if got := strings.Contains(logs.String(), "STREAM STORE HAS NO PERSISTENCE"); got != tt.warn {
				t.Fatalf("warned %v, want %v; log:\n%s", got, tt.warn, logs.String())
			}
		})
	}
}
