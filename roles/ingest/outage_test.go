package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
)

// outageLength is how long the database stays down; the acceptance run
// uses 30 s (EDGEPLAT_TEST_OUTAGE=30s), CI a shorter one.
func outageLength(t *testing.T) time.Duration {
	if v := os.Getenv("EDGEPLAT_TEST_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGEPLAT_TEST_OUTAGE: %v", err)
		}
		return d
	}
	return 8 * time.Second
}

// TestDatabaseOutageIntegration stops PostgreSQL (a private server, really
// stopped) under load: /health turns degraded, the breaker opens and spool
// files appear; after the restart the spool drains and the row count is
// exact. The embedded pair cannot lose its in-process database, so there
// the readings table is taken away and given back instead.
func TestDatabaseOutageIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	t.Run("postgres+redis", func(t *testing.T) {
		srv := coretest.PrivatePostgres(t)
		store, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, srv.Config(), store)
		runOutage(t, h, srv.Stop, srv.Start)
	})
	t.Run("sqlite+memory", func(t *testing.T) {
		store, err := memory.New(memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := newHarness(t, coretest.SQLite(t), store)
		exec := func(q string) func() {
			return func() {
				if _, err := h.db.SQL().ExecContext(context.Background(), q); err != nil {
					t.Fatal(err)
				}
			}
		}
		runOutage(t, h, exec(`ALTER TABLE readings RENAME TO readings_away`), exec(`ALTER TABLE readings_away RENAME TO readings`))
	})
}

func runOutage(t *testing.T, h *harness, down, up func()) {
	h.cfg.Spool.Enabled = true
	h.cfg.Spool.MaxSizeMB = 100
	h.start()

	// Producers: 10 messages of 5 readings every 50 ms, until told to stop.
	var mu sync.Mutex
	sent := 0
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		base := time.Now().UTC().Truncate(time.Millisecond)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			var batch []string
			for j := range 10 {
				batch = append(batch, h.message("dev"+strconv.Itoa(j), 5, base.Add(time.Duration(i)*time.Millisecond), float64(i)))
			}
			h.add(batch...)
			mu.Lock()
			sent += len(batch)
			mu.Unlock()
		}
	}()

	time.Sleep(time.Second)
	down()
	outage := outageLength(t)
	t0 := time.Now()
	coretest.Eventually(t, outage, "/health to report degraded", func() bool { return healthStatus(h) == "degraded" })
	coretest.Eventually(t, outage, "spool files to appear", func() bool {
		files, _ := filepath.Glob(filepath.Join(h.cfg.Spool.Path, "spool-*.ndjson"))
		return len(files) > 0
	})
	coretest.Eventually(t, outage, "the breaker to open", func() bool {
		open, _ := gauge(h, "edgeplat_ingestion_circuit_breaker_open")
		return open == 1
	})
	time.Sleep(time.Until(t0.Add(outage)))
	up()

	time.Sleep(2 * time.Second) // traffic after the recovery too
	close(stop)
	wg.Wait()
	coretest.Eventually(t, 60*time.Second, "the spool to drain and the breaker to close", func() bool {
		return h.eng.spool.Empty() && h.eng.breaker.Allow()
	})
	h.drained(30 * time.Second)
	coretest.Eventually(t, 10*time.Second, "/health to report ok", func() bool { return healthStatus(h) == "ok" })
	mu.Lock()
	want := int64(sent * 5)
	mu.Unlock()
	if got := h.rowCount(); got != want {
		t.Fatalf("rows = %d, want exactly %d (%d messages of 5 readings)", got, want, want/5)
	}
	if d := h.dlq(); len(d) != 0 {
		t.Errorf("dead letters during an outage: %d, want none", len(d))
	}
	spooled, _ := gauge(h, "edgeplat_ingestion_spooled_messages_total")
	t.Logf("outage %s: %d messages, %g spooled and replayed, rows exact", outage, want/5, spooled)
	h.stop()
}

func healthStatus(h *harness) string {
	s, _ := healthBody(h)["status"].(string)
	return s
}

// healthBody is the JSON of GET /health; nil when it cannot be had.
func healthBody(h *harness) map[string]any {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/health", h.cfg.Ingest.Port))
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&body)
	return body
}
