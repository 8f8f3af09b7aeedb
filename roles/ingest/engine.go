package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/memlimit"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// Intervals of the engine's background loops; tests shorten them.
type intervals struct {
	discover  time.Duration // SCAN for new tenant streams
	maintain  time.Duration // trim, reclaim idle pending entries
	sample    time.Duration // lag, depth and pool signals; autoscaling (5 s)
	replay    time.Duration // probe the database and drain the spool
	processTO time.Duration // bound on one batch, per 4 MiB of its data (processBudget)
	// pattern and logsPattern select the streams to ingest
	// (Options.StreamPattern, Options.LogStreamPattern).
	pattern, logsPattern string
}

var defaultIntervals = intervals{discover: 5 * time.Second, maintain: time.Second, sample: 5 * time.Second, replay: time.Second,
	processTO: 8 * time.Second, pattern: telemetry.IngestionStreamPattern, logsPattern: telemetry.LogsStreamPattern}

// engine is the ingestion service proper: discovery of tenant streams, the
// worker pool, maintenance (trim, reclaim), spool replay and autoscaling.
type engine struct {
	cfg     config.Ingest
	maxLen  int64
	every   intervals
	rt      *rt.Runtime
	log     *slog.Logger
	m       *ingestMetrics
	breaker *breaker.Breaker
	spoolOp *spool.Options // nil: spool disabled
	scaler  *scaler
	prefix  string // consumer name prefix, unique per process
	store   streamstore.Store
	db      *db.DB

	// Set by Start.
	w     writer
	spool *spool.Spool

	mu      sync.Mutex
	streams []string
	wake    chan struct{} // closed and replaced when streams are added

	workerMu  sync.Mutex
	workers   []context.CancelFunc
	workerWG  sync.WaitGroup
	runCtx    context.Context
	nextID    int
	lagMS     atomic.Int64
	saturated atomic.Bool

	// writeSlots bounds concurrent database writes (ingest.write_concurrency);
	// nil means no bound.
	writeSlots chan struct{}
	// bufs bounds the batches in flight and recycles their memory.
	bufs *batchPool

	// spoolFailing is set while spool appends fail (a full disk).
	spoolFailing atomic.Bool
	// excused counts, per pending entry, the deliveries that ended in a
	// backend failure, which do not count towards the delivery limit.
	excused excuses
	// holding lists the entries this process's workers hold for a retry.
	holding held
}

func newEngine(cfg *config.Config, r *rt.Runtime, back rt.Backends, every intervals) (*engine, error) {
	e := &engine{
		store:  back.Streams,
		db:     back.DB,
		cfg:    cfg.Ingest,
		maxLen: int64(cfg.StreamStore.IngestionStreamMaxLen),
		every:  every,
		rt:     r,
		log:    r.Component("ingest"),
		m:      newMetrics(r.Metrics),
		scaler: newScaler(cfg.Ingest.Autoscale),
		wake:   make(chan struct{}),
	}
	if n := writeConcurrency(cfg.Ingest); n > 0 {
		e.writeSlots = make(chan struct{}, n)
	}
	e.bufs = newBatchPool(batchesInFlight(cfg.Ingest))
	host, _ := os.Hostname()
	e.prefix = fmt.Sprintf("%s-%d", host, os.Getpid())
	b, err := breaker.New(breaker.Options{OnChange: func(from, to breaker.State) {
		if to == breaker.Open {
			e.m.breakerOpen.Set(1)
			e.log.Warn("insert circuit breaker opened: database failing", "spool", e.spoolOp != nil)
		} else {
			e.m.breakerOpen.Set(0)
			e.log.Info("insert circuit breaker closed: database healthy")
		}
	}})
	if err != nil {
		return nil, err
	}
	e.breaker = b
	if cfg.Spool.Enabled {
		e.spoolOp = &spool.Options{Dir: cfg.Spool.Path, MaxBytes: int64(cfg.Spool.MaxSizeMB) << 20, Logger: e.log}
	}
	return e, nil
}

func (e *engine) Name() string { return "ingest-workers" }

