package outbound

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
)

const testKid = "Ab12Cd34"

// v2Item is an item with a v2 msgId of sequence seq, which receipts can
// cover.
func v2Item(t *testing.T, seq uint64) Item {
	t.Helper()
	id, err := codec.FormatMsgID(testKid, seq)
	if err != nil {
		t.Fatal(err)
	}
	return Item{MsgID: id, Topic: "t/r", Payload: []byte(id)}
}

func v2IDs(t *testing.T, from, to uint64) []string {
	var out []string
	for s := from; s <= to; s++ {
		out = append(out, v2Item(t, s).MsgID)
	}
	return out
}

func receipt(first, last uint64) control.Receipts {
	return control.Receipts{Keys: []control.KeyReceipt{{KID: testKid, Ranges: []control.Range{{First: first, Last: last}}}}}
}

func receiptOptions(tr Transport, q Queue, c *clock) Options {
	o := workerOptions(tr, q, newTransitionLog())
	o.Receipts, o.ReceiptWait, o.Now = true, 30*time.Second, c.Now
	return o
}

// TestReceiptsKeepDirectSends: a direct send the destination acknowledged
// is held, then written to the queue as awaiting, until a receipt covers
// it; a receipt deletes exactly what it covers.
func TestReceiptsKeepDirectSends(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	c := newClock()
	w := newWorker(t, receiptOptions(tr, q, c))
	run(t, w)
	waitMode(t, w, ModeDirect)
	for s := uint64(1); s <= 5; s++ {
		offer(t, w, v2Item(t, s))
	}
	// A message without a v2 msgId can never be receipted: it goes on the
	// acknowledgement.
	offer(t, w, item("plain", 1))
	// They wait in memory first: a receipt within holdFor costs no write.
	eventually(t, "five held", func() bool { return status(t, w).HeldForReceipt == 5 })
	if got := tr.delivered(); len(got) != 6 {
		t.Fatalf("delivered %v", got)
	}
	n, err := w.ApplyReceipts(context.Background(), receipt(1, 2))
	if err != nil || n != 2 {
		t.Fatalf("ApplyReceipts = %d, %v; want 2", n, err)
	}
	if st := status(t, w); st.HeldForReceipt != 3 || st.Records != 0 {
		t.Fatalf("after a receipt of held records: held %d, %+v", st.HeldForReceipt, st.QueueStats)
	}
	// Without a receipt within holdFor they are written to the queue.
	c.Advance(holdFor)
	eventually(t, "three awaiting in the queue", func() bool { st := status(t, w); return st.Awaiting == 3 && st.Records == 3 })
	if st := status(t, w); st.HeldForReceipt != 0 || st.Counters.Kept != 3 {
		t.Fatalf("after the hold: held %d, %+v", st.HeldForReceipt, st.QueueStats)
	}
	n, err = w.ApplyReceipts(context.Background(), receipt(3, 3))
	if err != nil || n != 1 {
		t.Fatalf("ApplyReceipts = %d, %v; want 1", n, err)
	}
	st := status(t, w)
	if st.Records != 2 || st.Awaiting != 2 || st.Counters.Receipted != 1 || st.Counters.Delivered != 1 || st.Counters.Kept != 3 {
		t.Fatalf("after the receipt: %+v", st.QueueStats)
	}
	if got, want := queuedIDs(t, q, 1), v2IDs(t, 4, 5); !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	if m, _ := w.Metrics(); m.Receipts != 2 || m.Receipted != 3 {
		t.Fatalf("metrics %+v", m)
	}
}

// TestReceiptsResendAfterWait: without a receipt, sent records go again
// after the wait, in order and with the same msgIds, and a receipt then
// ends it.
func TestReceiptsResendAfterWait(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	c := newClock()
	o := receiptOptions(tr, q, c)
	o.ReceiptWait = 200 * time.Millisecond // the re-send check runs every 50 ms
	w := newWorker(t, o)
	run(t, w)
	waitMode(t, w, ModeDirect)
	for s := uint64(1); s <= 4; s++ {
		offer(t, w, v2Item(t, s))
	}
	eventually(t, "four held", func() bool { return status(t, w).HeldForReceipt == 4 })
	// The hold and the wait follow the worker's clock: nothing is due
	// before it moves.
	c.Advance(holdFor + time.Second)
	eventually(t, "re-sent", func() bool { return len(tr.delivered()) == 8 })
	if got, want := tr.delivered()[4:], v2IDs(t, 1, 4); !slices.Equal(got, want) {
		t.Fatalf("re-sent %v, want %v", got, want)
	}
	// The re-sent records are marked once the broker acknowledged them.
	eventually(t, "four re-sent, awaiting", func() bool { st := status(t, w); return st.Awaiting == 4 && st.Counters.Resent == 4 })
	if _, err := w.ApplyReceipts(context.Background(), receipt(1, 4)); err != nil {
		t.Fatal(err)
	}
	if st := status(t, w); st.Records != 0 || st.Awaiting != 0 {
		t.Fatalf("after the receipt: %+v", st.QueueStats)
	}
}

