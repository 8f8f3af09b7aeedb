package outbound

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Transport is a destination's connection (implemented by publish/dest).
type Transport interface {
	Connected() bool
	// Changes is signalled on every connect and disconnect. Signals may be
	// coalesced: the worker reads Connected after each one.
	Changes() <-chan struct{}
	// Send delivers msgs in order; errs[i] is nil only when the peer
	// acknowledged msgs[i]. Errors wrapping dest.ErrNotConnected, or any
	// error that is not a *dest.RejectedError, are transient: the message
	// was not delivered and must wait. A *dest.RejectedError is the peer
	// refusing the message itself. Send must be safe for concurrent use
	// and return once ctx ends.
	Send(ctx context.Context, msgs []dest.Message) []error
}

// Queue is the offline queue; a *store.Queue satisfies it.
type Queue interface {
	Enqueue(ctx context.Context, dest int64, rec store.Record) (int64, error)
	Ready(ctx context.Context, dest int64, limit int, now time.Time) ([]store.QueuedRecord, error)
	Ack(ctx context.Context, dest int64, ids []int64) (int64, error)
	Reject(ctx context.Context, dest, id int64, reason string, now time.Time) (deadLettered bool, err error)
	Stats(ctx context.Context, dest int64) (store.QueueStats, error)
	// KeepSent, MarkSent and ApplyReceipts keep records until the cloud's
	// receipt (docs/agent-delivery.md, section Delivery receipts).
	KeepSent(ctx context.Context, dest int64, recs []store.Record, retryAt time.Time) error
	MarkSent(ctx context.Context, dest int64, ids []int64, retryAt time.Time) (int64, error)
	ApplyReceipts(ctx context.Context, dest int64, r control.Receipts) (int64, error)
}

// Item is one message offered to a destination.
type Item struct {
	MsgID   string
	Topic   string
	Payload []byte
	// Critical marks alerts and events, which the queue evicts only after
	// every ordinary record.
	Critical bool
	// Ephemeral marks heartbeats: they are never queued, and are dropped
	// and counted when they cannot go out at once, so outages silence them.
	Ephemeral bool
}

// Mode is a destination's publish mode (docs/agent.md, section
// Publishing).
type Mode string

// The publish modes.
const (
	ModeDirect     Mode = "direct"
	ModeBufferOnly Mode = "buffer-only"
	ModeRecovering Mode = "recovering"
)

// Defaults of Options.
const (
	DefaultInputCapacity = 256
	DefaultMaxSendBatch  = 64
	// DefaultReceiptWait is how long a sent record waits for its receipt
	// before it is sent again.
	DefaultReceiptWait = 30 * time.Second
)

// Options configure a Worker.
type Options struct {
	Destination int64
	// Name labels logs; "destination-<id>" when empty.
	Name      string
	Transport Transport
	Queue     Queue
	// QueueOptions supplies the flush settings. When zero they are taken
	// from Queue if it has an Options method (as *store.Queue does), and
	// are store.DefaultQueueOptions otherwise.
	QueueOptions store.QueueOptions
	Logger       *slog.Logger
	// Now is the clock for retry waits and Status times; time.Now when nil.
	Now func() time.Time
	// InputCapacity bounds the items waiting in memory; past it Offer
	// writes to the queue. DefaultInputCapacity when zero.
	InputCapacity int
	// MaxSendBatch bounds the items of one direct Send.
	// DefaultMaxSendBatch when zero.
	MaxSendBatch int
	// Receipts keeps every record with a v2 msgId that the destination
	// acknowledged until ApplyReceipts covers it, sending it again after
	// ReceiptWait (DefaultReceiptWait when zero) without one. Only the
	// platform destination's cloud sends receipts.
	Receipts    bool
	ReceiptWait time.Duration
}