func (e *engine) Start(ctx context.Context) error {
	e.applyMemoryLimit()
	// Entries wait in the stream until they are rows: a Redis that keeps
	// nothing over a restart loses a backlog serve-api already acknowledged.
	streamstore.CheckPersistence(ctx, e.store, e.log)
	e.w = newWriter(e.db, e.cfg.InsertMode, e.cfg.CopyMinRows, e.cfg.RealtimeRowsPerInsert)
	if e.spoolOp != nil {
		sp, err := spool.Open(*e.spoolOp)
		if err != nil {
			return fmt.Errorf("open spool (%s): %w", config.Label("spool.path"), err)
		}
		e.spool = sp
	}
	if err := e.discover(ctx); err != nil {
		return err
	}
	e.log.Info("ingestion starting", "workers", e.cfg.WorkerCount, "batch_size", e.cfg.BatchSize, "write_concurrency", cap(e.writeSlots),
		"insert_mode", e.cfg.InsertMode, "profile", e.cfg.Profile, "streams", len(e.snapshot()), "spool", e.spool != nil)
	return nil
}

// applyMemoryLimit sets the process's soft memory limit from
// ingest.memory_limit_mb, unless GOMEMLIMIT is set (core/memlimit), and
// logs the limit in force.
func (e *engine) applyMemoryLimit() {
	limit, src := memlimit.Apply(int64(e.cfg.MemoryLimitMB) << 20)
	if src == memlimit.None {
		return
	}
	e.log.Info("soft memory limit", "mib", limit>>20, "from", string(src), "setting", config.Label("ingest.memory_limit_mb"))
}

// Run returns once every worker has finished, written and acknowledged its
// batch: the backends (pool, stream store) stop after this service, so a
// graceful stop never fails the last batches and leaves them pending.
func (e *engine) Run(ctx context.Context) error {
	e.workerMu.Lock()
	e.runCtx = ctx
	e.workerMu.Unlock()
	for range e.cfg.WorkerCount {
		e.addWorker()
	}
	var wg sync.WaitGroup
	loops := []struct {
		every time.Duration
		fn    func(context.Context)
	}{
		{e.every.discover, func(ctx context.Context) {
			if err := e.discover(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("discover tenant streams", "err", err)
			}
		}},
		{e.every.maintain, e.maintain},
		{e.every.sample, e.sampleAndScale},
		{e.every.replay, e.replayLoop},
	}
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t := time.NewTicker(l.every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					l.fn(ctx)
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		e.logsLoop(ctx)
	}()
	<-ctx.Done()
	wg.Wait()
	e.workerWG.Wait()
	return nil
}

// Stop closes the spool; lifecycle calls it after Run has returned, so no
// worker appends to it any more.
func (e *engine) Stop(context.Context) error {
	if e.spool != nil {
		return e.spool.Close()
	}
	return nil
}

// discover finds tenant ingestion streams and makes sure each has the
// writers' consumer group, so a new tenant is picked up without a restart.
func (e *engine) discover(ctx context.Context) error {
	added, err := e.newStreams(ctx, e.every.pattern, e.snapshot(), telemetry.WriterGroup)
	if err != nil {
		return err
	}
	if len(added) > 0 {
		e.mu.Lock()
		e.streams = append(e.streams, added...)
		close(e.wake)
		e.wake = make(chan struct{})
		e.mu.Unlock()
		e.log.Info("ingesting new tenant streams", "streams", added)
	}
	return nil
}

// newStreams scans for streams matching pattern that are not in known and
// gives each its consumer group (named by group from the tenant), so a new
// tenant is picked up without a restart. It returns those it set up before
// the first failure.
func (e *engine) newStreams(ctx context.Context, pattern string, known []string, group func(tenant string) string) ([]string, error) {
	found, err := e.store.Streams(ctx, pattern)
	if err != nil {
		return nil, fmt.Errorf("scan streams %s: %w", pattern, err)
	}
	have := make(map[string]bool, len(known))
	for _, s := range known {
		have[s] = true
	}
	var added []string
	for _, s := range found {
		if have[s] {
			continue
		}
		tenant, err := telemetry.TenantOfStream(s)
		if err != nil {
			continue
		}
		if err := e.store.EnsureGroup(ctx, s, group(tenant), "0"); err != nil {
			return added, fmt.Errorf("create consumer group on %s: %w", s, err)
		}
		added = append(added, s)
	}
	return added, nil
}

func (e *engine) snapshot() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.streams...)
}

func (e *engine) wakeCh() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.wake
}

func (e *engine) workerCount() int {
	e.workerMu.Lock()
	defer e.workerMu.Unlock()
	return len(e.workers)
}

