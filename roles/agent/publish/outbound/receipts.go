package outbound

import (
	"context"
	"errors"
	"fmt"
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

// keeper stores the direct sends the loop hands over, merging whatever
// is waiting into one transaction: one commit costs about what a thousand
// rows do. It returns once keepQ is closed and drained.
func (w *Worker) keeper(ctx context.Context) {
	for recs := range w.keepQ {
	merge:
		for len(recs) < keepMax {
			select {
			case more, ok := <-w.keepQ:
				if !ok {
					break merge
				}
				recs = append(recs, more...)
			default:
				break merge
			}
		}
		w.keepSent(ctx, recs)
	}
}

// recentReceipt is a receipt applied at at.
type recentReceipt struct {
	at time.Time
	r  control.Receipts
}

// Receipts reports whether the worker keeps records until their receipt.
func (w *Worker) Receipts() bool { return w.o.Receipts }

// awaitsReceipt reports whether a delivered it is kept until its receipt:
// only a record with a msgId can be covered by one.
func (w *Worker) awaitsReceipt(it Item) bool {
	return w.o.Receipts && !it.Ephemeral && it.MsgID != ""
}

// retryAt is when a record sent now is sent again without a receipt.
func (w *Worker) retryAt() time.Time { return w.o.Now().Add(w.o.ReceiptWait) }

// keepSent stores direct sends the destination acknowledged as awaiting
// their receipt, in one transaction, less those a receipt covered
// already. A record not kept (a full queue, a storage error) was
// delivered, and only its receipt is missing: it is counted, not
// re-sent.
func (w *Worker) keepSent(ctx context.Context, recs []store.Record) {
	w.keepMu.Lock()
	defer w.keepMu.Unlock()
	if len(w.recent) > 0 {
		recs = w.uncovered(recs)
		if len(recs) == 0 {
			return
		}
	}
	err := w.o.Queue.KeepSent(ctx, w.o.Destination, recs, w.retryAt())
	if err == nil {
		return
	}
	var full *store.FullError
	w.mu.Lock()
	if !errors.As(err, &full) && !errors.Is(err, store.ErrRecordTooLarge) {
		w.c.m.StoreErrors++
	}
	w.lastErr = err.Error()
	w.mu.Unlock()
	w.log.Warn("sent records not kept until their receipt", "records", len(recs), "error", err)
}

// uncovered returns the records of recs no recent receipt covers, and
// forgets receipts older than recentFor; keepMu held.
func (w *Worker) uncovered(recs []store.Record) []store.Record {
	now := w.o.Now()
	keepFrom := 0
	for keepFrom < len(w.recent) && now.Sub(w.recent[keepFrom].at) > recentFor {
		keepFrom++
	}
	w.recent = w.recent[keepFrom:]
	out := recs[:0:0]
	for _, rec := range recs {
		if !w.covered(rec.MsgID) {
			out = append(out, rec)
		}
	}
	return out
}

func (w *Worker) covered(msgID string) bool {
	kid, seq, err := codec.ParseMsgID(msgID)
	if err != nil {
		return false
	}
	for _, rr := range w.recent {
		for _, k := range rr.r.Keys {
			if k.KID == kid && k.Contains(seq) {
				return true
			}
		}
	}
	return false
}

// ApplyReceipts deletes the destination's records r covers, awaiting or
// not yet sent, and returns how many. A worker without receipts ignores
// r: its destination's msgIds are not the cloud's to confirm.
func (w *Worker) ApplyReceipts(ctx context.Context, r control.Receipts) (int64, error) {
	if !w.o.Receipts || len(r.Keys) == 0 {
		return 0, nil
	}
	w.keepMu.Lock()
	w.recent = append(w.recent, recentReceipt{at: w.o.Now(), r: r})
	// A burst of receipts with no direct send between them is bounded
	// too: the oldest go once there are more than the window needs.
	if len(w.recent) > 64 {
		w.recent = w.recent[len(w.recent)-64:]
	}
	n, err := w.o.Queue.ApplyReceipts(ctx, w.o.Destination, r)
	w.keepMu.Unlock()
	if err != nil {
		w.noteError(err)
		return 0, fmt.Errorf("receipts for %s: %w", w.o.Name, err)
	}
	w.mu.Lock()
	w.c.m.Receipts++
	w.c.m.Receipted += n
	w.mu.Unlock()
	return n, nil
}

// checkAwaiting starts a flush cycle while records await a receipt, so
// those whose wait is over are sent again within a quarter of the wait
// rather than at the next flush interval. The cycle sends only records
// that are due.
func (w *Worker) checkAwaiting(ctx context.Context) {
	if st, ok := w.connectedStats(ctx, "read records awaiting a receipt"); ok && st.Awaiting > 0 {
		w.kickFlush()
	}
}