// Status is a worker's state for the buffer status endpoint and the
// dashboard. The embedded QueueStats are the destination's queue as the
// store counts it, across restarts; the worker's own counters start at
// zero with the process.
type Status struct {
	Name      string `json:"name"`
	Mode      Mode   `json:"mode"`
	Connected bool   `json:"connected"`
	// LastFlushAttempt is the start of the latest flush cycle; zero when
	// none ran.
	LastFlushAttempt time.Time `json:"lastFlushAttempt,omitzero"`
	// LastFlushSuccess is when a cycle last had a batch delivered or
	// found no record ready; zero when none did.
	LastFlushSuccess time.Time `json:"lastFlushSuccess,omitzero"`
	// Delivered counts items sent directly and acknowledged.
	Delivered int64 `json:"delivered"`
	// Replayed counts queued records delivered by flush cycles.
	Replayed int64 `json:"replayed"`
	// Buffered counts records this worker queued.
	Buffered int64 `json:"buffered"`
	// EphemeralDropped counts ephemeral items that could not go out at once.
	EphemeralDropped int64 `json:"ephemeralDropped"`
	// Refused counts items the queue did not take, whatever the reason
	// (full, too large, a storage error): those items are lost.
	Refused int64 `json:"refused"`
	// HeldForReceipt counts direct sends the destination acknowledged
	// that wait in memory for their receipt; those without one within 2 s
	// are written to the queue as awaiting (docs/agent-delivery.md).
	HeldForReceipt int64  `json:"heldForReceipt"`
	LastError      string `json:"lastError,omitempty"`
	store.QueueStats
}

// refusalLogEvery bounds the warnings about refused items: a full queue
// under dropPolicy newest refuses every item of an outage.
const refusalLogEvery = 10 * time.Second

type runState int

const (
	notStarted runState = iota
	running
	ended
)

// Worker publishes to one destination. Its methods are safe for
// concurrent use.
type Worker struct {
	o    Options
	qo   store.QueueOptions
	log  *slog.Logger
	in   chan Item
	kick chan struct{} // asks the flusher for a cycle; coalesces
	// depth tells Run that Offer queued a record, so the depth trigger is
	// checked on Run's goroutine rather than once per overflowing Offer.
	depth chan struct{}

	// life orders Offer's sends on in before Run's final drain: Offer
	// sends only under the read lock while running.
	life  sync.RWMutex
	state runState

	// readyMu keeps the flusher's Ready from seeing a refused item between
	// its Enqueue and its Reject, when it would look ready at once and be
	// sent, and rejected, a second time for one refusal.
	readyMu sync.Mutex

	// unacked are records the destination acknowledged whose Ack failed
	// (a full disk): the next cycle retries the Ack before it reads or
	// sends anything, so they are not sent again. Only the flusher uses
	// it.
	unacked      []int64
	unackedBytes int64

	// rk keeps sent records until their receipt; nil without receipts.
	rk *receiptKeeper

	mu      sync.Mutex
	mode    Mode
	gen     int // bumped on entering recovering; see cycleResult
	c       counters
	lastErr string
	// refusals since the last warning, and when that was
	refusedUnlogged int64
	refusedLogAt    time.Time
}

type counters struct {
	delivered, replayed, buffered, ephemeralDropped, refused int64
	lastAttempt, lastSuccess                                 time.Time
	m                                                        Metrics
}

// Metrics are a worker's counters for Prometheus, from zero at New.
type Metrics struct {
	DeliveredBytes int64 // of the items sent directly and acknowledged
	ReplayedBytes  int64 // of the queued records delivered by flush cycles
	// SendFailures counts messages a Send did not deliver for a transient
	// cause; Rejections those the destination refused.
	SendFailures, Rejections int64
	// StoreErrors counts items the queue did not take for a storage
	// error (a full disk), not for its limits.
	StoreErrors int64
	// Flush cycles by how they ended: some records delivered, nothing
	// ready, or an error.
	FlushDelivered, FlushEmpty, FlushFailed int64
	// Receipts counts the receipts applied; Receipted the records they
	// deleted.
	Receipts, Receipted int64
}

// Metrics returns the worker's counters with the totals Status has, less
// the transport's and the queue's parts, so a scrape reads no store.
func (w *Worker) Metrics() (Metrics, Status) {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := w.c.m
	if w.rk != nil {
		m.Receipts, m.Receipted = w.rk.receipts.Load(), w.rk.receipted.Load()
	}
	return m, w.statusLocked()
}

// statusLocked is the part of Status the worker keeps itself; w.mu held.
func (w *Worker) statusLocked() Status {
	var held int64
	if w.rk != nil {
		held = w.rk.heldGauge.Load()
	}
	return Status{
		HeldForReceipt:   held,
		Name:             w.o.Name,
		Mode:             w.mode,
		LastFlushAttempt: w.c.lastAttempt,
		LastFlushSuccess: w.c.lastSuccess,
		Delivered:        w.c.delivered,
		Replayed:         w.c.replayed,
		Buffered:         w.c.buffered,
		EphemeralDropped: w.c.ephemeralDropped,
		Refused:          w.c.refused,
		LastError:        w.lastErr,
	}
}

