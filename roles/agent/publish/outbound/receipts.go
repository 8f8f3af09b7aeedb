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
// keepMax the records of one KeepSent.
const (
	keepQueue = 64
	keepMax   = 4096
)

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
	// receipt can overtake the write of the records it covers (the cloud
	// may hold a direct send before the worker stored it), and recent
	// remembers receipts long enough for that write to skip them.
	mu     sync.Mutex
	recent []recentReceipt

	receipts, receipted atomic.Int64
}

// awaits reports whether a delivered it is kept until its receipt: only
// a record with a msgId can be covered by one.
func (k *receiptKeeper) awaits(it Item) bool {
	return k != nil && !it.Ephemeral && it.MsgID != ""
}

// retryAt is when a record sent now is sent again without a receipt.
func (k *receiptKeeper) retryAt() time.Time { return k.now().Add(k.wait) }

// run stores the direct sends handed over on ch, merging whatever is
// waiting into one transaction: one commit costs about what a thousand
// rows do. It returns once ch is closed and drained.
func (k *receiptKeeper) run(ctx context.Context) {
	for recs := range k.ch {
	merge:
		for len(recs) < keepMax {
			select {
			case more, ok := <-k.ch:
				if !ok {
					break merge
				}
				recs = append(recs, more...)
			default:
				break merge
			}
		}
		k.keep(ctx, recs)
	}
}

// keep stores recs as awaiting their receipt, in one transaction, less
// those a receipt covered already. A record not kept (a full queue, a
// storage error) was delivered, and only its receipt is missing: it is
// counted, not sent again.
func (k *receiptKeeper) keep(ctx context.Context, recs []store.Record) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.recent) > 0 {
		recs = k.uncovered(recs)
		if len(recs) == 0 {
			return
		}
	}
	if err := k.queue.KeepSent(ctx, k.dest, recs, k.retryAt()); err != nil {
		k.failed(len(recs), err)
	}
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

// apply deletes the records r covers and remembers r for the direct
// sends it may have overtaken.
func (k *receiptKeeper) apply(ctx context.Context, r control.Receipts) (int64, error) {
	k.mu.Lock()
	k.recent = append(k.recent, recentReceipt{at: k.now(), r: r})
	// A burst of receipts with no direct send between them is bounded
	// too: the oldest go once there are more than the window needs.
	if len(k.recent) > 64 {
		k.recent = k.recent[len(k.recent)-64:]
	}
	n, err := k.queue.ApplyReceipts(ctx, k.dest, r)
	k.mu.Unlock()
	if err != nil {
		return 0, fmt.Errorf("receipts for %s: %w", k.name, err)
	}
	k.receipts.Add(1)
	k.receipted.Add(n)
	return n, nil
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
