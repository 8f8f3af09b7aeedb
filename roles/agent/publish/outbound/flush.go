package outbound

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// cycleResult is how a flush cycle ended.
type cycleResult struct {
	// gen is the recovery the cycle started in: a cycle that began before
	// the latest reconnect may have found the queue empty before the
	// outage filled it, and must not end that recovery.
	gen int
	// drained: no record was ready when the cycle ended.
	drained bool
	// more: the cycle stopped at MaxFlushPerCycle with records ready.
	more bool
	// delivered counts the records the cycle acked.
	delivered int64
}

// flusher runs the flush cycles Run asks for, one at a time, and reports
// how each ended. persist is for the queue updates that follow a Send,
// which must be recorded even when ctx has just ended.
func (w *Worker) flusher(ctx, persist context.Context, results chan<- cycleResult) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
		}
		r, err := w.flushCycle(ctx, persist)
		if err != nil && ctx.Err() == nil {
			w.noteError(err)
			w.log.Warn("flush cycle stopped", "error", err)
		}
		w.mu.Lock()
		switch {
		case err != nil && ctx.Err() == nil:
			w.c.m.FlushFailed++
		case r.delivered > 0:
			w.c.m.FlushDelivered++
		case r.drained:
			w.c.m.FlushEmpty++
		}
		w.mu.Unlock()
		select {
		case results <- r:
		case <-ctx.Done():
			return
		}
	}
}

// flushCycle sends up to MaxFlushPerCycle ready records, in batches of
// FlushBatchSize, one Send per batch.
func (w *Worker) flushCycle(ctx, persist context.Context) (cycleResult, error) {
	w.mu.Lock()
	r := cycleResult{gen: w.gen}
	w.mu.Unlock()
	if w.Mode() == ModeBufferOnly || !w.o.Transport.Connected() {
		return r, nil
	}
	start := w.o.Now()
	w.mu.Lock()
	w.c.lastAttempt = start
	w.mu.Unlock()

	var sent int
	var delivered int64
	if len(w.unacked) > 0 {
		n, err := w.o.Queue.Ack(persist, w.o.Destination, w.unacked)
		if err != nil {
			return r, fmt.Errorf("flush %s: ack %d records delivered earlier, again: %w", w.o.Name, len(w.unacked), err)
		}
		w.log.Info("records delivered earlier acked in the offline queue", "records", n)
		delivered += n
		r.delivered += n
		w.mu.Lock()
		w.c.replayed += n
		w.c.m.ReplayedBytes += w.unackedBytes
		w.mu.Unlock()
		w.unacked, w.unackedBytes = nil, 0
	}
	for sent < w.qo.MaxFlushPerCycle {
		// An outage during the cycle ends it; its records stay queued.
		if w.Mode() == ModeBufferOnly || !w.o.Transport.Connected() {
			return r, nil
		}
		w.readyMu.Lock()
		recs, err := w.o.Queue.Ready(ctx, w.o.Destination, min(w.qo.FlushBatchSize, w.qo.MaxFlushPerCycle-sent), w.o.Now())
		w.readyMu.Unlock()
		if err != nil {
			return r, fmt.Errorf("flush %s: %w", w.o.Name, err)
		}
		if len(recs) == 0 {
			r.drained = true
			w.flushSucceeded()
			return r, nil
		}
		msgs := make([]dest.Message, len(recs))
		for i, rec := range recs {
			msgs[i] = dest.Message{Topic: rec.Topic, Payload: rec.Payload}
		}
		errs := w.send(ctx, msgs)
		sent += len(recs)
		var ack, sentIDs []int64
		var ackBytes, sentBytes, failed, rejected int64
		var transient error
		for i, rec := range recs {
			switch err := errs[i]; {
			case err == nil && w.rk != nil && store.Receiptable(rec.MsgID):
				// Kept until the cloud's receipt, and due again
				// after the receipt wait.
				sentIDs = append(sentIDs, rec.ID)
				sentBytes += int64(len(rec.Payload))
			case err == nil:
				ack = append(ack, rec.ID)
				ackBytes += int64(len(rec.Payload))
			case dest.IsRejected(err):
				rejected++
				var rej *dest.RejectedError
				errors.As(err, &rej)
				dead, rerr := w.o.Queue.Reject(persist, w.o.Destination, rec.ID, rej.Reason, w.o.Now())
				if rerr != nil {
					w.noteError(rerr)
					w.log.Warn("record a refusal in the offline queue", "msg_id", rec.MsgID, "error", rerr)
					continue
				}
				w.noteError(err)
				w.log.Warn("destination refused a queued message", "msg_id", rec.MsgID, "reason", rej.Reason,
					"attempts", rec.Attempts+1, "dead_lettered", dead)
			default:
				failed++
				if transient == nil {
					transient = err
				}
			}
		}
		w.mu.Lock()
		w.c.m.SendFailures += failed
		w.c.m.Rejections += rejected
		w.mu.Unlock()
		if len(sentIDs) > 0 {
			// A failed mark leaves the records due: they are sent again
			// (at least once) rather than deleted unconfirmed.
			n, err := w.o.Queue.MarkSent(persist, w.o.Destination, sentIDs, w.rk.retryAt())
			if err != nil {
				return r, fmt.Errorf("flush %s: mark %d sent records: %w", w.o.Name, len(sentIDs), err)
			}
			delivered += n
			r.delivered += n
			w.mu.Lock()
			w.c.replay(n, sentBytes)
			w.mu.Unlock()
			w.flushSucceeded()
		}
		if len(ack) > 0 {
			// Only what the destination acknowledged is deleted. If this
			// Ack fails (a full disk), the ids wait in memory for the next
			// cycle's Ack instead of being sent again with every cycle;
			// only a restart meanwhile sends them again (at least once).
			n, err := w.o.Queue.Ack(persist, w.o.Destination, ack)
			if err != nil {
				w.unacked, w.unackedBytes = ack, ackBytes
				return r, fmt.Errorf("flush %s: ack %d delivered records: %w", w.o.Name, len(ack), err)
			}
			delivered += n
			r.delivered += n
			w.mu.Lock()
			w.c.replay(n, ackBytes)
			w.mu.Unlock()
			w.flushSucceeded()
		}
		if transient != nil {
			if ctx.Err() != nil || !w.o.Transport.Connected() {
				return r, nil
			}
			return r, fmt.Errorf("flush %s: %d delivered, then: %w", w.o.Name, delivered, transient)
		}
	}
	// At the limit: whether records are still ready decides between the
	// next cycle at once and the end of recovery.
	w.readyMu.Lock()
	recs, err := w.o.Queue.Ready(ctx, w.o.Destination, 1, w.o.Now())
	w.readyMu.Unlock()
	if err != nil {
		return r, fmt.Errorf("flush %s: %w", w.o.Name, err)
	}
	r.more = len(recs) > 0
	r.drained = !r.more
	return r, nil
}

// replay counts n queued records of size bytes that a cycle delivered;
// the worker's mu held.
func (c *counters) replay(n, bytes int64) {
	c.replayed += n
	c.m.ReplayedBytes += bytes
}

func (w *Worker) flushSucceeded() {
	now := w.o.Now()
	w.mu.Lock()
	w.c.lastSuccess = now
	w.mu.Unlock()
}