// New checks o and builds a Worker. It does no I/O.
func New(o Options) (*Worker, error) {
	if o.Transport == nil {
		return nil, errors.New("outbound worker: Transport is required")
	}
	if o.Queue == nil {
		return nil, errors.New("outbound worker: Queue is required")
	}
	if o.InputCapacity < 0 || o.MaxSendBatch < 0 {
		return nil, fmt.Errorf("outbound worker: InputCapacity (%d) and MaxSendBatch (%d) must not be negative",
			o.InputCapacity, o.MaxSendBatch)
	}
	if o.InputCapacity == 0 {
		o.InputCapacity = DefaultInputCapacity
	}
	if o.MaxSendBatch == 0 {
		o.MaxSendBatch = DefaultMaxSendBatch
	}
	if o.Name == "" {
		o.Name = fmt.Sprintf("destination-%d", o.Destination)
	}
	if o.ReceiptWait < 0 {
		return nil, fmt.Errorf("outbound worker: ReceiptWait (%s) must not be negative", o.ReceiptWait)
	}
	if o.ReceiptWait == 0 {
		o.ReceiptWait = DefaultReceiptWait
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	qo := o.QueueOptions
	if qo == (store.QueueOptions{}) {
		if q, ok := o.Queue.(interface{ Options() store.QueueOptions }); ok {
			qo = q.Options()
		} else {
			qo = store.DefaultQueueOptions()
		}
	}
	if err := qo.Validate(); err != nil {
		return nil, fmt.Errorf("outbound worker %s: %w", o.Name, err)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Worker{
		o:     o,
		qo:    qo,
		log:   log.With("component", "outbound", "destination", o.Destination, "name", o.Name),
		in:    make(chan Item, o.InputCapacity),
		kick:  make(chan struct{}, 1),
		depth: make(chan struct{}, 1),
		// Nothing is sent before Run decides from the connection, and
		// Offer writes to the queue meanwhile.
		mode: ModeBufferOnly,
	}
	if o.Receipts {
		w.rk = &receiptKeeper{dest: o.Destination, name: o.Name, queue: o.Queue, wait: o.ReceiptWait, now: o.Now,
			failed: func(records int, err error) {
				var full *store.FullError
				w.mu.Lock()
				if !errors.As(err, &full) && !errors.Is(err, store.ErrRecordTooLarge) {
					w.c.m.StoreErrors++
				}
				w.lastErr = err.Error()
				w.mu.Unlock()
				w.log.Warn("sent records not kept until their receipt", "records", records, "error", err)
			}}
	}
	return w, nil
}

// Mode returns the current publish mode.
func (w *Worker) Mode() Mode {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.mode
}

// Status returns the worker's counters with the queue's statistics. On a
// store error the worker's own fields are still filled in.
func (w *Worker) Status(ctx context.Context) (Status, error) {
	qs, err := w.o.Queue.Stats(ctx, w.o.Destination)
	connected := w.o.Transport.Connected()
	w.mu.Lock()
	st := w.statusLocked()
	w.mu.Unlock()
	st.Connected, st.QueueStats = connected, qs
	if err != nil {
		return st, fmt.Errorf("status of %s: %w", w.o.Name, err)
	}
	return st, nil
}

// Offer hands it to the worker without waiting for the destination. While
// Run runs, the mode is not buffer-only and the input buffer has room the
// item waits there; otherwise it is written to the offline queue at once (ephemeral items are dropped
// and counted instead). The error is the queue's when it did not take the
// item (errors.As a *store.FullError, errors.Is store.ErrRecordTooLarge);
// such an item is counted as refused.
func (w *Worker) Offer(ctx context.Context, it Item) error {
	w.life.RLock()
	// While buffering, the item goes to the store before Offer returns, so
	// a crash in an outage loses nothing that was offered; in the other
	// modes it waits in memory only as long as a send takes.
	buffering := w.Mode() == ModeBufferOnly
	if w.state == running && (it.Ephemeral || !buffering) {
		select {
		case w.in <- it:
			w.life.RUnlock()
			return nil
		default:
		}
	}
	w.life.RUnlock()
	if it.Ephemeral {
		w.dropEphemeral(1)
		return nil
	}
	// The caller's context may be ending (an endpoint being restarted);
	// the item was offered and must still reach the store.
	if err := w.enqueue(context.WithoutCancel(ctx), it); err != nil {
		return err
	}
	// The connection came back while this item was being written: the
	// recovery's flush may already have found the queue empty, so another
	// takes it, rather than the next flush interval.
	if buffering && w.Mode() != ModeBufferOnly {
		w.kickFlush()
	}
	select {
	case w.depth <- struct{}{}:
	default:
	}
	return nil
}

// Run publishes until ctx ends, then queues what is still in memory and
// returns. It returns an error when called more than once, or when items
// could not be queued at the end (they are counted as refused).
func (w *Worker) Run(ctx context.Context) error {
	w.life.Lock()
	if w.state != notStarted {
		w.life.Unlock()
		return fmt.Errorf("outbound worker %s: Run called twice", w.o.Name)
	}
	w.state = running
	w.life.Unlock()

	// Items taken from the input buffer, and records a destination
	// acknowledged, must reach the store even when ctx has just ended:
	// otherwise they would be lost, or sent twice.
	persist := context.WithoutCancel(ctx)
	fctx, stopFlusher := context.WithCancel(ctx)
	results := make(chan cycleResult, 1)
	var wg sync.WaitGroup
	wg.Go(func() { w.flusher(fctx, persist, results) })
	var keeper sync.WaitGroup
	if w.rk != nil {
		w.rk.ch = make(chan []store.Record, keepQueue)
		keeper.Go(func() { w.rk.run(persist) })
	}

	w.loop(ctx, persist, results)
	if w.rk != nil {
		// The loop was the only sender: what it handed over is kept
		// before Run returns.
		close(w.rk.ch)
		keeper.Wait()
	}

	stopFlusher()
	wg.Wait()
	w.life.Lock()
	w.state = ended
	w.life.Unlock()
	w.setMode(ModeBufferOnly, "worker stopped")
	var errs []error
	for {
		select {
		case it := <-w.in:
			if it.Ephemeral {
				w.dropEphemeral(1)
				continue
			}
			if err := w.enqueue(persist, it); err != nil {
				errs = append(errs, err)
			}
			continue
		default:
		}
		break
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("outbound worker %s: queue items at stop: %w", w.o.Name, err)
	}
	return nil
}

// loop is Run's goroutine: it sends directly, queues, and reacts to the
// connection, the flush timer and the flusher's results until ctx ends.
func (w *Worker) loop(ctx, persist context.Context, results <-chan cycleResult) {
	changes := w.o.Transport.Changes()
	ticker := time.NewTicker(time.Duration(w.qo.FlushIntervalMS) * time.Millisecond)
	defer ticker.Stop()
	// Records awaiting a receipt are due again at the end of their wait,
	// which the flush interval may be far from.
	var receiptDue <-chan time.Time
	if w.rk != nil {
		rt := time.NewTicker(max(w.o.ReceiptWait/4, 50*time.Millisecond))
		defer rt.Stop()
		receiptDue = rt.C
	}

	if w.o.Transport.Connected() {
		to := ModeDirect
		if st, err := w.o.Queue.Stats(ctx, w.o.Destination); err != nil || st.Records > 0 {
			to = ModeRecovering
		}
		w.setMode(to, "connected at start")
		w.kickFlush()
	}

	batch := make([]Item, 0, w.o.MaxSendBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
			w.connectionChanged()
		case <-ticker.C:
			w.flushTick()
		case <-receiptDue:
			// A cycle sends only the records whose wait is over.
			if st, ok := w.connectedStats(ctx, "read records awaiting a receipt"); ok && st.Awaiting > 0 {
				w.kickFlush()
			}
		case r := <-results:
			w.cycleEnded(r)
		case <-w.depth:
			w.checkDepth(ctx)
		case it := <-w.in:
			batch = append(batch[:0], it)
			for len(batch) < w.o.MaxSendBatch {
				select {
				case it := <-w.in:
					batch = append(batch, it)
					continue
				default:
				}
				break
			}
			// A disconnect signalled meanwhile spares a Send bound to
			// fail.
			select {
			case <-changes:
				w.connectionChanged()
			default:
			}
			if w.handle(ctx, persist, batch) {
				w.checkDepth(ctx)
			}
			clear(batch) // drop the payloads
		}
	}
}

// handle sends batch directly, or queues it in buffer-only mode, and
// reports whether it queued anything.
func (w *Worker) handle(ctx, persist context.Context, batch []Item) (queued bool) {
	if w.Mode() == ModeBufferOnly {
		for _, it := range batch {
			if it.Ephemeral {
				w.dropEphemeral(1)
				continue
			}
			if w.enqueue(persist, it) == nil {
				queued = true
			}
		}
		return queued
	}
	msgs := make([]dest.Message, len(batch))
	for i, it := range batch {
		msgs[i] = dest.Message{Topic: it.Topic, Payload: it.Payload}
	}
	errs := w.send(ctx, msgs)
	var delivered, deliveredBytes, failed, rejected int64
	var transient error
	var keep []store.Record
	for i, it := range batch {
		switch err := errs[i]; {
		case err == nil:
			delivered++
			deliveredBytes += int64(len(it.Payload))
			if w.rk.awaits(it) {
				keep = append(keep, record(it))
			}
		case dest.IsRejected(err):
			rejected++
			if w.rejectItem(persist, it, err) {
				queued = true
			}
		default:
			failed++
			if transient == nil {
				transient = err
			}
			if it.Ephemeral {
				w.dropEphemeral(1)
				continue
			}
			if w.enqueue(persist, it) == nil {
				queued = true
			}
		}
	}
	if len(keep) > 0 {
		// Blocks only while the keeper is keepQueue batches behind: the
		// store's pace bounds what is held in memory.
		w.rk.ch <- keep
	}
	w.mu.Lock()
	w.c.delivered += delivered
	w.c.m.DeliveredBytes += deliveredBytes
	w.c.m.SendFailures += failed
	w.c.m.Rejections += rejected
	if transient != nil {
		w.lastErr = transient.Error()
	}
	w.mu.Unlock()
	if transient != nil {
		w.setMode(ModeBufferOnly, "send failed: "+transient.Error())
	}
	return queued
}

// send calls the transport and makes sure there is one result per
// message: a missing result cannot be taken for a delivery.
func (w *Worker) send(ctx context.Context, msgs []dest.Message) []error {
	errs := w.o.Transport.Send(ctx, msgs)
	if len(errs) == len(msgs) {
		return errs
	}
	out := make([]error, len(msgs))
	for i := range out {
		if i < len(errs) {
			out[i] = errs[i]
		} else {
			out[i] = fmt.Errorf("transport returned %d results for %d messages: %w", len(errs), len(msgs), dest.ErrNotConnected)
		}
	}
	return out
}

// rejectItem queues an item the destination refused and rejects it once,
// so the queue's retry waits and dead-letter rule decide its fate rather
// than this worker. It reports whether the item was queued.
func (w *Worker) rejectItem(ctx context.Context, it Item, cause error) bool {
	if it.Ephemeral {
		w.dropEphemeral(1)
		return false
	}
	var rej *dest.RejectedError
	errors.As(cause, &rej)
	w.readyMu.Lock()
	id, err := w.o.Queue.Enqueue(ctx, w.o.Destination, record(it))
	if err != nil {
		w.readyMu.Unlock()
		w.refused(it, err)
		return false
	}
	dead, err := w.o.Queue.Reject(ctx, w.o.Destination, id, rej.Reason, w.o.Now())
	w.readyMu.Unlock()
	w.mu.Lock()
	w.c.buffered++
	w.lastErr = cause.Error()
	w.mu.Unlock()
	if err != nil {
		// The record stays queued with no rejection counted; it is
		// retried by the next flush cycle.
		w.noteError(fmt.Errorf("reject %s: %w", it.MsgID, err))
		w.log.Warn("record a refusal in the offline queue", "msg_id", it.MsgID, "error", err)
		return true
	}
	w.log.Warn("destination refused a message", "msg_id", it.MsgID, "reason", rej.Reason, "dead_lettered", dead)
	return true
}

// enqueue queues it, counting the outcome.
func (w *Worker) enqueue(ctx context.Context, it Item) error {
	if _, err := w.o.Queue.Enqueue(ctx, w.o.Destination, record(it)); err != nil {
		w.refused(it, err)
		return fmt.Errorf("queue %s for %s: %w", it.MsgID, w.o.Name, err)
	}
	w.mu.Lock()
	w.c.buffered++
	w.mu.Unlock()
	return nil
}

func record(it Item) store.Record {
	return store.Record{MsgID: it.MsgID, Topic: it.Topic, Payload: it.Payload, Critical: it.Critical}
}

// refused counts an item the queue did not take and warns, at most every
// refusalLogEvery, with the number refused since the last warning.
func (w *Worker) refused(it Item, err error) {
	now := time.Now()
	var full *store.FullError
	w.mu.Lock()
	w.c.refused++
	if !errors.As(err, &full) && !errors.Is(err, store.ErrRecordTooLarge) {
		w.c.m.StoreErrors++
	}
	w.lastErr = err.Error()
	w.refusedUnlogged++
	n := w.refusedUnlogged
	logIt := now.Sub(w.refusedLogAt) >= refusalLogEvery
	if logIt {
		w.refusedUnlogged, w.refusedLogAt = 0, now
	}
	w.mu.Unlock()
	if logIt {
		w.log.Warn("offline queue refused messages; they are lost", "refused", n, "msg_id", it.MsgID, "error", err)
	}
}

func (w *Worker) dropEphemeral(n int64) {
	w.mu.Lock()
	w.c.ephemeralDropped += n
	w.mu.Unlock()
}

func (w *Worker) noteError(err error) {
	w.mu.Lock()
	w.lastErr = err.Error()
	w.mu.Unlock()
}

// setMode moves to mode to, logging the transition.
func (w *Worker) setMode(to Mode, reason string) {
	w.mu.Lock()
	from := w.mode
	if from == to {
		w.mu.Unlock()
		return
	}
	w.mode = to
	if to == ModeRecovering {
		w.gen++
	}
	w.mu.Unlock()
	w.log.Info("publish mode changed", "from", string(from), "to", string(to), "reason", reason)
}

// connectionChanged follows a connect or disconnect signal. Every connect
// or reconnect gets a flush cycle (docs/agent.md, section Publishing,
// Offline queue).
func (w *Worker) connectionChanged() {
	if !w.o.Transport.Connected() {
		w.setMode(ModeBufferOnly, "connection lost")
		return
	}
	if w.Mode() == ModeBufferOnly {
		w.setMode(ModeRecovering, "connection restored")
	}
	w.kickFlush()
}

// flushTick is the periodic flush. A transport that failed a Send but
// still reports itself connected sends no change, so buffer-only is left
// here too.
func (w *Worker) flushTick() {
	if !w.o.Transport.Connected() {
		return
	}
	if w.Mode() == ModeBufferOnly {
		w.setMode(ModeRecovering, "connected at flush interval")
	}
	w.kickFlush()
}

// checkDepth starts a cycle when the queue's depth exceeds the trigger
// threshold while connected.
func (w *Worker) checkDepth(ctx context.Context) {
	// Records awaiting a receipt were sent: a flush has nothing to do
	// with them until their wait is over.
	if st, ok := w.connectedStats(ctx, "read offline queue depth"); ok && st.Records-st.Awaiting > int64(w.qo.FlushTriggerThreshold) {
		w.kickFlush()
	}
}

// connectedStats reads the queue's statistics while a flush could run;
// false when none could, or the read failed (logged as what).
func (w *Worker) connectedStats(ctx context.Context, what string) (store.QueueStats, bool) {
	if w.Mode() == ModeBufferOnly || !w.o.Transport.Connected() {
		return store.QueueStats{}, false
	}
	st, err := w.o.Queue.Stats(ctx, w.o.Destination)
	if err != nil {
		if ctx.Err() == nil {
			w.log.Warn(what, "error", err)
		}
		return st, false
	}
	return st, true
}

func (w *Worker) kickFlush() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// cycleEnded ends recovery when a cycle that started in the current
// recovery found nothing ready, and schedules the next cycle at once when
// one stopped at its limit.
func (w *Worker) cycleEnded(r cycleResult) {
	if r.more && w.o.Transport.Connected() && w.Mode() != ModeBufferOnly {
		w.kickFlush()
		return
	}
	if !r.drained {
		return
	}
	w.mu.Lock()
	current := w.mode == ModeRecovering && w.gen == r.gen
	w.mu.Unlock()
	if current {
		w.setMode(ModeDirect, "offline queue drained")
	}
}