// TestReceiptsFlushedRecordsAwait: records queued during an outage are
// flushed on reconnect and then await their receipt instead of being
// deleted on the acknowledgement.
func TestReceiptsFlushedRecordsAwait(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(false)
	w := newWorker(t, receiptOptions(tr, q, newClock()))
	run(t, w)
	for s := uint64(10); s < 20; s++ {
		offer(t, w, v2Item(t, s))
	}
	tr.setConnected(true)
	eventually(t, "flushed", func() bool { return len(tr.delivered()) == 10 })
	eventually(t, "all awaiting", func() bool { st := status(t, w); return st.Awaiting == 10 && st.Records == 10 })
	waitMode(t, w, ModeDirect)
	if _, err := w.ApplyReceipts(context.Background(), receipt(10, 19)); err != nil {
		t.Fatal(err)
	}
	if st := status(t, w); st.Records != 0 || st.Counters.Enqueued != 10 || st.Counters.Delivered != 10 {
		t.Fatalf("after the receipt: %+v", st.QueueStats)
	}
}

// TestReceiptsOff: without receipts an acknowledged record is deleted on
// the acknowledgement, as before, and receipts are ignored.
func TestReceiptsOff(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(false)
	o := receiptOptions(tr, q, newClock())
	o.Receipts = false
	w := newWorker(t, o)
	run(t, w)
	for s := uint64(1); s <= 3; s++ {
		offer(t, w, v2Item(t, s))
	}
	tr.setConnected(true)
	waitMode(t, w, ModeDirect)
	for s := uint64(4); s <= 6; s++ {
		offer(t, w, v2Item(t, s))
	}
	eventually(t, "delivered", func() bool { return len(tr.delivered()) == 6 })
	eventually(t, "queue empty", func() bool { return status(t, w).Records == 0 })
	if st := status(t, w); st.Awaiting != 0 || st.Counters.Kept != 0 || st.Counters.Delivered != 3 {
		t.Fatalf("%+v", st.QueueStats)
	}
	if n, err := w.ApplyReceipts(context.Background(), receipt(1, 6)); n != 0 || err != nil {
		t.Fatalf("ApplyReceipts = %d, %v on a worker without receipts", n, err)
	}
}

// TestReceiptOvertakesKeep: a receipt that arrives before the direct send
// it covers was handed over keeps that send from being held or stored.
func TestReceiptOvertakesKeep(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	c := newClock()
	w := newWorker(t, receiptOptions(tr, q, c))
	run(t, w)
	waitMode(t, w, ModeDirect)
	if _, err := w.ApplyReceipts(context.Background(), receipt(1, 2)); err != nil {
		t.Fatal(err)
	}
	for s := uint64(1); s <= 3; s++ {
		offer(t, w, v2Item(t, s))
	}
	eventually(t, "delivered", func() bool { return len(tr.delivered()) == 3 })
	eventually(t, "one held", func() bool { return status(t, w).HeldForReceipt == 1 })
	c.Advance(holdFor)
	eventually(t, "one kept", func() bool { return status(t, w).Counters.Kept == 1 })
	if got, want := queuedIDs(t, q, 1), v2IDs(t, 3, 3); !slices.Equal(got, want) {
		t.Fatalf("kept %v, want %v", got, want)
	}
}

// TestReceiptsStopWritesHeld: a worker that stops writes the direct sends
// it held to the queue as awaiting, so the restarted agent still has
// every record the cloud did not confirm.
func TestReceiptsStopWritesHeld(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	w := newWorker(t, receiptOptions(tr, q, newClock()))
	stop := run(t, w)
	waitMode(t, w, ModeDirect)
	for s := uint64(1); s <= 3; s++ {
		offer(t, w, v2Item(t, s))
	}
	eventually(t, "three held", func() bool { return status(t, w).HeldForReceipt == 3 })
	stop()
	st, err := q.Stats(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != 3 || st.Awaiting != 3 || st.Counters.Kept != 3 {
		t.Fatalf("after the stop: %+v", st)
	}
	if got, want := queuedIDs(t, q, 1), v2IDs(t, 1, 3); !slices.Equal(got, want) {
		t.Fatalf("queued %v, want %v", got, want)
	}
}
