package outbound

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

func TestNew(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	tests := []struct {
		name    string
		mutate  func(*Options)
		wantErr bool
	}{
		{"defaults", func(*Options) {}, false},
		{"no transport", func(o *Options) { o.Transport = nil }, true},
		{"no queue", func(o *Options) { o.Queue = nil }, true},
		{"negative input capacity", func(o *Options) { o.InputCapacity = -1 }, true},
		{"negative send batch", func(o *Options) { o.MaxSendBatch = -1 }, true},
		{"invalid queue options", func(o *Options) {
			o.QueueOptions = store.DefaultQueueOptions()
			o.QueueOptions.FlushBatchSize = 0
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Destination: 7, Transport: tr, Queue: q}
			tc.mutate(&o)
			w, err := New(o)
			if tc.wantErr {
				if err == nil {
					t.Fatal("New accepted invalid options")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Before Run nothing is sent, and the queue's own options
			// supply the flush settings.
			if w.Mode() != ModeBufferOnly || w.o.InputCapacity != DefaultInputCapacity ||
				w.o.MaxSendBatch != DefaultMaxSendBatch || w.qo != q.Options() || w.o.Name != "destination-7" {
				t.Errorf("mode %s, options %+v, queue options %+v", w.Mode(), w.o, w.qo)
			}
		})
	}
}

// TestDirectDelivery: while connected every item goes out at once, in
// order, and each Send takes what is waiting, up to MaxSendBatch.
func TestDirectDelivery(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	gate := make(chan struct{})
	tr.setOutcome(holdPayload("d-0000", gate, nil))
	o := workerOptions(tr, q, newTransitionLog())
	o.MaxSendBatch = 16
	// Room for the whole test: items that overflow to the queue while
	// connected wait for a flush trigger, which is not this test's subject.
	o.InputCapacity = 300
	w := newWorker(t, o)
	run(t, w)
	waitMode(t, w, ModeDirect)

	// The first Send holds the loop while 39 more items arrive; they
	// then go out in batches of 16, 16 and 7.
	offer(t, w, item("d", 0))
	eventually(t, "first send", func() bool { return len(tr.sendCalls()) == 1 })
	for i := 1; i < 40; i++ {
		offer(t, w, item("d", i))
	}
	close(gate)
	eventually(t, "40 delivered", func() bool { return len(tr.delivered()) == 40 })
	var sizes []int
	for _, c := range tr.sendCalls() {
		sizes = append(sizes, len(c))
	}
	if want := []int{1, 16, 16, 7}; !slices.Equal(sizes, want) {
		t.Errorf("send sizes %v, want %v", sizes, want)
	}
	// Then a stream of single offers.
	for i := 40; i < 300; i++ {
		offer(t, w, item("d", i))
	}
	eventually(t, "300 delivered", func() bool { return len(tr.delivered()) == 300 })
	if got := tr.delivered(); !slices.Equal(got, ids("d", 0, 300)) {
		t.Errorf("delivery order differs from offer order")
	}
	for _, c := range tr.sendCalls() {
		if len(c) > 16 {
			t.Fatalf("a Send of %d items, over MaxSendBatch 16", len(c))
		}
	}
	st := status(t, w)
	if st.Mode != ModeDirect || !st.Connected || st.Delivered != 300 || st.Buffered != 0 || st.Records != 0 {
		t.Errorf("status %+v", st)
	}
}

// TestConnectionLoss: a lost connection, signalled or met by a Send,
// switches to buffer-only; items are queued in order with their msgIds
// and nothing counts towards their retries.
func TestConnectionLoss(t *testing.T) {
	tests := []struct {
		name string
		lose func(tr *fakeTransport)
		// sends: Send calls made after the loss
		sends int
	}{
		{"disconnect signalled", func(tr *fakeTransport) { tr.setConnected(false) }, 0},
		{"send fails transiently while connected", func(tr *fakeTransport) {
			tr.setOutcome(func(context.Context, dest.Message) error {
				return fmt.Errorf("write: broken pipe: %w", dest.ErrNotConnected)
			})
		}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t, newStore(t), nil)
			tr := newFakeTransport(true)
			log := newTransitionLog()
			w := newWorker(t, workerOptions(tr, q, log))
			run(t, w)
			waitMode(t, w, ModeDirect)
			offer(t, w, item("before", 0))
			eventually(t, "delivery", func() bool { return len(tr.delivered()) == 1 })

			tc.lose(tr)
			if tc.sends == 0 {
				waitMode(t, w, ModeBufferOnly)
			}
			for i := range 50 {
				it := item("lost", i)
				it.Critical = i%10 == 0
				offer(t, w, it)
			}
			waitMode(t, w, ModeBufferOnly)
			eventually(t, "50 queued", func() bool { return len(queuedIDs(t, q, 1)) == 50 })
			recs := queued(t, q, 1)
			for i, r := range recs {
				want := item("lost", i)
				if r.MsgID != want.MsgID || string(r.Payload) != string(want.Payload) || r.Topic != want.Topic ||
					r.Critical != (i%10 == 0) || r.Attempts != 0 {
					t.Fatalf("queued record %d: %+v, want %+v with no attempts", i, r, want)
				}
			}
			if n := len(tr.sendCalls()) - 1; n != tc.sends {
				t.Errorf("%d Send calls after the loss, want %d", n, tc.sends)
			}
			st := status(t, w)
			if st.Buffered != 50 || st.Delivered != 1 || st.Counters.Rejected != 0 || st.Refused != 0 {
				t.Errorf("status %+v", st)
			}
			if tc.sends > 0 && st.LastError == "" {
				t.Error("the transient failure is not in LastError")
			}
			if got := log.list(); !slices.Contains(got, "direct→buffer-only") {
				t.Errorf("transitions %v lack direct→buffer-only", got)
			}
		})
	}
}

