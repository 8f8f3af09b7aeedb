// Package batch groups an endpoint's messages into batches for publishing
// (docs/agent.md, section Batching). One Batcher serves one endpoint: the runner adds
// each poll result or frame as a Message, and the Batcher hands finished
// batches to a Sink when a rule says so. The rules, checked after each
// message:
//
//   - no buffering configured (Size and Time 0): every message at once;
//   - Size messages collected;
//   - Time elapsed since the batch's first message (a timer, so a quiet
//     endpoint still flushes);
//   - MaxMessages (10,000) collected, a safety limit;
//   - the batch's bytes reach MaxBytes, the memory safety limit;
//   - Flush, when the endpoint disconnects, and Close.
package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// Reasons a batch was dispatched, as Batch.Reason carries them.
const (
	ReasonImmediate   = "immediate"
	ReasonSize        = "size"
	ReasonTime        = "time"
	ReasonMaxMessages = "max-messages"
	ReasonMemory      = "memory"
	ReasonDisconnect  = "disconnect"
	ReasonClose       = "close"
)

// DefaultMaxMessages is the message safety limit.
const DefaultMaxMessages = 10_000

// ErrClosed is returned by Add after Close.
var ErrClosed = errors.New("batch: batcher closed")

// Message is one poll result or one frame of an endpoint.
type Message struct {
	Endpoint string
	Readings []adapters.Reading
	Received time.Time
	// Size approximates the bytes the message holds; Add estimates it
	// with EstimateSize when it is 0.
	Size int
}

// Batch is what a Sink receives.
type Batch struct {
	Endpoint string
	Messages []Message
	// Bytes is the sum of the messages' sizes.
	Bytes  int
	Reason string
	// Anomaly is the anomaly detector's enrichment of the batch's
	// readings, in reading order, each Result's Index counting readings
	// across messages; nil when detection is off or warming up. The
	// custom and ml payloads publish it (docs/agent-payloads.md).
	Anomaly []detect.Result
}

// Readings counts the readings of every message of the batch.
func (b Batch) Readings() int {
	n := 0
	for _, m := range b.Messages {
		n += len(m.Readings)
	}
	return n
}

// Sink receives batches. A Batcher never calls Deliver concurrently and
// delivers its batches in order; the batch is the sink's to keep. Deliver
// should honour ctx: it is cancelled when Close's context ends.
type Sink interface {
	Deliver(ctx context.Context, b Batch)
}

// Options are an endpoint's batching settings. Zero values mean off or the
// default.
type Options struct {
	// Size dispatches a batch once it holds this many messages (0: off).
	Size int
	// Time dispatches a batch this long after its first message (0: off).
	Time time.Duration
	// MaxMessages is the message safety limit, DefaultMaxMessages when 0.
	MaxMessages int
	// MaxBytes is the memory safety limit; when 0 it is MemoryCap(),
	// evaluated as each batch starts.
	MaxBytes int
}

// OptionsFor reads the batching settings of an endpoint: buffer_size and
// buffer_time_ms, both 0 by default.
func OptionsFor(ep adapters.Endpoint) Options {
	return Options{Size: ep.BufferSize, Time: time.Duration(ep.BufferTimeMS) * time.Millisecond}
}

func (o Options) immediate() bool { return o.Size <= 0 && o.Time <= 0 }

// Batcher collects one endpoint's messages. Its methods are safe for
// concurrent use.
type Batcher struct {
	endpoint string
	opts     Options
	sink     Sink

	mu       sync.Mutex
	pending  []Message
	bytes    int
	maxBytes int       // the memory limit of the pending batch
	deadline time.Time // when the pending batch is due, with Time set
	closed   bool

	// deliverMu is taken while mu is still held, and only then is mu
	// released: batches are cut and delivered in the same order, and
	// Deliver never runs twice at once.
	deliverMu sync.Mutex

	// The timer goroutine's channels; nil when Time is 0.
	rearm      chan struct{}
	stop       chan struct{}
	timerDone  chan struct{}
	timerCtx   context.Context
	cancelTime context.CancelFunc
}

// New returns a Batcher for endpoint delivering to sink. With Time set it
// starts a timer goroutine, which Close ends.
func New(endpoint string, opts Options, sink Sink) *Batcher {
	if opts.MaxMessages <= 0 {
		opts.MaxMessages = DefaultMaxMessages
	}
	if opts.Size < 0 {
		opts.Size = 0
	}
	if opts.Time < 0 {
		opts.Time = 0
	}
	b := &Batcher{endpoint: endpoint, opts: opts, sink: sink}
	if opts.Time > 0 {
		b.rearm = make(chan struct{}, 1)
		b.stop = make(chan struct{})
		b.timerDone = make(chan struct{})
		b.timerCtx, b.cancelTime = context.WithCancel(context.Background())
		go b.timerLoop()
	}
	return b
}

