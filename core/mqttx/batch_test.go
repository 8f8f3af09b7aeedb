package mqttx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestBatchHandlerTakesWhatWaits: while the batch handler is held up,
// messages queue in the worker's buffer; the next call gets them together,
// up to HandlerBatch, and every message arrives once, in order.
func TestBatchHandlerTakesWhatWaits(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("batch")
	o := testOptions(t, tb.url())
	o.HandlerBuffer, o.HandlerBatch = 64, 16
	c := newClient(t, o)
	release := make(chan struct{})
	var (
		mu    sync.Mutex
		got   []string
		sizes []int
	)
	if err := c.SubscribeBatch(topic, 1, func(_ context.Context, ms []Message) []error {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, len(ms))
		for _, m := range ms {
			got = append(got, string(m.Payload))
		}
		mu.Unlock()
		if first {
			<-release
		}
		return make([]error, len(ms))
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	const n = 40
	// The first message alone: its handler must run without waiting for
	// company. Were the rest published at once, some could arrive before
	// the worker woke, and join it, which is right too.
	publishOK(t, pub, topic, "000")
	coretest.Eventually(t, waitFor, "the first message handled on its own", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sizes) == 1
	})
	for i := 1; i < n; i++ {
		publishOK(t, pub, topic, fmt.Sprintf("%03d", i))
	}
	// Received counts messages handed to a worker: past the one held in
	// the handler, they wait in its buffer. The broker's inflight window
	// may keep the rest, so wait for some, not all.
	coretest.Eventually(t, waitFor, "messages to queue behind the held batch", func() bool { return value(t, c.m.received) >= 9 })
	close(release)
	coretest.Eventually(t, waitFor, "every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == n
	})
	mu.Lock()
	defer mu.Unlock()
	want := make([]string, n)
	for i := range want {
		want[i] = fmt.Sprintf("%03d", i)
	}
	if !slices.Equal(got, want) {
		t.Errorf("messages = %v, want %v in order, once each", got, want)
	}
	if sizes[0] != 1 {
		t.Errorf("first batch had %d messages; the first message must not wait for company", sizes[0])
	}
	if slices.Max(sizes) < 2 || slices.Max(sizes) > o.HandlerBatch {
		t.Errorf("batch sizes %v: want some above 1 and none above %d", sizes, o.HandlerBatch)
	}
}

// TestBatchResultsSettleEachMessage: each message's own result decides its
// acknowledgement; a failed one comes back after a reconnect, the others
// do not.
func TestBatchResultsSettleEachMessage(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("batch-settle")
	o := testOptions(t, tb.url())
	o.ReconnectAfterUnacked = 1
	c := newClient(t, o)
	var (
		mu     sync.Mutex
		seen   = map[string]int{}
		failed bool
	)
	if err := c.SubscribeBatch(topic, 1, func(_ context.Context, ms []Message) []error {
		mu.Lock()
		defer mu.Unlock()
		errs := make([]error, len(ms))
		for i, m := range ms {
			p := string(m.Payload)
			seen[p]++
			if p == "fail-once" && !failed {
				failed = true
				errs[i] = errors.New("backend down")
			}
		}
		return errs
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	// The failing message last: its failure ends the connection at once
	// (ReconnectAfterUnacked 1), and a message handled after it on that
	// connection would rightly come back too, acknowledged or not.
	for _, p := range []string{"a", "b", "fail-once"} {
		publishOK(t, pub, topic, p)
	}
	coretest.Eventually(t, waitFor, "the failed message to come back", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["fail-once"] == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if seen["a"] != 1 || seen["b"] != 1 {
		t.Errorf("deliveries %v: acknowledged messages must not come back", seen)
	}
	if v := value(t, c.m.handlerErrors); v != 1 {
		t.Errorf("handler errors = %v, want 1", v)
	}
}

// TestBatchAndPlainSubscriptionsOverlap: a message that a batch
// subscription and a plain one both match reaches each handler once.
func TestBatchAndPlainSubscriptionsOverlap(t *testing.T) {
	tb := startBroker(t, 0)
	base := uniqueID("overlap")
	o := testOptions(t, tb.url())
	c := newClient(t, o)
	var mu sync.Mutex
	batched, plain := map[string]int{}, map[string]int{}
	if err := c.SubscribeBatch(base+"/#", 1, func(_ context.Context, ms []Message) []error {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range ms {
			batched[m.Topic]++
		}
		return make([]error, len(ms))
	}); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(base+"/both", 1, func(_ context.Context, m Message) error {
		mu.Lock()
		defer mu.Unlock()
		plain[m.Topic]++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	for range 5 {
		publishOK(t, c, base+"/only", "x")
		publishOK(t, c, base+"/both", "x")
	}
	coretest.Eventually(t, waitFor, "every delivery", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return batched[base+"/only"] == 5 && batched[base+"/both"] == 5 && plain[base+"/both"] == 5
	})
	mu.Lock()
	defer mu.Unlock()
	if len(plain) != 1 {
		t.Errorf("plain handler saw %v, want only %s/both", plain, base)
	}
}

// TestPanickingBatchHandlerDoesNotCrash: a panic fails the whole batch,
// unacknowledged, and the client stays connected.
func TestPanickingBatchHandlerDoesNotCrash(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("batch-panic")
	o := testOptions(t, tb.url())
	o.ReconnectAfterUnacked = 0
	o.RedeliverAfter = 0
	c := newClient(t, o)
	if err := c.SubscribeBatch(topic, 1, func(context.Context, []Message) []error { panic("boom") }); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	publishOK(t, c, topic, "x")
	coretest.Eventually(t, waitFor, "handler error counted", func() bool { return value(t, c.m.handlerErrors) == 1 })
	if c.State() != StateConnected {
		t.Errorf("state %s", c.State())
	}
}

func TestCallBatchHandlerMiscount(t *testing.T) {
	errs := callBatchHandler(context.Background(), func(context.Context, []Message) []error { return nil },
		[]Message{{Topic: "a"}, {Topic: "b"}})
	if len(errs) != 2 || errs[0] == nil || errs[1] == nil {
		t.Errorf("errs = %v, want an error for each message", errs)
	}
}
