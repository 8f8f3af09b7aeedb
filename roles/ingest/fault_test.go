package ingest

import (
	"context"
	"errors"
	"github.com/edgeplat/edgeplat/core/rt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// Fault tests: each runs ingest under load, injects one fault and counts
// the rows afterwards. `go test -run Fault` selects them.

// faultHarness is a harness on the machine's Redis (this test's own tenant
// stream) and the given database.
func faultHarness(t *testing.T, dbc config.DB) *harness {
	t.Helper()
	if testing.Short() {
		t.Skip("fault test; -short given")
	}
	store, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	return newHarness(t, dbc, store)
}

// faultLength is how long a fault lasts: def, or EDGEPLAT_TEST_FAULT (a
// duration) for a longer acceptance run.
func faultLength(t *testing.T, def time.Duration) time.Duration {
	if v := os.Getenv("EDGEPLAT_TEST_FAULT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("EDGEPLAT_TEST_FAULT: %v", err)
		}
		return d
	}
	return def
}

// load appends messages at rate per second, in ticks of 50 ms, until
// stop. gen returns message i's entry and how many of its readings are
// valid (0 for an entry that goes to the dead-letter stream whole).
type load struct {
	h       *harness
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
	mu      sync.Mutex
	sent    int
	valid   int64 // readings that must reach the table
	invalid int   // entries that must reach the dead-letter stream
}

func startLoad(h *harness, rate int, gen func(i int) (string, int)) *load {
	l := &load{h: h, stop: make(chan struct{})}
	// A test that failed half-way stops its load before the harness
	// closes the store under it.
	h.t.Cleanup(func() { l.halt() })
	perTick := max(1, rate/20)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		i := 0
		for {
			select {
			case <-l.stop:
				return
			case <-t.C:
			}
			batch := make([]map[string]string, perTick)
			var valid int64
			invalid := 0
			for j := range batch {
				data, n := gen(i + j)
				batch[j] = map[string]string{telemetry.StreamField: data}
				valid += int64(n)
				if n == 0 || strings.Contains(data, `\u0000`) {
					invalid++
				}
			}
			if _, err := h.store.AddBatch(context.Background(), h.stream(), batch, 0); err != nil {
				h.t.Errorf("append load: %v", err)
				return
			}
			i += perTick
			l.mu.Lock()
			l.sent += perTick
			l.valid += valid
			l.invalid += invalid
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *load) halt() {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
}

// end stops the load and returns what it sent.
func (l *load) end() (sent int, valid int64, invalid int) {
	l.halt()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sent, l.valid, l.invalid
}

// good is a valid message of 5 readings, distinct per i.
func (h *harness) good(base time.Time, i int) (string, int) {
	return h.message("dev"+strconv.Itoa(i%10), 5, base.Add(time.Duration(i)*time.Millisecond), float64(i)), 5
}

// TestPostgresOutageFault stops PostgreSQL for a minute under 200 msg/s,
// without a spool and with a short RECLAIM_IDLE_MS, so that entries are
// held and redelivered through the outage: once it is back, the rows are
// exact and nothing was dead-lettered. Before, the redeliveries counted
// towards the delivery limit and good messages went to the DLQ.
func TestPostgresOutageFault(t *testing.T) {
	srv := coretest.PrivatePostgres(t)
	h := faultHarness(t, srv.Config())
	h.cfg.Ingest.ReclaimIdleMS = 2000
	h.start()
	t0 := time.Now()
	base := time.Now().UTC().Truncate(time.Millisecond)
	l := startLoad(h, 200, func(i int) (string, int) { return h.good(base, i) })

	time.Sleep(2 * time.Second)
	srv.Stop()
	outage := faultLength(t, 60*time.Second)
	coretest.Eventually(t, outage, "the breaker to open", func() bool { return !h.eng.breaker.Allow() })
	time.Sleep(time.Until(t0.Add(2*time.Second + outage)))
	srv.Start()
	time.Sleep(2 * time.Second)
	sent, valid, _ := l.end()

	h.drained(60 * time.Second)
	if got := h.rowCount(); got != valid {
		t.Errorf("rows = %d, want exactly %d (%d messages of 5 readings)", got, valid, sent)
	}
	if n := h.dlqLen(); n != 0 {
		t.Errorf("dead letters after a database outage: %d, want none; first: %v", n, h.dlq()[0].Values["reason"])
	}
	t.Logf("outage %s under 200 msg/s: %d messages, %d of %d rows, %d dead letters, %s in all",
		outage, sent, h.rowCount(), valid, h.dlqLen(), time.Since(t0).Round(time.Second))
}

// backendsCloser closes the database and stream store in its Stop, as
// cmd's backends service does; listed before the role, it stops after it.
type backendsCloser struct {
	d     *db.DB
	store streamstore.Store
}

func (b *backendsCloser) Name() string                  { return "backends" }
func (b *backendsCloser) Start(context.Context) error   { return nil }
func (b *backendsCloser) Run(ctx context.Context) error { <-ctx.Done(); return nil }
func (b *backendsCloser) Stop(context.Context) error {
	return errors.Join(b.store.Close(), b.d.Close())
}

// TestGracefulStopFault stops ingest (lifecycle stop, as SIGTERM does)
// under load, several times, with the backends stopped after the role as
// in cmd: nothing is left pending, and every entry the group delivered has
// its rows. Before, the pool and store closed under the workers' last
// batches, which stayed pending.
func TestGracefulStopFault(t *testing.T) {
	h := faultHarness(t, coretest.Postgres(t))
	t0 := time.Now()
	base := time.Now().UTC().Truncate(time.Millisecond)
	l := startLoad(h, 300, func(i int) (string, int) { return h.good(base, i) })
	const rounds = 3
	for range rounds {
		// Backends of this run only: they close with it.
		d, err := db.Open(context.Background(), h.cfg.DB, nil)
		if err != nil {
			t.Fatal(err)
		}
		store, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
		if err != nil {
			t.Fatal(err)
		}
		r := &rt.Runtime{Logger: h.rt.Logger, Metrics: metrics.NewRegistry(), Health: h.rt.Health}
		svcs, err := newWithIntervals(h.cfg, r, rt.Backends{DB: d, Streams: store}, Options{StreamPattern: h.stream(), LogStreamPattern: telemetry.LogsStream(h.tenant)}, testIntervals)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- lifecycle.Run(ctx, lifecycle.Options{Logger: h.rt.Logger}, append([]lifecycle.Service{&backendsCloser{d, store}}, svcs...)...)
		}()
		coretest.Eventually(t, 10*time.Second, "workers to write", func() bool { return h.rowCount() > 0 })
		time.Sleep(1500 * time.Millisecond)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("ingest stopped with %v", err)
		}
	}
	sent, _, _ := l.end()

	g, err := h.store.Group(context.Background(), h.stream(), telemetry.WriterGroup(h.tenant))
	if err != nil {
		t.Fatal(err)
	}
	if g.Pending != 0 {
		t.Errorf("pending entries after %d graceful stops = %d, want 0", rounds, g.Pending)
	}
	// Acknowledged entries are trimmed: what was delivered is what was
	// sent less what still follows the last delivered entry.
	undelivered, err := h.store.Range(context.Background(), h.stream(), "("+g.LastDeliveredID, "+", 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	delivered := sent - len(undelivered)
	if got, want := h.rowCount(), int64(5*delivered); got != want {
		t.Errorf("rows = %d, want %d for the %d entries delivered", got, want, delivered)
	}
	t.Logf("%d graceful stops under 300 msg/s: %d sent, %d delivered, %d pending, %s in all", rounds, sent, delivered, g.Pending, time.Since(t0).Round(time.Second))
}