// TestRecovery: after an outage the queue drains in the background while
// new items go directly; every queued record is delivered once and
// acked, then the mode is direct again.
func TestRecovery(t *testing.T) {
	q := newQueue(t, newStore(t), func(o *store.QueueOptions) { o.FlushBatchSize = 20 })
	tr := newFakeTransport(true)
	log := newTransitionLog()
	w := newWorker(t, workerOptions(tr, q, log))
	run(t, w)
	waitMode(t, w, ModeDirect)

	tr.setConnected(false)
	waitMode(t, w, ModeBufferOnly)
	for i := range 50 {
		offer(t, w, item("old", i))
	}
	eventually(t, "50 queued", func() bool { return len(queuedIDs(t, q, 1)) == 50 })

	// The replay is held at its first record, so new items can be seen
	// going out during recovery.
	gate := make(chan struct{})
	tr.setOutcome(func(ctx context.Context, m dest.Message) error {
		if hasPrefix(m, "old") {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	tr.setConnected(true)
	waitMode(t, w, ModeRecovering)
	for i := range 20 {
		offer(t, w, item("new", i))
	}
	eventually(t, "new items delivered during recovery", func() bool {
		d := tr.deliveries()
		for _, id := range ids("new", 0, 20) {
			if d[id] != 1 {
				return false
			}
		}
		return true
	})
	if m := w.Mode(); m != ModeRecovering {
		t.Fatalf("mode %s while the replay is held", m)
	}
	close(gate)
	waitMode(t, w, ModeDirect)

	d := tr.deliveries()
	for _, id := range append(ids("old", 0, 50), ids("new", 0, 20)...) {
		if d[id] != 1 {
			t.Errorf("%s delivered %d times", id, d[id])
		}
	}
	// The replay keeps queue order.
	var replay []string
	for _, p := range tr.delivered() {
		if len(p) > 3 && p[:3] == "old" {
			replay = append(replay, p)
		}
	}
	if !slices.Equal(replay, ids("old", 0, 50)) {
		t.Errorf("replay order %v", replay)
	}
	for _, c := range tr.sendCalls() {
		if len(c) > 20 {
			t.Errorf("a Send of %d, over FlushBatchSize 20", len(c))
		}
	}
	st := status(t, w)
	if st.Records != 0 || st.Counters.Delivered != 50 || st.Replayed != 50 || st.Delivered != 20 ||
		st.LastFlushAttempt.IsZero() || st.LastFlushSuccess.IsZero() || st.Counters.Rejected != 0 {
		t.Errorf("status %+v", st)
	}
	if got, want := log.list(), []string{"buffer-only→direct", "direct→buffer-only", "buffer-only→recovering", "recovering→direct"}; !slices.Equal(got, want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
}

// TestConnectedAtStart: a worker that starts connected with records left
// by an earlier run recovers them; with an empty queue it goes direct.
func TestConnectedAtStart(t *testing.T) {
	tests := []struct {
		name    string
		records int
		want    []string
	}{
		{"empty queue", 0, []string{"buffer-only→direct"}},
		{"records left", 30, []string{"buffer-only→recovering", "recovering→direct"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t, newStore(t), nil)
			for i := range tc.records {
				if _, err := q.Enqueue(context.Background(), 1, record(item("left", i))); err != nil {
					t.Fatal(err)
				}
			}
			tr := newFakeTransport(true)
			log := newTransitionLog()
			w := newWorker(t, workerOptions(tr, q, log))
			run(t, w)
			waitMode(t, w, ModeDirect)
			eventually(t, "queue empty", func() bool { return status(t, w).Records == 0 })
			// setMode logs after it changed the mode, so the line may
			// trail the mode waitMode saw.
			eventually(t, fmt.Sprintf("transitions %v", tc.want), func() bool { return slices.Equal(log.list(), tc.want) })
			if got := tr.delivered(); !slices.Equal(got, ids("left", 0, tc.records)) {
				t.Errorf("delivered %v", got)
			}
		})
	}
}

// TestRejectionDeadLetter: a refused item is queued and rejected once; it
// is retried only when its retry wait is over, and is dead-lettered after
// maxRetries retries, while other items go on.
func TestRejectionDeadLetter(t *testing.T) {
	for _, maxRetries := range []int{0, 1, 3} {
		t.Run(fmt.Sprintf("maxRetries %d", maxRetries), func(t *testing.T) {
			q := newQueue(t, newStore(t), func(o *store.QueueOptions) {
				o.MaxRetries = maxRetries
				o.FlushIntervalMS = 10
			})
			tr := newFakeTransport(true)
			tr.setOutcome(func(_ context.Context, m dest.Message) error {
				if hasPrefix(m, "bad") {
					return dest.Rejectedf("schema mismatch")
				}
				return nil
			})
			clk := newClock()
			o := workerOptions(tr, q, newTransitionLog())
			o.Now = clk.Now
			w := newWorker(t, o)
			run(t, w)
			waitMode(t, w, ModeDirect)

			offer(t, w, item("bad", 0))
			offer(t, w, item("good", 0))
			rejected := func(n int64) func() bool {
				return func() bool { return status(t, w).Counters.Rejected == n }
			}
			eventually(t, "first rejection", rejected(1))
			for k := 1; k <= maxRetries; k++ {
				// Several flush ticks pass before the wait is over:
				// nothing is resent early.
				time.Sleep(50 * time.Millisecond)
				if st := status(t, w); st.Counters.Rejected != int64(k) || st.Records != 1 {
					t.Fatalf("before retry %d: rejected %d, records %d", k, st.Counters.Rejected, st.Records)
				}
				if r := queued(t, q, 1); len(r) != 1 || r[0].Attempts != k || r[0].MsgID != "bad-0000" {
					t.Fatalf("before retry %d: queued %+v", k, r)
				}
				clk.Advance(store.RetryWaits[min(k, len(store.RetryWaits))-1] + time.Second)
				eventually(t, fmt.Sprintf("rejection %d", k+1), rejected(int64(k+1)))
			}
			eventually(t, "dead letter", func() bool { return status(t, w).DeadLetters == 1 })
			st := status(t, w)
			if st.Records != 0 || st.Counters.DeadLettered != 1 || st.Buffered != 1 || st.Delivered != 1 || st.LastError == "" {
				t.Errorf("status %+v", st)
			}
			var badSends int
			for _, c := range tr.sendCalls() {
				for _, p := range c {
					if p == "bad-0000" {
						badSends++
					}
				}
			}
			if badSends != maxRetries+1 {
				t.Errorf("bad item sent %d times, want %d", badSends, maxRetries+1)
			}
			if m := w.Mode(); m != ModeDirect {
				t.Errorf("mode %s: a refusal is not an outage", m)
			}
		})
	}
}

// TestEphemeral: heartbeats go out when they can and are otherwise
// dropped and counted, never queued.
func TestEphemeral(t *testing.T) {
	tests := []struct {
		name          string
		connected     bool
		outcome       func(context.Context, dest.Message) error
		wantDelivered int
		wantDropped   int64
	}{
		{"connected", true, nil, 3, 0},
		{"down", false, nil, 0, 3},
		{"send fails transiently", true, func(context.Context, dest.Message) error { return errors.New("timeout") }, 0, 3},
		{"refused", true, func(context.Context, dest.Message) error { return dest.Rejectedf("no") }, 0, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t, newStore(t), nil)
			tr := newFakeTransport(tc.connected)
			tr.setOutcome(tc.outcome)
			w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
			run(t, w)
			want := ModeDirect
			if !tc.connected {
				want = ModeBufferOnly
			}
			waitMode(t, w, want)
			for i := range 3 {
				it := item("hb", i)
				it.Ephemeral = true
				offer(t, w, it)
			}
			eventually(t, "heartbeats handled", func() bool {
				st := status(t, w)
				return st.EphemeralDropped+st.Delivered == 3
			})
			st := status(t, w)
			if len(tr.delivered()) != tc.wantDelivered || st.EphemeralDropped != tc.wantDropped ||
				st.Records != 0 || st.Buffered != 0 || st.Counters.Enqueued != 0 {
				t.Errorf("delivered %d, status %+v", len(tr.delivered()), st)
			}
		})
	}
}

// TestDeadDestinationIsolation: a destination whose Send hangs costs its
// producers nothing (Offer falls through to the queue) and holds up no
// other destination; at stop everything it held is queued.
func TestDeadDestinationIsolation(t *testing.T) {
	// deadN is smaller: every Offer past the dead worker's input buffer
	// is a SQLite transaction.
	const n, deadN = 2000, 500
	st := newStore(t)
	q := newQueue(t, st, nil)

	deadTr := newFakeTransport(true)
	deadTr.setOutcome(hang)
	do := workerOptions(deadTr, q, newTransitionLog())
	do.InputCapacity = 16
	dead := newWorker(t, do)
	stopDead := run(t, dead)

	liveTr := newFakeTransport(true)
	lo := workerOptions(liveTr, q, newTransitionLog())
	lo.Destination = 2
	// Room for the whole burst, so every item goes out directly and the
	// pace measured is the direct path's.
	lo.InputCapacity = n
	live := newWorker(t, lo)
	run(t, live)
	waitMode(t, dead, ModeDirect)
	waitMode(t, live, ModeDirect)

	var wg sync.WaitGroup
	var slowest time.Duration
	wg.Go(func() {
		for i := range deadN {
			start := time.Now()
			if err := dead.Offer(context.Background(), item("dead", i)); err != nil {
				t.Errorf("offer to the dead destination: %v", err)
				return
			}
			slowest = max(slowest, time.Since(start))
		}
	})
	start := time.Now()
	for i := range n {
		offer(t, live, item("live", i))
	}
	eventually(t, "live destination delivered everything", func() bool { return len(liveTr.delivered()) == n })
	liveTook := time.Since(start)
	wg.Wait()
	if slowest > time.Second {
		t.Errorf("an Offer to the dead destination took %s", slowest)
	}
	if c := deadTr.sendCalls(); len(c) != 1 {
		t.Errorf("dead destination: %d Sends, want the one that hangs", len(c))
	}
	t.Logf("live destination: %d items in %s; slowest Offer to the dead one %s", n, liveTook, slowest)

	stopDead()
	if got := queuedIDs(t, q, 1); !sameSet(got, ids("dead", 0, deadN)) {
		t.Errorf("dead destination's queue holds %d records, want all %d offered", len(got), deadN)
	}
	if got := queuedIDs(t, q, 2); len(got) != 0 {
		t.Errorf("live destination's queue holds %v", got)
	}
	if s := status(t, dead); s.Buffered != deadN || s.Refused != 0 || s.Mode != ModeBufferOnly {
		t.Errorf("dead destination status %+v", s)
	}
	if s := status(t, live); s.Delivered != n || s.Buffered != 0 || s.Mode != ModeDirect {
		t.Errorf("live destination status %+v", s)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestFlushCycleLimits: one cycle sends at most MaxFlushPerCycle records
// in Sends of at most FlushBatchSize, and says whether more are ready.
func TestFlushCycleLimits(t *testing.T) {
	tests := []struct {
		name                string
		records, batch, max int
		wantSends           []int
		wantMore, drained   bool
	}{
		{"over the cycle limit", 250, 40, 100, []int{40, 40, 20}, true, false},
		{"under one batch", 30, 40, 100, []int{30}, false, true},
		{"exactly the cycle limit", 100, 50, 100, []int{50, 50}, false, true},
		{"empty", 0, 50, 100, nil, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t, newStore(t), func(o *store.QueueOptions) {
				o.FlushBatchSize, o.MaxFlushPerCycle = tc.batch, tc.max
			})
			for i := range tc.records {
				if _, err := q.Enqueue(context.Background(), 1, record(item("q", i))); err != nil {
					t.Fatal(err)
				}
			}
			tr := newFakeTransport(true)
			w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
			w.mode = ModeRecovering
			r, err := w.flushCycle(context.Background(), context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var sizes []int
			for _, c := range tr.sendCalls() {
				sizes = append(sizes, len(c))
			}
			if !slices.Equal(sizes, tc.wantSends) || r.more != tc.wantMore || r.drained != tc.drained {
				t.Errorf("sends %v, more %v, drained %v; want %v, %v, %v", sizes, r.more, r.drained, tc.wantSends, tc.wantMore, tc.drained)
			}
			sent := min(tc.records, tc.max)
			if got := queuedIDs(t, q, 1); !slices.Equal(got, ids("q", sent, tc.records)) {
				t.Errorf("left queued %d records, want %d", len(got), tc.records-sent)
			}
			s := status(t, w)
			if s.Replayed != int64(sent) || s.LastFlushAttempt.IsZero() || s.LastFlushSuccess.IsZero() {
				t.Errorf("status %+v", s)
			}
		})
	}
}

// TestFlushContinuesAtLimit: a recovery larger than MaxFlushPerCycle goes
// on cycle after cycle without waiting for the flush interval (an hour
// here).
func TestFlushContinuesAtLimit(t *testing.T) {
	q := newQueue(t, newStore(t), func(o *store.QueueOptions) { o.FlushBatchSize, o.MaxFlushPerCycle = 40, 100 })
	for i := range 450 {
		if _, err := q.Enqueue(context.Background(), 1, record(item("q", i))); err != nil {
			t.Fatal(err)
		}
	}
	tr := newFakeTransport(false)
	w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
	run(t, w)
	tr.setConnected(true)
	waitMode(t, w, ModeDirect)
	if got := tr.delivered(); !slices.Equal(got, ids("q", 0, 450)) {
		t.Errorf("delivered %d records", len(got))
	}
	for _, c := range tr.sendCalls() {
		if len(c) > 40 {
			t.Errorf("a Send of %d records", len(c))
		}
	}
	if s := status(t, w); s.Records != 0 || s.Replayed != 450 {
		t.Errorf("status %+v", s)
	}
}

// TestDepthTrigger: while connected, records the worker queues past
// FlushTriggerThreshold start a cycle without waiting for the interval.
func TestDepthTrigger(t *testing.T) {
	q := newQueue(t, newStore(t), func(o *store.QueueOptions) { o.FlushTriggerThreshold = 5 })
	tr := newFakeTransport(true)
	gate := make(chan struct{})
	tr.setOutcome(holdPayload("hold-0000", gate, nil))
	o := workerOptions(tr, q, newTransitionLog())
	o.InputCapacity = 1
	w := newWorker(t, o)
	run(t, w)
	waitMode(t, w, ModeDirect)
	// With the loop held in a Send and the input buffer full, Offers go
	// to the queue; their depth passes the threshold.
	offer(t, w, item("hold", 0))
	eventually(t, "held send", func() bool { return len(tr.sendCalls()) == 1 })
	for i := range 10 {
		offer(t, w, item("over", i))
	}
	close(gate)
	eventually(t, "queue flushed", func() bool { return status(t, w).Records == 0 })
	if s := status(t, w); s.Replayed == 0 {
		t.Errorf("status %+v", s)
	}
	d := tr.deliveries()
	for _, id := range ids("over", 0, 10) {
		if d[id] != 1 {
			t.Errorf("%s delivered %d times", id, d[id])
		}
	}
}

// TestRunExitQueuesEverything: when Run returns, every item it held, in a
// Send or in the input buffer, is queued (heartbeats excepted); later
// Offers write to the queue.
func TestRunExitQueuesEverything(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(true)
	tr.setOutcome(hang)
	o := workerOptions(tr, q, newTransitionLog())
	o.InputCapacity = 64
	w := newWorker(t, o)
	stop := run(t, w)
	waitMode(t, w, ModeDirect)
	offer(t, w, item("m", 0))
	eventually(t, "send in flight", func() bool { return len(tr.sendCalls()) == 1 })
	for i := 1; i < 31; i++ {
		offer(t, w, item("m", i))
		hb := item("hb", i)
		hb.Ephemeral = true
		offer(t, w, hb)
	}
	if n := len(queuedIDs(t, q, 1)); n != 0 {
		t.Fatalf("%d records queued before the stop", n)
	}
	stop()
	if got := queuedIDs(t, q, 1); !sameSet(got, ids("m", 0, 31)) {
		t.Errorf("queued after stop: %v", got)
	}
	after := item("m", 31)
	if err := w.Offer(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	if got := queuedIDs(t, q, 1); !slices.Contains(got, after.MsgID) {
		t.Error("an Offer after Run was not queued")
	}
	s := status(t, w)
	if s.Mode != ModeBufferOnly || s.EphemeralDropped != 30 || s.Buffered != 32 || s.Delivered != 0 {
		t.Errorf("status %+v", s)
	}
	if err := w.Run(context.Background()); err == nil {
		t.Error("a second Run was accepted")
	}
}

// TestPartialBatchFailure: when a batch is delivered only in part, exactly
// the delivered messages count as delivered; the rest stay (or become)
// queued with no retry counted.
func TestPartialBatchFailure(t *testing.T) {
	// firstThree delivers the first three messages of the batch of ten
	// and fails the rest as a dropped connection would.
	firstThree := func() func(context.Context, dest.Message) error {
		var mu sync.Mutex
		seen := 0
		return func(_ context.Context, m dest.Message) error {
			if !hasPrefix(m, "p-") {
				return nil
			}
			mu.Lock()
			defer mu.Unlock()
			seen++
			if seen <= 3 {
				return nil
			}
			return fmt.Errorf("connection reset: %w", dest.ErrNotConnected)
		}
	}
	tests := []struct {
		name string
		run  func(t *testing.T, w *Worker, tr *fakeTransport, q *store.Queue)
	}{
		{"flush cycle", func(t *testing.T, w *Worker, tr *fakeTransport, q *store.Queue) {
			for i := range 10 {
				if _, err := q.Enqueue(context.Background(), 1, record(item("p", i))); err != nil {
					t.Fatal(err)
				}
			}
			w.mode = ModeRecovering
			r, err := w.flushCycle(context.Background(), context.Background())
			if err == nil || r.drained || r.more {
				t.Errorf("cycle result %+v, %v: want a transient stop", r, err)
			}
			if s := status(t, w); s.Replayed != 3 || s.Counters.Delivered != 3 {
				t.Errorf("status %+v", s)
			}
		}},
		{"direct send", func(t *testing.T, w *Worker, tr *fakeTransport, q *store.Queue) {
			gate := make(chan struct{})
			outcome := firstThree()
			tr.setOutcome(holdPayload("hold-0000", gate, outcome))
			run(t, w)
			waitMode(t, w, ModeDirect)
			offer(t, w, item("hold", 0))
			eventually(t, "held send", func() bool { return len(tr.sendCalls()) == 1 })
			for i := range 10 {
				offer(t, w, item("p", i))
			}
			close(gate)
			waitMode(t, w, ModeBufferOnly)
			eventually(t, "7 queued", func() bool { return len(queuedIDs(t, q, 1)) == 7 })
			if c := tr.sendCalls(); len(c) != 2 || len(c[1]) != 10 {
				t.Fatalf("sends %v, want the held one and one batch of 10", c)
			}
			if s := status(t, w); s.Delivered != 4 || s.Buffered != 7 {
				t.Errorf("status %+v", s)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := newQueue(t, newStore(t), nil)
			tr := newFakeTransport(true)
			tr.setOutcome(firstThree())
			w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
			tc.run(t, w, tr, q)
			recs := queued(t, q, 1)
			var got []string
			for _, r := range recs {
				got = append(got, r.MsgID)
				if r.Attempts != 0 {
					t.Errorf("%s has %d attempts: a transient failure is not a rejection", r.MsgID, r.Attempts)
				}
			}
			if !slices.Equal(got, ids("p", 3, 10)) {
				t.Errorf("queued %v, want p-0003..p-0009", got)
			}
			d := tr.deliveries()
			for _, id := range ids("p", 0, 3) {
				if d[id] != 1 {
					t.Errorf("%s delivered %d times", id, d[id])
				}
			}
		})
	}
}

// TestOfferRefused: the queue's refusal reaches the caller of Offer and is
// counted.
func TestOfferRefused(t *testing.T) {
	q := newQueue(t, newStore(t), func(o *store.QueueOptions) {
		o.MaxBufferRecords = 2
		o.DropPolicy = store.DropNewest
	})
	tr := newFakeTransport(false)
	w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
	// Without Run the items go straight to the queue.
	offer(t, w, item("r", 0))
	offer(t, w, item("r", 1))
	err := w.Offer(context.Background(), item("r", 2))
	var full *store.FullError
	if !errors.As(err, &full) || !errors.Is(err, store.ErrBufferFull) {
		t.Fatalf("Offer into a full queue: %v", err)
	}
	s := status(t, w)
	if s.Refused != 1 || s.Buffered != 2 || s.Counters.Refused != 1 || s.LastError == "" {
		t.Errorf("status %+v", s)
	}
}

// TestBufferOnlyOfferIsDurable: while the destination is down, an offered
// item is in the store when Offer returns, so a crash in an outage loses
// nothing that was offered.
func TestBufferOnlyOfferIsDurable(t *testing.T) {
	q := newQueue(t, newStore(t), nil)
	tr := newFakeTransport(false)
	w := newWorker(t, workerOptions(tr, q, newTransitionLog()))
	run(t, w)
	waitMode(t, w, ModeBufferOnly)
	for i := range 20 {
		offer(t, w, item("m", i))
		if got := len(queuedIDs(t, q, w.o.Destination)); got != i+1 {
			t.Fatalf("after offer %d the queue holds %d records", i, got)
		}
	}
	if got := queuedIDs(t, q, w.o.Destination); !hasInOrder(got, ids("m", 0, 20)) {
		t.Fatalf("queued %v", got)
	}
}
