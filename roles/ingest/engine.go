package ingest

import (
	"context"
	"encoding/json"
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
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// Intervals of the engine's background loops; tests shorten them.
type intervals struct {
	discover  time.Duration // SCAN for new tenant streams
	maintain  time.Duration // trim, reclaim idle pending entries
	sample    time.Duration // lag, depth and pool signals; autoscaling (spec: 5 s)
	replay    time.Duration // probe the database and drain the spool
	processTO time.Duration // bound on finishing a batch once shutdown began
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

	// Set by Start.
	store streamstore.Store
	db    *db.DB
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
}

func newEngine(cfg *config.Config, r *rt.Runtime, every intervals) (*engine, error) {
	e := &engine{
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
	if e.rt.DB == nil || e.rt.Streams == nil {
		panic("BUG: ingest started before the backends")
	}
	e.store, e.db = e.rt.Streams, e.rt.DB
	e.w = newWriter(e.db, e.cfg.InsertMode, e.cfg.CopyMinRows, e.cfg.RealtimeRowsPerInsert)
	if e.spoolOp != nil {
		sp, err := spool.Open(*e.spoolOp)
		if err != nil {
			return fmt.Errorf("open spool (spool.path, DISK_SPOOL_PATH): %w", err)
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

// deadLetter is an entry that can never be written, with the reason.
type deadLetter struct {
	id, payload, reason string
}

// toDLQ writes dead letters to the tenant's dead-letter stream and returns
// the ids it wrote, which the caller may then acknowledge.
func (e *engine) toDLQ(ctx context.Context, stream string, dead []deadLetter) []string {
	tenant, _ := telemetry.TenantOfStream(stream)
	ids := make([]string, 0, len(dead))
	for _, d := range dead {
		_, err := e.store.Add(ctx, telemetry.DLQStream(tenant), map[string]string{
			"originalId": d.id, "stream": stream, "data": d.payload, "reason": d.reason,
			"failedAt": time.Now().UTC().Format(time.RFC3339Nano),
		}, 0)
		if err != nil {
			e.log.Error("write dead letter; the entry stays pending", "stream", stream, "id", d.id, "err", err)
			continue
		}
		e.log.Warn("message sent to the dead-letter stream", "stream", stream, "id", d.id, "reason", d.reason)
		ids = append(ids, d.id)
	}
	e.m.dlqTotal.Add(float64(len(ids)))
	return ids
}

// parsed is one stream entry decoded into a message.
type parsed struct {
	id      string
	payload string
	msg     telemetry.Message
}

// decodeEntries splits entries into messages and dead letters. A message
// without a timestamp gets its entry's time now, so a copy that goes through
// the spool keeps it.
func decodeEntries(entries []streamstore.Entry) ([]parsed, []deadLetter) {
	msgs := make([]parsed, 0, len(entries))
	var dead []deadLetter
	for _, en := range entries {
		data, ok := en.Values[telemetry.StreamField]
		if !ok {
			dead = append(dead, deadLetter{id: en.ID, payload: fmt.Sprint(en.Values), reason: "entry has no data field"})
			continue
		}
		m, err := telemetry.ParseMessage([]byte(data))
		if err != nil {
			dead = append(dead, deadLetter{id: en.ID, payload: data, reason: err.Error()})
			continue
		}
		if m.Timestamp == nil {
			t, err := streamstore.IDTime(en.ID)
			if err != nil {
				t = time.Now()
			}
			m.Timestamp = telemetry.TimestampOf(t)
		}
		msgs = append(msgs, parsed{id: en.ID, payload: data, msg: m})
	}
	return msgs, dead
}

func rowsOf(tenant string, msgs []parsed) []telemetry.Row {
	n := 0
	for i := range msgs {
		n += len(msgs[i].msg.Readings)
	}
	rows := make([]telemetry.Row, 0, n)
	for i := range msgs {
		rows = msgs[i].msg.Rows(tenant, msgs[i].msg.Timestamp.Time, rows)
	}
	return telemetry.Normalize(rows)
}

// errBackend marks a failure of the database rather than of the rows.
var errBackend = errors.New("database unavailable")

// write inserts rows. In realtime mode it commits at most
// READINGS_REALTIME_MAX_ROWS rows per transaction, so small writes land at
// once instead of waiting for one large commit.
func (e *engine) write(ctx context.Context, rows []telemetry.Row) error {
	step := len(rows)
	if e.cfg.InsertMode == "realtime" {
		step = max(1, e.cfg.RealtimeMaxRows)
	}
	for start := 0; start < len(rows); start += step {
		if err := e.writeOnce(ctx, rows[start:min(start+step, len(rows))]); err != nil {
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
// come back wrapped in errBackend; data errors are retried up to MAX_RETRIES
// and returned as they are.
func (e *engine) writeOnce(ctx context.Context, rows []telemetry.Row) error {
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
		e.m.insertDuration.observe(time.Since(t0))
		e.releaseWrite()
		if err == nil || db.IsDataError(err) {
			e.breaker.Record(nil)
		} else if ctx.Err() == nil {
			e.breaker.Record(err)
		}
		if err == nil {
			e.m.inserted.Add(float64(n))
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %w", errBackend, ctx.Err())
		}
		if attempt > e.cfg.MaxRetries {
			if db.IsDataError(err) {
				return err
			}
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

// store writes msgs and reports which entries are done (written, spooled or
// dead-lettered: safe to acknowledge). Entries of a failed backend without a
// spool are not done: they stay pending in the stream.
func (e *engine) storeMessages(ctx context.Context, stream string, msgs []parsed) (done []string, dead []deadLetter, err error) {
	tenant, _ := telemetry.TenantOfStream(stream)
	err = e.write(ctx, rowsOf(tenant, msgs))
	switch {
	case err == nil:
		return ids(msgs), nil, nil
	case errors.Is(err, errBackend):
		if e.spool == nil || ctx.Err() != nil {
			return nil, nil, err
		}
		if serr := e.spoolMessages(stream, msgs); serr != nil {
			return nil, nil, fmt.Errorf("%w; spool: %w", err, serr)
		}
		return ids(msgs), nil, nil
	}
	// A data error: find the messages responsible, one by one.
	for i := range msgs {
		one := msgs[i : i+1]
		werr := e.write(ctx, rowsOf(tenant, one))
		switch {
		case werr == nil:
			done = append(done, one[0].id)
		case errors.Is(werr, errBackend):
			if e.spool != nil && ctx.Err() == nil && e.spoolMessages(stream, one) == nil {
				done = append(done, one[0].id)
			}
		default:
			dead = append(dead, deadLetter{id: one[0].id, payload: one[0].payload,
				reason: fmt.Sprintf("insert failed after %d attempts: %v", e.cfg.MaxRetries+1, werr)})
		}
	}
	return done, dead, nil
}

func ids(msgs []parsed) []string {
	out := make([]string, len(msgs))
	for i := range msgs {
		out[i] = msgs[i].id
	}
	return out
}

func (e *engine) spoolMessages(stream string, msgs []parsed) error {
	arr := make([]telemetry.Message, len(msgs))
	for i := range msgs {
		arr[i] = msgs[i].msg
	}
	data, err := json.Marshal(arr)
	if err != nil {
		return fmt.Errorf("encode spool entry: %w", err)
	}
	if err := e.spool.Append(spool.Entry{Source: stream, Data: data}); err != nil {
		return err
	}
	e.m.spooled.Add(float64(len(msgs)))
	return nil
}

// process handles one batch of one stream: decode, write, dead-letter, then
// acknowledge what is done. It never returns an error for bad input.
func (e *engine) process(ctx context.Context, stream string, entries []streamstore.Entry) {
	if len(entries) == 0 {
		return
	}
	t0 := time.Now()
	tenant, _ := telemetry.TenantOfStream(stream)
	msgs, dead := decodeEntries(entries)
	done, dead2, err := e.storeMessages(ctx, stream, msgs)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("batch not written; it stays in the stream for a retry", "stream", stream, "entries", len(msgs), "err", err)
	}
	done = append(done, e.toDLQ(ctx, stream, append(dead, dead2...))...)
	if len(done) > 0 {
		n, aerr := e.store.Ack(ctx, stream, telemetry.WriterGroup(tenant), done...)
		if aerr != nil {
			// Rows are committed; a redelivery writes nothing twice.
			e.log.Warn("acknowledge batch", "stream", stream, "err", aerr)
		}
		e.m.processed.Add(float64(n))
	}
	e.m.batchDuration.observe(time.Since(t0))
}
