package mqttx

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestQueueFlushedInOrderBeforeNewPublishes: messages published while the
// broker is down are queued (Publish returns ErrQueued); after the reconnect
// they reach a subscriber in order, and publishes made the moment the client
// is connected again come after all of them.
func TestQueueFlushedInOrderBeforeNewPublishes(t *testing.T) {
	tb := startBroker(t, 0)
	// The restarted broker has no sessions, so the publishing client is its
	// own subscriber: on reconnect it subscribes before it flushes, so it is
	// a subscriber that is surely in place.
	testQueueFlushOrder(t, tb.url(), tb.stop, func() { startBroker(t, tb.port) }, false)
}

// TestQueueFlushedInOrderBeforeNewPublishesIntegration runs the same
// against a private Mosquitto stopped cleanly, with a separate subscriber:
// Mosquitto keeps that subscriber's session over the restart and queues for
// it until it is back, so it sees everything whichever client reconnects
// first.
func TestQueueFlushedInOrderBeforeNewPublishesIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs Mosquitto, skipped in -short mode")
	}
	srv := coretest.PrivateMosquitto(t)
	testQueueFlushOrder(t, srv.URL(), srv.Stop, srv.Start, true)
}

// testQueueFlushOrder publishes 200 messages while down has taken the
// broker at brokerURL away, 5 more as soon as the client is connected again
// after up, and checks that a subscriber got the 200 in order and then the
// 5. separate makes the subscriber another client; otherwise the
// publishing client subscribes to its own topic.
func testQueueFlushOrder(t *testing.T, brokerURL string, down, up func(), separate bool) {
	topic := uniqueID("order")

	o := testOptions(t, brokerURL)
	o.MaxInflight = 8
	c := newClient(t, o)
	in := newInbox()
	if separate {
		so := testOptions(t, brokerURL)
		so.Name = "test-subscriber"
		sub := newClient(t, so)
		if err := sub.Subscribe(topic, 1, in.handler(nil)); err != nil {
			t.Fatal(err)
		}
		start(t, sub)
		// Connected means subscribed: the client subscribes before it
		// reports the connection.
		waitState(t, sub, StateConnected)
	} else if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var newErrs sync.Map
	var armed sync.Once
	arm := make(chan struct{})
	c.opts.OnStateChange = func(from, to State) {
		select {
		case <-arm:
		default:
			return
		}
		if to != StateConnected {
			return
		}
		armed.Do(func() {
			// Runs before the flusher starts: these queue behind the backlog.
			for i := range 5 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), waitFor)
					defer cancel()
					newErrs.Store(i, c.Publish(ctx, topic, 1, false, []byte(fmt.Sprintf("new-%d", i))))
				}()
				// Keep their order among themselves for the assertion. (Not
				// coretest.Eventually: this is not the test's goroutine.)
				for deadline := time.Now().Add(waitFor); c.Stats().QueueLength < 200+i+1 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	start(t, c)
	waitState(t, c, StateConnected)

	down()
	waitState(t, c, StateReconnecting)
	for i := range 200 {
		if err := c.Publish(t.Context(), topic, 1, false, []byte(fmt.Sprintf("q-%03d", i))); !isQueued(err) {
			t.Fatalf("publish %d while down = %v, want ErrQueued", i, err)
		}
	}
	if s := c.Stats(); s.QueueLength != 200 {
		t.Fatalf("queue length %d, want 200", s.QueueLength)
	}
	close(arm)
	up()
	got := in.waitCount(t, 205)
	wg.Wait()

	want := make([]string, 0, 205)
	for i := range 200 {
		want = append(want, fmt.Sprintf("q-%03d", i))
	}
	for i := range 5 {
		want = append(want, fmt.Sprintf("new-%d", i))
	}
	if !slices.Equal(got[:200], want[:200]) {
		t.Fatalf("queued messages out of order or missing: %q", got[:200])
	}
	if !slices.Equal(got[200:205], want[200:]) {
		t.Errorf("new publishes = %q, want them after the backlog, in order", got[200:205])
	}
	newErrs.Range(func(k, v any) bool {
		if v != nil {
			t.Errorf("new publish %v: %v", k, v)
		}
		return true
	})
	if s := c.Stats(); s.QueueLength != 0 || s.QueueDropped != 0 {
		t.Errorf("Stats after flush = %+v", s)
	}
	if got := value(t, c.m.publishes); got < 205 {
		t.Errorf("publishes = %v", got)
	}
}

// TestQueueOverflowDropsOldest: over capacity the oldest queued messages
// are dropped and counted; the rest are flushed in order once a broker
// appears.
func TestQueueOverflowDropsOldest(t *testing.T) {
	port := coretest.FreePort(t)
	topic := uniqueID("overflow")
	o := testOptions(t, fmt.Sprintf("tcp://127.0.0.1:%d", port))
	o.QueueCapacity = 5
	c := newClient(t, o)
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateReconnecting) // nothing listens: the first attempt failed
	for i := range 8 {
		if err := c.Publish(t.Context(), topic, 1, false, []byte(fmt.Sprintf("m%d", i))); !isQueued(err) {
			t.Fatalf("publish %d = %v, want ErrQueued", i, err)
		}
	}
	if s := c.Stats(); s.QueueLength != 5 || s.QueueDropped != 3 {
		t.Errorf("Stats = %+v, want 5 queued and 3 dropped", s)
	}
	if got := value(t, c.m.queueDropped); got != 3 {
		t.Errorf("dropped counter = %v, want 3", got)
	}
	if got := value(t, c.m.queueLength); got != 5 {
		t.Errorf("queue length gauge = %v, want 5", got)
	}
	startBroker(t, port)
	in.waitCount(t, 5)
	time.Sleep(100 * time.Millisecond)
	if got := in.payloads(); !slices.Equal(got, []string{"m3", "m4", "m5", "m6", "m7"}) {
		t.Errorf("flushed %q, want the newest 5 in order", got)
	}
}

// TestStopDisconnectsAndDropsTheQueue: a connected client stops cleanly; a
// client that never connected drops what it queued (the queue is memory
// only) and says so in its stats.
func TestStopDisconnectsAndDropsTheQueue(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("drain")
	c := newClient(t, testOptions(t, tb.url()))
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitState(t, c, StateConnected)
	publishOK(t, c, topic, "before-stop")
	in.waitCount(t, 1)
	stop()
	if c.State() != StateStopped {
		t.Errorf("state after Stop = %s", c.State())
	}
	if err := c.Check(t.Context()); err == nil {
		t.Error("Check after Stop = nil")
	}

	down := newClient(t, testOptions(t, fmt.Sprintf("tcp://127.0.0.1:%d", coretest.FreePort(t))))
	stopDown := start(t, down)
	waitState(t, down, StateReconnecting)
	for i := range 3 {
		if err := down.Publish(t.Context(), topic, 1, false, []byte{byte(i)}); !isQueued(err) {
			t.Fatalf("publish = %v, want ErrQueued", err)
		}
	}
	stopDown()
	if s := down.Stats(); s.QueueLength != 0 || s.State != StateStopped {
		t.Errorf("Stats after Stop = %+v", s)
	}
	if err := down.Publish(t.Context(), topic, 1, false, nil); err != ErrStopped {
		t.Errorf("publish after Stop = %v", err)
	}
}
