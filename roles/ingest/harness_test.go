package ingest

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// pair is one database + stream store combination the integration tests run
// on: the production pair (PostgreSQL, Redis) and the embedded one (SQLite,
// in-process store).
type pair struct {
	name  string
	setup func(t *testing.T) (config.DB, streamstore.Store)
}

var pairs = []pair{
	{"postgres+redis", func(t *testing.T) (config.DB, streamstore.Store) {
		dbc := coretest.Postgres(t)
		s, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
		if err != nil {
			t.Fatal(err)
		}
		return dbc, s
	}},
	{"sqlite+memory", func(t *testing.T) (config.DB, streamstore.Store) {
		s, err := memory.New(memory.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return coretest.SQLite(t), s
	}},
}

// forEachPair runs body as a subtest on every pair.
func forEachPair(t *testing.T, body func(t *testing.T, h *harness)) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	for _, p := range pairs {
		t.Run(p.name, func(t *testing.T) {
			dbc, store := p.setup(t)
			body(t, newHarness(t, dbc, store))
		})
	}
}

// harness owns one tenant, the backends and a running (or stopped) engine.
type harness struct {
	t      *testing.T
	cfg    *config.Config
	rt     *rt.Runtime
	store  streamstore.Store
	db     *db.DB
	tenant string
	agent  string

	// every is the engine's intervals; testIntervals unless a test needs
	// other bounds.
	every intervals

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan error
	eng    *engine
}

func newHarness(t *testing.T, dbc config.DB, store streamstore.Store) *harness {
	t.Helper()
	ctx := context.Background()
	d, err := db.Open(ctx, dbc, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = dbc
	cfg.Ingest.Port = coretest.FreePort(t)
	cfg.Ingest.Bind = "127.0.0.1"
	cfg.Ingest.WorkerCount = 2
	cfg.Ingest.BatchSize = 50
	cfg.Ingest.FlushIntervalMS = 20
	cfg.Ingest.ReclaimIdleMS = 300
	cfg.Ingest.CopyMinRows = 100
	cfg.Spool.Enabled = false
	cfg.Spool.Path = t.TempDir()
	h := &harness{
		t: t, cfg: cfg, store: store, db: d,
		rt: &rt.Runtime{
			Logger:  testLogger(),
			Metrics: metrics.NewRegistry(), Health: health.New(time.Second),
		},
		tenant: randomID(t),
		every:  testIntervals,
		agent:  "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11",
	}
	t.Cleanup(func() {
		h.stop()
		_, _ = store.Delete(context.Background(), h.stream(), telemetry.DLQStream(h.tenant))
		_ = store.Close()
		_ = d.Close()
	})
	return h
}

// testLogger discards logs unless EDGEPLAT_TEST_LOG is set.
func testLogger() *slog.Logger {
	if os.Getenv("EDGEPLAT_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func randomID(t *testing.T) string {
	var u codec.UUID
	if _, err := rand.Read(u[:]); err != nil {
		t.Fatal(err)
	}
	return codec.EncodeID(u)
}

var testIntervals = intervals{discover: 50 * time.Millisecond, maintain: 100 * time.Millisecond, sample: 100 * time.Millisecond,
	replay: 100 * time.Millisecond, processTO: 5 * time.Second}

func (h *harness) stream() string { return telemetry.IngestionStream(h.tenant) }

// start runs the role's services until stop.
func (h *harness) start() {
	h.t.Helper()
	h.startAs("")
}

func (h *harness) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cancel == nil {
		return
	}
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Errorf("ingest stopped with %v", err)
	}
	h.cancel = nil
}

// message returns one telemetry message JSON for device dev with readings
// r0..r(n-1) at time ts and value v.
func (h *harness) message(dev string, n int, ts time.Time, v float64) string {
	m := telemetry.Message{AgentUUID: h.agent, DeviceName: dev, Protocol: "modbus", Timestamp: telemetry.TimestampOf(ts)}
	for i := range n {
		val := v + float64(i)
		m.Readings = append(m.Readings, telemetry.Reading{Name: fmt.Sprintf("r%d", i), Value: &val, Unit: "C", Quality: "GOOD"})
	}
	b, err := json.Marshal(m)
	if err != nil {
		h.t.Fatal(err)
	}
	return string(b)
}

func (h *harness) add(data ...string) {
	h.t.Helper()
	batch := make([]map[string]string, len(data))
	for i, d := range data {
		batch[i] = map[string]string{telemetry.StreamField: d}
	}
	if _, err := h.store.AddBatch(context.Background(), h.stream(), batch, 0); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) addRaw(values map[string]string) {
	h.t.Helper()
	if _, err := h.store.Add(context.Background(), h.stream(), values, 0); err != nil {
		h.t.Fatal(err)
	}
}

// rowCount counts this harness's tenant's rows.
func (h *harness) rowCount() int64 {
	h.t.Helper()
	var n int64
	if err := h.db.SQL().QueryRowContext(context.Background(), `SELECT count(*) FROM readings WHERE tenant_id = $1`, h.tenant).Scan(&n); err != nil {
		h.t.Fatal(err)
	}
	return n
}

// logRows counts the tenant's agent_logs rows.
func (h *harness) logRows() int {
	var n int
	_ = h.db.SQL().QueryRowContext(context.Background(), `SELECT count(*) FROM agent_logs WHERE tenant_id = $1`, h.tenant).Scan(&n)
	return n
}

func (h *harness) value(metric string, ts time.Time) float64 {
	h.t.Helper()
	var v float64
	err := h.db.SQL().QueryRowContext(context.Background(),
		`SELECT value FROM readings WHERE tenant_id = $1 AND metric_name = $2 AND time = $3`, h.tenant, metric, h.db.Dialect().TimeArg(ts)).Scan(&v)
	if err != nil {
		h.t.Fatalf("value of %s at %s: %v", metric, ts, err)
	}
	return v
}

// drained waits until the group has nothing undelivered or pending.
func (h *harness) drained(timeout time.Duration) {
	h.t.Helper()
	group := telemetry.WriterGroup(h.tenant)
	coretest.Eventually(h.t, timeout, "the stream to be consumed and acknowledged", func() bool {
		g, err := h.store.Group(context.Background(), h.stream(), group)
		if err != nil || g.Pending != 0 {
			return false
		}
		// Lag may be unknown (-1) on Redis; what counts is that nothing
		// follows the last delivered entry.
		next, err := h.store.Range(context.Background(), h.stream(), "("+g.LastDeliveredID, "+", 1)
		return err == nil && len(next) == 0
	})
}

func (h *harness) dlq() []streamstore.Entry {
	h.t.Helper()
	es, err := h.store.Range(context.Background(), telemetry.DLQStream(h.tenant), "-", "+", 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}
