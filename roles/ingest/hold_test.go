package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// hangWriter is a database that accepts connections and never finishes a
// write: every batch runs out of its time.
type hangWriter struct{}

func (hangWriter) Write(ctx context.Context, _ []telemetry.Row) (int64, error) {
	<-ctx.Done()
	return 0, ctx.Err()
}

func (hangWriter) Probe(context.Context) error { return nil }

// flakyWriter fails its first fails writes as an unreachable database
// would, then takes every write.
type flakyWriter struct {
	fails int64
	calls atomic.Int64
}

func (w *flakyWriter) Write(_ context.Context, rows []telemetry.Row) (int64, error) {
	if w.calls.Add(1) <= w.fails {
		return 0, errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	}
	return int64(len(rows)), nil
}

func (w *flakyWriter) Probe(context.Context) error { return nil }

// readPending appends data to the tenant's stream and reads it as
// consumer, so that it is pending as a worker's batch is.
func (h *harness) readPending(consumer string, data ...string) []streamstore.Entry {
	h.t.Helper()
	ctx := context.Background()
	if err := h.store.EnsureGroup(ctx, h.stream(), telemetry.WriterGroup(h.tenant), "0"); err != nil {
		h.t.Fatal(err)
	}
	h.add(data...)
	es, err := h.store.ReadGroup(ctx, h.stream(), telemetry.WriterGroup(h.tenant), consumer, len(data), 0)
	if err != nil || len(es) != len(data) {
		h.t.Fatalf("read %d of %d: %v", len(es), len(data), err)
	}
	return es
}

// detached runs a worker's processDetached of es in the background and
// returns a func that reports whether it has returned.
func detached(ctx context.Context, eng *engine, stream string, es []streamstore.Entry) func() bool {
	var done atomic.Bool
	go func() {
		defer done.Store(true)
		eng.processDetached(ctx, stream, es, newBatchBuf())
	}()
	return done.Load
}

// TestOverBudgetBatchReachesTheDLQIntegration (item: a batch past its time
// budget): a batch that hangs the database while the breaker stays closed
// is not held and retried by its worker with a fresh budget, nor excused;
// it stays pending, reclaim counts its deliveries, and after MAX_RETRIES+1
// of them it goes to the dead-letter stream. Before, it was treated as an
// outage: retried for ever and never dead-lettered.
func TestOverBudgetBatchReachesTheDLQIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.every.processTO = 200 * time.Millisecond
		h.cfg.Ingest.MaxRetries = 1
		h.cfg.Ingest.ReclaimIdleMS = 1
		es := h.readPending("worker", h.message("dev", 2, time.Now(), 1))
		eng := h.startedEngine()
		eng.w = hangWriter{}

		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		eng.processDetached(ctx, h.stream(), es, newBatchBuf())
		if ctx.Err() != nil {
			t.Fatal("the worker held a batch that ran out of its time until its context ended")
		}
		if n := eng.excused.get(h.stream(), es[0].ID); n != 0 {
			t.Errorf("excused deliveries = %d, want 0: the database answered, the batch hung", n)
		}
		coretest.Eventually(t, 10*time.Second, "the hanging entry in the DLQ", func() bool {
			eng.reclaim(ctx, h.stream(), telemetry.WriterGroup(h.tenant))
			return h.dlqLen() == 1
		})
		if d := h.dlq()[0]; d.Values["originalId"] != es[0].ID || !strings.Contains(d.Values["reason"], "times without being acknowledged") {
			t.Errorf("dead letter %v", d.Values)
		}
	})
}

// TestHeldBatchExcusedOncePerDeliveryIntegration (item: excuses per
// retry): a batch held through three failed retries of one delivery has
// one excused delivery, not three, so the delivery limit still means
// deliveries.
func TestHeldBatchExcusedOncePerDeliveryIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.cfg.Ingest.MaxRetries = 0 // one failed attempt opens the breaker
		es := h.readPending("worker", h.message("dev", 2, time.Now(), 1))
		eng := h.startedEngine()
		w := &flakyWriter{fails: 3}
		eng.w = w

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		finished := detached(ctx, eng, h.stream(), es)
		for round := int64(1); round <= w.fails; round++ {
			coretest.Eventually(t, 10*time.Second, "a failed write to open the breaker", func() bool {
				return w.calls.Load() >= round && !eng.breaker.Allow()
			})
			if round < w.fails {
				eng.breaker.Reset()
			}
		}
		if n := eng.excused.get(h.stream(), es[0].ID); n != 1 {
			t.Errorf("excused deliveries after %d failed tries of one delivery = %d, want 1", w.fails, n)
		}
		eng.breaker.Reset()
		coretest.Eventually(t, 10*time.Second, "the held batch to be written", finished)
		if g, err := h.store.Group(ctx, h.stream(), telemetry.WriterGroup(h.tenant)); err != nil || g.Pending != 0 {
			t.Errorf("pending = %d (%v), want 0", g.Pending, err)
		}
	})
}

