package ingest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestTwoIngestProcessesIntegration runs two ingest engines as two
// processes would (their own database pools, Redis clients, registries
// and consumer names) on one tenant stream: they split a backlog, each
// autoscaler scales up while the shared lag is high and back down once it
// is calm, without reversing in between, and entries a dead consumer left
// pending are written by the survivor exactly once.
func TestTwoIngestProcessesIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	dbc := coretest.Postgres(t)
	redisAddr := coretest.RedisAddr(t)
	var hs [2]*harness
	for i := range hs {
		store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = newHarness(t, dbc, store)
		c := &hs[i].cfg.Ingest
		c.WorkerCount, c.BatchSize = 1, 20
		c.Autoscale.MinWorkers, c.Autoscale.MaxWorkers = 1, 4
		c.Autoscale.LagScaleUpMS, c.Autoscale.LagCriticalMS, c.Autoscale.LagTargetMS = 200, 60_000, 200
		c.Autoscale.CooldownMS, c.Autoscale.ScaleDownStableChecks = 200, 3
		c.Autoscale.DBBlockPct = 100
	}
	a, b := hs[0], hs[1]
	b.tenant = a.tenant // one stream, one consumer group
	ctx := context.Background()

	const n, readings = 3000, 5
	now := time.Now().UTC().Truncate(time.Millisecond)
	batch := make([]string, n)
	for i := range batch {
		batch[i] = a.message("dev", readings, now.Add(time.Duration(i)*time.Millisecond), float64(i))
	}
	a.add(batch...)

	engines := [2]*engine{a.startAs("proc-a"), b.startAs("proc-b")}
	// Each engine's worker count after each change: the autoscalers'
	// decisions, in order.
	var mu sync.Mutex
	counts := [2][]int{{1}, {1}}
	watch, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, e := range engines {
		wg.Go(func() {
			for lifecycle.Sleep(watch, 10*time.Millisecond) {
				mu.Lock()
				// 0: the workers have not started yet.
				if w := e.workerCount(); w != 0 && w != counts[i][len(counts[i])-1] {
					counts[i] = append(counts[i], w)
				}
				mu.Unlock()
			}
		})
	}
	a.drained(60 * time.Second)
	coretest.Eventually(t, 30*time.Second, "both autoscalers back at the minimum", func() bool {
		return engines[0].workerCount() == 1 && engines[1].workerCount() == 1
	})
	stopWatch()
	wg.Wait()
	for i, e := range engines {
		if w := e.workerCount(); w != counts[i][len(counts[i])-1] {
			counts[i] = append(counts[i], w)
		}
	}
	if got := a.rowCount(); got != n*readings {
		t.Errorf("rows = %d, want %d", got, n*readings)
	}
	for i, h := range hs {
		processed := coretest.MetricValue(t, h.rt.Metrics, "edgeplat_ingestion_messages_processed_total", nil)
		if processed == 0 || processed == n {
			t.Errorf("process %d processed %g of %d messages, want a share", i, processed, n)
		}
		// Up while the shared lag is high, then down: a reversal in
		// between would be the two autoscalers fighting over one signal.
		seq, peaked := counts[i], false
		for j := 1; j < len(seq); j++ {
			if seq[j] > 4 || seq[j] < 1 {
				t.Errorf("process %d: %d workers, outside 1..4 (%v)", i, seq[j], seq)
			}
			if seq[j] < seq[j-1] {
				peaked = true
			} else if peaked {
				t.Errorf("process %d scaled up again after scaling down: %v", i, seq)
				break
			}
		}
		t.Logf("process %d: processed %g messages, workers %v", i, processed, seq)
	}

	// A consumer that read entries and died (SIGKILL) leaves them
	// pending; with both processes stopped, it takes the next 500 whole.
	a.stop()
	b.stop()
	group := telemetry.WriterGroup(a.tenant)
	for i := range batch[:500] {
		batch[i] = a.message("dev", readings, now.Add(time.Hour+time.Duration(i)*time.Millisecond), float64(i))
	}
	a.add(batch[:500]...)
	for got := 0; got < 500; {
		es, err := a.store.ReadGroup(ctx, a.stream(), group, "proc-dead-1", 500-got, 0)
		if err != nil || len(es) == 0 {
			t.Fatalf("dead consumer read %d of 500: %v", got, err)
		}
		got += len(es)
	}
	a.startAs("proc-a2")
	a.drained(60 * time.Second)
	if got := a.rowCount(); got != (n+500)*readings {
		t.Errorf("rows after the reclaim = %d, want %d", got, (n+500)*readings)
	}
	if d := a.dlq(); len(d) != 0 {
		t.Errorf("%d dead letters, want none", len(d))
	}
	if processed := coretest.MetricValue(t, a.rt.Metrics, "edgeplat_ingestion_messages_processed_total", nil); processed != 500 {
		t.Errorf("the survivor processed %g messages, want the dead consumer's 500", processed)
	}
}

// startAs runs the role's services until stop, under a consumer name
// prefix of its own unless prefix is empty: two engines of one test
// process would otherwise both be <host>-<pid>, one consumer to Redis,
// where two processes are two.
func (h *harness) startAs(prefix string) *engine {
	h.t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	// A restart registers its metrics again, in a registry of its own.
	h.rt = &rt.Runtime{Logger: h.rt.Logger, Metrics: metrics.NewRegistry(), Health: h.rt.Health}
	// Only this tenant's stream: parallel tests share one Redis and must
	// not take each other's entries.
	svcs, err := newWithIntervals(h.cfg, h.rt, rt.Backends{DB: h.db, Streams: h.store},
		Options{StreamPattern: h.stream(), LogStreamPattern: telemetry.LogsStream(h.tenant)}, h.every)
	if err != nil {
		h.t.Fatal(err)
	}
	h.eng = svcs[1].(*engine)
	if prefix != "" {
		h.eng.prefix = prefix
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- lifecycle.Run(ctx, lifecycle.Options{Logger: h.rt.Logger}, svcs...) }()
	return h.eng
}
