package ingest

import (
	"context"
	"github.com/edgeplat/edgeplat/core/rt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestReclaimTakesTheWholeBacklogIntegration: a consumer died holding
// 1,000 entries; one maintenance pass takes them all over and writes them,
// rather than a fixed 100 a pass, which let a large backlog outgrow
// reclaim.
func TestReclaimTakesTheWholeBacklogIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const n = 1000
		group := telemetry.WriterGroup(h.tenant)
		if err := h.store.EnsureGroup(ctx, h.stream(), group, "0"); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Millisecond)
		batch := make([]string, n)
		for i := range batch {
			batch[i] = h.message("dev", 2, now.Add(time.Duration(i)*time.Millisecond), 1)
		}
		h.add(batch...)
		for got := 0; got < n; {
			es, err := h.store.ReadGroup(ctx, h.stream(), group, "dead-consumer", n-got, 0)
			if err != nil || len(es) == 0 {
				t.Fatalf("read %d of %d: %v", got, n, err)
			}
			got += len(es)
		}

		// The engine without its workers: only what maintain does counts.
		h.cfg.Ingest.ReclaimIdleMS = 1
		eng := h.startedEngine()
		time.Sleep(10 * time.Millisecond) // idle past RECLAIM_IDLE_MS
		eng.maintain(ctx)

		g, err := h.store.Group(ctx, h.stream(), group)
		if err != nil {
			t.Fatal(err)
		}
		if g.Pending != 0 {
			t.Errorf("pending after one maintenance pass = %d, want 0", g.Pending)
		}
		if got := h.rowCount(); got != 2*n {
			t.Errorf("rows = %d, want %d", got, 2*n)
		}
	})
}

// TestSettleOutlivesTheBatchDeadlineIntegration: a batch whose time ran
// out on the database still writes its dead letters and acknowledges,
// on a budget of its own. On the batch's context they failed with
// "context deadline exceeded", and the entries stayed pending.
func TestSettleOutlivesTheBatchDeadlineIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		group := telemetry.WriterGroup(h.tenant)
		if err := h.store.EnsureGroup(ctx, h.stream(), group, "0"); err != nil {
			t.Fatal(err)
		}
		h.add(`{not json`, `{"agentUuid":"`+h.agent+`","deviceName":"d","readings":[]}`)
		es, err := h.store.ReadGroup(ctx, h.stream(), group, "worker", 10, 0)
		if err != nil || len(es) != 2 {
			t.Fatalf("read %d, %v", len(es), err)
		}
		eng := h.startedEngine()
		spent, cancel := context.WithDeadline(ctx, time.Now().Add(-time.Second))
		defer cancel()
		if held := eng.process(spent, h.stream(), es, newBatchBuf()); len(held) != 0 {
			t.Errorf("held %d entries, want none: nothing here needs the database", len(held))
		}
		if n := h.dlqLen(); n != 2 {
			t.Errorf("dead letters = %d, want 2", n)
		}
		if g, err := h.store.Group(ctx, h.stream(), group); err != nil || g.Pending != 0 {
			t.Errorf("pending = %d (%v), want 0", g.Pending, err)
		}
	})
}

// startedEngine returns the role's engine, started (backends attached) but
// not running: no worker or loop runs unless the test calls it. It is
// stopped when the test ends.
func (h *harness) startedEngine() *engine {
	h.t.Helper()
	svcs, err := newWithIntervals(h.cfg, h.rt, rt.Backends{DB: h.db, Streams: h.store}, Options{StreamPattern: h.stream(), LogStreamPattern: telemetry.LogsStream(h.tenant)}, h.every)
	if err != nil {
		h.t.Fatal(err)
	}
	eng := svcs[1].(*engine)
	if err := eng.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		if err := eng.Stop(context.Background()); err != nil {
			h.t.Error(err)
		}
	})
	return eng
}