// TestPoisonRateFault sends a malformed entry every 10th message at 300
// msg/s, of four kinds: not JSON, no readings, a NUL byte in the device
// name (valid JSON the database refuses) and a NUL byte in one reading's
// name (the message's other readings are good). Within 30 s of the load's
// end every good reading is in the table and every malformed entry in the
// DLQ. Before, searching batches for the entries the database refused ran
// past the batch's deadline, and good data stayed pending.
func TestPoisonRateFault(t *testing.T) {
	h := faultHarness(t, coretest.Postgres(t))
	// The default takes over entries only a minute after a worker died;
	// 5 s still lets no pending entry wait out the test.
	h.cfg.Ingest.ReclaimIdleMS = 5000
	h.start()
	t0 := time.Now()
	base := time.Now().UTC().Truncate(time.Millisecond)
	l := startLoad(h, 300, func(i int) (string, int) {
		if i%10 != 9 {
			return h.good(base, i)
		}
		ts := base.Add(time.Duration(i) * time.Millisecond)
		switch (i / 10) % 4 {
		case 0:
			return `{"agentUuid":"` + h.agent + `","deviceName":`, 0
		case 1:
			return `{"agentUuid":"` + h.agent + `","deviceName":"d","readings":[]}`, 0
		case 2:
			return h.message("bad\u0000dev", 5, ts, 1), 0
		default:
			m := h.message("part"+strconv.Itoa(i%10), 5, ts, 1)
			return strings.Replace(m, `"name":"r2"`, `"name":"r\u00002"`, 1), 4
		}
	})
	time.Sleep(faultLength(t, 30*time.Second))
	sent, valid, invalid := l.end()
	loadEnd := time.Now()

	coretest.Eventually(t, 30*time.Second, "every good reading in the table", func() bool { return h.rowCount() == valid })
	took := time.Since(loadEnd)
	coretest.Eventually(t, 10*time.Second, "every malformed entry in the DLQ", func() bool { return len(h.deadEntries()) == invalid })
	h.drained(10 * time.Second)
	// Reclaim leaves the entries a worker holds, so none is dead-lettered
	// twice.
	if n := h.dlqLen(); n != int64(invalid) {
		t.Errorf("dead letters = %d for %d malformed entries, want one each", n, invalid)
	}
	for _, d := range h.deadEntries() {
		if strings.Contains(d.Values["data"], `"part`) && !strings.Contains(d.Values["reason"], "1 of 5 readings invalid") {
			t.Errorf("dead letter of a partly valid message: reason %q", d.Values["reason"])
		}
	}
	t.Logf("%d messages at 300 msg/s, %d malformed: %d rows exact %s after the load, %s in all",
		sent, invalid, valid, took.Round(time.Millisecond), time.Since(t0).Round(time.Second))
}

func (h *harness) dlqLen() int64 {
	h.t.Helper()
	n, err := h.store.Len(context.Background(), telemetry.DLQStream(h.tenant))
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

// deadEntries returns the DLQ's entries, one per original entry.
func (h *harness) deadEntries() map[string]streamstore.Entry {
	h.t.Helper()
	es, err := h.store.Range(context.Background(), telemetry.DLQStream(h.tenant), "-", "+", 1<<20)
	if err != nil {
		h.t.Fatal(err)
	}
	byID := make(map[string]streamstore.Entry, len(es))
	for _, en := range es {
		byID[en.Values["originalId"]] = en
	}
	return byID
}
