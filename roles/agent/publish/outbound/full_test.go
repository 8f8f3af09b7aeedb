package outbound

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// ackFailing is a queue whose Ack fails as a full disk makes it fail,
// the first fails times.
type ackFailing struct {
	*store.Queue
	mu    sync.Mutex
	fails int
	calls int
}

func (q *ackFailing) Ack(ctx context.Context, dest int64, ids []int64) (int64, error) {
	q.mu.Lock()
	q.calls++
	fail := q.calls <= q.fails
	q.mu.Unlock()
	if fail {
		return 0, fmt.Errorf("ack: write wal: %w", syscall.ENOSPC)
	}
	return q.Queue.Ack(ctx, dest, ids)
}

// TestFailedAckIsRetriedNotResent (issue 16 item 10): records the
// destination acknowledged but the store could not delete (a full disk)
// are acked again by the next cycles, not sent again with each one, and
// the flush goes on once the Ack goes through.
func TestFailedAckIsRetriedNotResent(t *testing.T) {
	q := &ackFailing{Queue: newQueue(t, newStore(t), func(o *store.QueueOptions) {
		o.FlushBatchSize = 10
		o.FlushIntervalMS = 20
	}), fails: 3}
	tr := newFakeTransport(false)
	w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
	run(t, w)
	for i := range 30 {
		offer(t, w, item("full", i))
	}
	tr.setConnected(true)
	waitMode(t, w, ModeDirect)
	eventually(t, "queue drained", func() bool { return len(queuedIDs(t, q, 1)) == 0 })
	d := tr.deliveries()
	for _, id := range ids("full", 0, 30) {
		if d[id] != 1 {
			t.Errorf("%s delivered %d times, want once", id, d[id])
		}
	}
	if st := status(t, w); st.Replayed != 30 || st.Counters.Delivered != 30 {
		t.Errorf("replayed %d, queue delivered %d, want 30 each", st.Replayed, st.Counters.Delivered)
	}
}
