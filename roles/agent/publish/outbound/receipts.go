package outbound

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// recentFor is how long a worker remembers a receipt for the direct sends
// it overtook: the write it races is one SQLite transaction.
const recentFor = 10 * time.Second

// keepQueue bounds the direct-send batches waiting for the keeper, and
// keepMax the records of one KeepSent. holdFor is how long the keeper
// holds a direct send in memory for its receipt before writing it to the
// queue: receipts come within about a second, so in steady state a direct
// send costs no write at all. holdMax bounds the records held.
const (
	keepQueue = 64
	keepMax   = 4096
	holdFor   = 2 * time.Second
	holdMax   = 8192
)

// heldBatch is direct sends acknowledged at at.
type heldBatch struct {
	at   time.Time
	recs []store.Record
}

// recentReceipt is a receipt applied at at.
type recentReceipt struct {
	at time.Time
	r  control.Receipts
}

// receiptKeeper is a worker's part in delivery receipts
// (docs/agent-delivery.md, section Delivery receipts): it keeps the
// direct sends the destination acknowledged as awaiting their receipt,
// and applies the receipts. It is nil in a worker without receipts.
type receiptKeeper struct {
	dest  int64
	name  string
	queue Queue
	wait  time.Duration
	now   func() time.Time
	// failed reports a KeepSent error to the worker, which counts it.
	failed func(records int, err error)

	// ch takes direct sends from the loop to run, so a send never waits
	// for a SQLite commit; Run makes and closes it.
	ch chan []store.Record

	// mu orders a KeepSent after the receipts that arrived before it: a
	// receipt can overtake the records it covers (the cloud may hold a
	// direct send before the worker handed it over), and recent remembers
	// receipts long enough for those records to skip them. held are the
	// direct sends not yet written, oldest first.
	mu     sync.Mutex
	recent []recentReceipt
	held   []heldBatch
	nHeld  int

	receipts, receipted, heldGauge atomic.Int64
}

// awaits reports whether a delivered it is kept until its receipt: only
// a record with a v2 msgId can be covered by one.
func (k *receiptKeeper) awaits(it Item) bool {
	return k != nil && !it.Ephemeral && store.Receiptable(it.MsgID)
}

// retryAt is when a record sent now is sent again without a receipt.
func (k *receiptKeeper) retryAt() time.Time { return k.now().Add(k.wait) }

// run holds the direct sends handed over on ch, and writes those that
// had no receipt within holdFor to the queue as awaiting, merged into one
// transaction: one commit costs about what a thousand rows do. Once ch is
// closed and drained it writes everything still held and returns, so a
// worker that stops leaves every unconfirmed record in the queue.
func (k *receiptKeeper) run(ctx context.Context) {
	tick := time.NewTicker(holdFor / 4)
	defer tick.Stop()
	for {
		select {
		case recs, ok := <-k.ch:
			if !ok {
				k.write(ctx, time.Time{})
				return
			}
			k.hold(ctx, recs)
		case <-tick.C:
			k.write(ctx, k.now().Add(-holdFor))
		}
	}
}

// hold keeps recs in memory, less those a receipt covered already; past
// holdMax records the oldest are written at once.
func (k *receiptKeeper) hold(ctx context.Context, recs []store.Record) {
	k.mu.Lock()
	if len(k.recent) > 0 {
		recs = k.uncovered(recs)
	}
	if len(recs) > 0 {
		k.held = append(k.held, heldBatch{at: k.now(), recs: recs})
		k.nHeld += len(recs)
	}
	over := k.nHeld > holdMax
	k.heldGauge.Store(int64(k.nHeld))
	k.mu.Unlock()
	if over {
		k.write(ctx, k.now())
	}
}

// write stores the held batches acknowledged by cutoff (all of them for
// a zero cutoff) as awaiting their receipt, due again at the end of their
// wait. A record not kept (a full queue, a storage error) was delivered,
// and only its receipt is missing: it is counted, not sent again.
func (k *receiptKeeper) write(ctx context.Context, cutoff time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	due := func(hb heldBatch) bool { return cutoff.IsZero() || !hb.at.After(cutoff) }
	for len(k.held) > 0 && due(k.held[0]) {
		// The wait runs from the send of the oldest of them.
		at := k.held[0].at
		var recs []store.Record
		n := 0
		for n < len(k.held) && len(recs) < keepMax && due(k.held[n]) {
			recs = append(recs, k.held[n].recs...)
			n++
		}
		clear(k.held[:n])
		k.held = k.held[n:]
		k.nHeld -= len(recs)
		if err := k.queue.KeepSent(ctx, k.dest, recs, at.Add(k.wait)); err != nil {
			k.failed(len(recs), err)
		}
	}
	if len(k.held) == 0 {
		k.held = nil // drop the backing array
	}
	k.heldGauge.Store(int64(k.nHeld))
}

// uncovered returns the records of recs no recent receipt covers, and
// forgets receipts older than recentFor; k.mu held.
func (k *receiptKeeper) uncovered(recs []store.Record) []store.Record {
	now := k.now()
	from := 0
	for from < len(k.recent) && now.Sub(k.recent[from].at) > recentFor {
		from++
	}
	k.recent = k.recent[from:]
	out := recs[:0:0]
	for _, rec := range recs {
		if !k.covered(rec.MsgID) {
			out = append(out, rec)
		}
	}
	return out
}

func (k *receiptKeeper) covered(msgID string) bool {
	kid, seq, err := codec.ParseMsgID(msgID)
	if err != nil {
		return false
	}
	for _, rr := range k.recent {
		for _, key := range rr.r.Keys {
			if key.KID == kid && key.Contains(seq) {
				return true
			}
		}
	}
	return false
}

// apply deletes the records r covers, held or queued, and remembers r
// for the direct sends it may have overtaken.
func (k *receiptKeeper) apply(ctx context.Context, r control.Receipts) (int64, error) {
	k.mu.Lock()
	k.recent = append(k.recent, recentReceipt{at: k.now(), r: r})
	var fromMemory int64
	kept := k.held[:0]
	for _, hb := range k.held {
		before := len(hb.recs)
		hb.recs = k.uncovered(hb.recs)
		fromMemory += int64(before - len(hb.recs))
		if len(hb.recs) > 0 {
			kept = append(kept, hb)
		}
	}
	clear(k.held[len(kept):])
	k.held = kept
	k.nHeld -= int(fromMemory)
	k.heldGauge.Store(int64(k.nHeld))
	// A burst of receipts with no direct send between them is bounded
	// too: the oldest go once there are more than the window needs.
	if len(k.recent) > 64 {
		k.recent = k.recent[len(k.recent)-64:]
	}
	n, err := k.queue.ApplyReceipts(ctx, k.dest, r)
	k.mu.Unlock()
	k.receipted.Add(fromMemory)
	if err != nil {
		return fromMemory, fmt.Errorf("receipts for %s: %w", k.name, err)
	}
	k.receipts.Add(1)
	k.receipted.Add(n)
	return fromMemory + n, nil
}

// ApplyReceipts deletes the destination's records r covers, awaiting or
// not yet sent, and returns how many. A worker without receipts ignores
// r and returns 0: its destination's msgIds are not the cloud's to
// confirm.
func (w *Worker) ApplyReceipts(ctx context.Context, r control.Receipts) (int64, error) {
	if w.rk == nil || len(r.Keys) == 0 {
		return 0, nil
	}
	n, err := w.rk.apply(ctx, r)
	if err != nil {
		w.noteError(err)
	}
	return n, err
}