// Options returns the options in force, defaults applied.
func (b *Batcher) Options() Options { return b.opts }

// Add appends m to the pending batch and dispatches the batch, within this
// call, when a rule says so. ctx bounds that delivery. A slow Sink holds
// back the Add that dispatches, and Adds behind it: back-pressure on the
// device side rather than an unbounded queue in the agent.
func (b *Batcher) Add(ctx context.Context, m Message) error {
	if m.Endpoint == "" {
		m.Endpoint = b.endpoint
	}
	if m.Size <= 0 {
		m.Size = EstimateSize(m.Readings)
	}
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if len(b.pending) == 0 {
		b.startBatch()
	}
	b.pending = append(b.pending, m)
	b.bytes += m.Size
	reason := b.dueReason()
	if reason == "" {
		b.mu.Unlock()
		return nil
	}
	b.dispatchLocked(ctx, reason)
	return nil
}

// startBatch sets the limits of a new batch; mu is held.
func (b *Batcher) startBatch() {
	b.maxBytes = b.opts.MaxBytes
	if b.maxBytes <= 0 && !b.opts.immediate() {
		b.maxBytes = MemoryCap()
	}
	if b.opts.Time > 0 {
		b.deadline = time.Now().Add(b.opts.Time)
		select {
		case b.rearm <- struct{}{}:
		default: // a rearm is already pending; it reads the new deadline
		}
	}
}

// dueReason names the rule the pending batch meets, or ""; mu is held.
func (b *Batcher) dueReason() string {
	n := len(b.pending)
	switch {
	case b.opts.immediate():
		return ReasonImmediate
	case b.opts.Size > 0 && n >= b.opts.Size:
		return ReasonSize
	case n >= b.opts.MaxMessages:
		return ReasonMaxMessages
	case b.bytes >= b.maxBytes:
		return ReasonMemory
	}
	return ""
}

// dispatchLocked cuts the pending batch and delivers it. It is called with
// mu held and returns with mu released.
func (b *Batcher) dispatchLocked(ctx context.Context, reason string) {
	if len(b.pending) == 0 {
		b.mu.Unlock()
		return
	}
	batch := Batch{Endpoint: b.endpoint, Messages: b.pending, Bytes: b.bytes, Reason: reason}
	b.pending, b.bytes, b.deadline = nil, 0, time.Time{}
	b.deliverMu.Lock()
	b.mu.Unlock()
	defer b.deliverMu.Unlock()
	b.sink.Deliver(ctx, batch)
}

// Flush dispatches the pending batch, if any, with reason; the runner
// calls it with ReasonDisconnect when the endpoint's connection is lost.
func (b *Batcher) Flush(ctx context.Context, reason string) {
	b.mu.Lock()
	b.dispatchLocked(ctx, reason)
}

// Pending returns the number of messages and bytes of the pending batch.
func (b *Batcher) Pending() (messages, bytes int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.pending), b.bytes
}

// Close flushes the pending batch with ReasonClose and stops the timer
// goroutine; later Adds return ErrClosed. A timer delivery in progress is
// waited for, and its context cancelled if ctx ends first. Close is safe
// to call more than once.
func (b *Batcher) Close(ctx context.Context) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	b.mu.Unlock()
	if b.stop != nil {
		stopAfter := context.AfterFunc(ctx, b.cancelTime)
		close(b.stop)
		<-b.timerDone
		stopAfter()
		b.cancelTime()
	}
	b.Flush(ctx, ReasonClose)
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("batch: close %s: %w", b.endpoint, err)
	}
	return nil
}

// timerLoop dispatches the pending batch when its deadline passes. It
// sleeps on a timer between batches, never polls.
func (b *Batcher) timerLoop() {
	defer close(b.timerDone)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-b.stop:
			t.Stop()
			return
		case <-b.rearm:
		case <-t.C:
		}
		b.mu.Lock()
		switch {
		case len(b.pending) == 0:
			b.mu.Unlock()
		case !time.Now().Before(b.deadline):
			b.dispatchLocked(b.timerCtx, ReasonTime)
		default:
			// Since Go 1.23 Reset discards a stale expiry, so the timer
			// fires only for this deadline.
			t.Reset(time.Until(b.deadline))
			b.mu.Unlock()
		}
	}
}