func (e *engine) addWorker() {
	e.workerMu.Lock()
	defer e.workerMu.Unlock()
	if e.runCtx == nil || e.runCtx.Err() != nil {
		return
	}
	ctx, cancel := context.WithCancel(e.runCtx)
	e.workers = append(e.workers, cancel)
	e.nextID++
	id := e.nextID
	consumer := e.prefix + "-" + strconv.Itoa(id)
	e.workerWG.Add(1)
	go func() {
		defer e.workerWG.Done()
		e.work(ctx, consumer, id)
	}()
	e.m.workers.Set(float64(len(e.workers)))
}

// removeWorker stops the newest worker after its current batch.
func (e *engine) removeWorker() {
	e.workerMu.Lock()
	defer e.workerMu.Unlock()
	if len(e.workers) == 0 {
		return
	}
	e.workers[len(e.workers)-1]()
	e.workers = e.workers[:len(e.workers)-1]
	e.m.workers.Set(float64(len(e.workers)))
}

var _ lifecycle.Service = (*engine)(nil)

// errBackend marks a failure of the database rather than of the rows.
var errBackend = errors.New("database unavailable")

// write inserts rows. In realtime mode it commits at most
// READINGS_REALTIME_MAX_ROWS rows per transaction, so small writes land at
// once instead of waiting for one large commit. retryData is as for
// writeOnce.
func (e *engine) write(ctx context.Context, rows []telemetry.Row, retryData bool) error {
	step := len(rows)
	if e.cfg.InsertMode == "realtime" {
		step = max(1, e.cfg.RealtimeMaxRows)
	}
	for start := 0; start < len(rows); start += step {
		if err := e.writeOnce(ctx, rows[start:min(start+step, len(rows))], retryData); err != nil {
			return err
		}
	}
	return nil
}

// writeConcurrency resolves ingest.write_concurrency: 0 is the number of
// CPUs in copy mode, where a COPY keeps a client CPU busy and more of them
// at once only contend in the database, and no bound in the insert modes,
// whose small transactions wait mostly on commits and gain from overlap.
func writeConcurrency(in config.Ingest) int {
	if in.WriteConcurrency > 0 {
		return in.WriteConcurrency
	}
	if in.InsertMode == "copy" {
		return runtime.GOMAXPROCS(0)
	}
	return 0
}

// acquireWrite waits for a write slot; releaseWrite returns it.
func (e *engine) acquireWrite(ctx context.Context) error {
	if e.writeSlots == nil {
		return nil
	}
	select {
	case e.writeSlots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *engine) releaseWrite() {
	if e.writeSlots != nil {
		<-e.writeSlots
	}
}

// writeOnce inserts rows, retrying. Backend failures feed the breaker and
// come back wrapped in errBackend; they never use up a message's retries,
// since an unavailable database says nothing about the rows. Data errors
// are returned as they are: at once when !retryData (a batch, which the
// caller splits to find the message at fault), else after MAX_RETRIES
// retries (one message, which then goes to the dead-letter stream).
func (e *engine) writeOnce(ctx context.Context, rows []telemetry.Row, retryData bool) error {
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		if !e.breaker.Allow() {
			return fmt.Errorf("%w: circuit breaker open", errBackend)
		}
		if err := e.acquireWrite(ctx); err != nil {
			return fmt.Errorf("%w: %w", errBackend, err)
		}
		t0 := time.Now()
		n, err := e.w.Write(ctx, rows)
		e.m.insertDuration.Observe(time.Since(t0).Seconds())
		e.releaseWrite()
		if err == nil || db.IsDataError(err) {
			e.breaker.Record(nil)
		} else if !errors.Is(ctx.Err(), context.Canceled) {
			// A batch that ran out of its time on the database counts
			// against it as a refused connection does: a database that
			// hangs (a network that drops packets) must open the breaker,
			// so batches wait behind it instead of being dead-lettered
			// as batches that hang. One hanging batch among good ones
			// does not open it, and goes to reclaim.
			e.breaker.Record(err)
		}
		if err == nil {
			// The database takes rows, so the spool is not needed: an
			// append failure from an outage that is over says nothing now.
			e.spoolFailing.Store(false)
			e.m.inserted.Add(float64(n))
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errBackend, ctx.Err())
		}
		if db.IsDataError(err) && (!retryData || attempt > e.cfg.MaxRetries) {
			return err
		}
		if attempt > e.cfg.MaxRetries {
			// Every attempt of this batch failed on the backend: that is
			// evidence enough, whatever the window's ratio says after a
			// long healthy stretch.
			e.breaker.Trip()
			return fmt.Errorf("%w: %w", errBackend, err)
		}
		e.m.insertRetries.Inc()
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %w", errBackend, ctx.Err())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}