// TestReclaimLeavesHeldEntriesIntegration (item: reclaim takes held
// entries): while a worker holds a batch behind the breaker, reclaim does
// not take it over, so a message with a refused reading is written and
// dead-lettered once. Before, reclaim wrote it as soon as the breaker
// closed, and the worker's retry wrote it again: two dead letters.
func TestReclaimLeavesHeldEntriesIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.cfg.Ingest.ReclaimIdleMS = 1
		msg := strings.Replace(h.message("dev", 3, time.Now(), 1), `"name":"r1"`, `"name":"r\u00001"`, 1)
		es := h.readPending("worker", msg)
		eng := h.startedEngine()
		eng.breaker.Trip()

		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		finished := detached(ctx, eng, h.stream(), es)
		coretest.Eventually(t, 10*time.Second, "the worker to hold the batch", func() bool { return eng.holding.has(h.stream(), es[0].ID) })
		eng.breaker.Reset()
		eng.reclaim(ctx, h.stream(), telemetry.WriterGroup(h.tenant))
		coretest.Eventually(t, 10*time.Second, "the worker to write its batch", finished)
		if n := h.dlqLen(); n != 1 {
			t.Errorf("dead letters = %d, want 1 (the refused reading, once)", n)
		}
		if got := h.rowCount(); got != 2 {
			t.Errorf("rows = %d, want 2", got)
		}
		if g, err := h.store.Group(ctx, h.stream(), telemetry.WriterGroup(h.tenant)); err != nil || g.Pending != 0 {
			t.Errorf("pending = %d (%v), want 0", g.Pending, err)
		}
	})
}

// TestReclaimCountsOnlyTriedDeliveriesIntegration (item: reclaim claims
// more than it tries): reclaim meets an outage on its first batch. Every
// entry it claimed was tried and excused; the others are not claimed, so
// no entry gains a delivery that counts. Before, it claimed 100 entries,
// tried the first 10 and left 90 with a delivery that was neither tried
// nor excused.
func TestReclaimCountsOnlyTriedDeliveriesIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		const n = 30
		h.cfg.Ingest.BatchSize = 10
		h.cfg.Ingest.MaxRetries = 1 // a claimed entry is tried, not dead-lettered
		h.cfg.Ingest.ReclaimIdleMS = 1
		batch := make([]string, n)
		for i := range batch {
			batch[i] = h.message("dev", 1, time.Now().Add(time.Duration(i)*time.Millisecond), 1)
		}
		h.readPending("dead-consumer", batch...)
		eng := h.startedEngine()
		eng.w = &flakyWriter{fails: 1 << 30}
		time.Sleep(10 * time.Millisecond) // idle past RECLAIM_IDLE_MS

		ctx := context.Background()
		eng.reclaim(ctx, h.stream(), telemetry.WriterGroup(h.tenant))
		pend, err := h.store.PendingEntries(ctx, h.stream(), telemetry.WriterGroup(h.tenant), n)
		if err != nil || len(pend) != n {
			t.Fatalf("pending %d of %d: %v", len(pend), n, err)
		}
		for _, p := range pend {
			if counted := p.Deliveries - eng.excused.get(h.stream(), p.ID); counted != 1 {
				t.Errorf("entry %s: %d deliveries, %d excused; want 1 counted (its first read)", p.ID, p.Deliveries, eng.excused.get(h.stream(), p.ID))
			}
		}
	})
}

// TestHealthOKAfterSpoolRecoversIntegration (item: spoolFailing sticks):
// spool appends failed during an outage; once the database is back and
// the breaker closes, /health says ok again. Before, it stayed degraded
// until a spool append succeeded, which never happens while the database
// takes the batches.
func TestHealthOKAfterSpoolRecoversIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.cfg.Spool.Enabled = true
		h.start()
		coretest.Eventually(t, 10*time.Second, "health ok", func() bool { return healthStatus(h) == "ok" })
		// The state a full spool disk leaves behind an outage.
		h.eng.spoolFailing.Store(true)
		h.eng.breaker.Trip()
		coretest.Eventually(t, 10*time.Second, "health ok after the database is back", func() bool { return healthStatus(h) == "ok" })
		if _, ok := healthBody(h)["spool"]; ok {
			t.Error("health still reports failing spool appends")
		}
	})
}

// TestHangingDatabaseOpensTheBreakerIntegration: a database that answers
// nothing (a network that drops packets) makes every batch run out of its
// time. That is an outage, not poison: the batches open the breaker and
// wait behind it, and none is dead-lettered however long it lasts.
func TestHangingDatabaseOpensTheBreakerIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		h.every.processTO = 100 * time.Millisecond
		h.cfg.Ingest.MaxRetries = 1
		h.cfg.Ingest.ReclaimIdleMS = 1
		var data []string
		for i := range 8 {
			data = append(data, h.message(fmt.Sprintf("dev-%d", i), 2, time.Now(), 1))
		}
		es := h.readPending("worker", data...)
		eng := h.startedEngine()
		eng.w = hangWriter{}

		// The entries one after another, as busy workers would take them;
		// a held batch waits until its context ends.
		for i := range es {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			eng.processDetached(ctx, h.stream(), es[i:i+1], newBatchBuf())
			cancel()
		}
		if eng.breaker.Allow() {
			t.Fatal("every batch ran out of its time on the database, and the breaker is still closed")
		}
		for range 5 {
			eng.reclaim(context.Background(), h.stream(), telemetry.WriterGroup(h.tenant))
		}
		if n := h.dlqLen(); n != 0 {
			t.Errorf("%d entries dead-lettered while the database hung, want 0", n)
		}
	})
}
