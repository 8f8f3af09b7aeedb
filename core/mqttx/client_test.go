package mqttx

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/prometheus/client_golang/prometheus"
)

// TestConnectSubscribeReceive: subscriptions made before and after connect
// both deliver; the client reports connected in State, Stats, Check and
// metrics.
func TestConnectSubscribeReceive(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("t")

	o := testOptions(t, tb.url())
	var tr transitions
	o.OnStateChange = tr.record
	reg := o.Registerer.(*prometheus.Registry)
	c := newClient(t, o)
	if err := c.Check(t.Context()); !errors.Is(err, ErrNotConnected) {
		t.Errorf("Check before start = %v, want ErrNotConnected", err)
	}
	before := newInbox()
	if err := c.Subscribe(topic+"/before/#", 1, before.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)

	after := newInbox()
	if err := c.Subscribe(topic+"/after/+", 1, after.handler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic+"/after/+", 1, after.handler(nil)); err == nil {
		t.Error("subscribing the same filter twice succeeded")
	}

	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	publishOK(t, pub, topic+"/before/x/y", "one")
	// The live subscription is made asynchronously: publish until it lands.
	coretest.Eventually(t, waitFor, "the subscription made after connect", func() bool {
		publishOK(t, pub, topic+"/after/z", "two")
		return len(after.payloads()) > 0
	})
	if got := before.waitCount(t, 1); got[0] != "one" {
		t.Errorf("before: got %q", got)
	}
	m := <-before.ch
	if m.Topic != topic+"/before/x/y" || m.QoS != 1 || m.Duplicate {
		t.Errorf("message = %+v", m)
	}

	if err := c.Check(t.Context()); err != nil {
		t.Errorf("Check while connected = %v", err)
	}
	s := c.Stats()
	if s.State != StateConnected || s.ConnectedSince.IsZero() || s.ReconnectAttempts != 0 || s.LastError != "" {
		t.Errorf("Stats = %+v", s)
	}
	if got := value(t, c.m.state.WithLabelValues("connected")); got != 1 {
		t.Errorf("state gauge connected = %v", got)
	}
	if got := value(t, c.m.received); got < 2 {
		t.Errorf("received = %v", got)
	}
	if fams, err := reg.Gather(); err != nil || len(fams) != 12 {
		t.Errorf("gathered %d metric families, err %v", len(fams), err)
	}
	if got := tr.list(); !slices.Equal(got, []string{"stopped→connecting", "connecting→connected"}) {
		t.Errorf("transitions = %v", got)
	}
}

// asPublisher names o for a second, publishing client. shared is true for
// the machine's Mosquitto, which outlives the test: there clients use clean
// sessions so nothing stays behind. On the embedded broker every client
// keeps a persistent session: mochi v2.7.9 can deadlock in Close when a
// clean-session client's disconnect (which deletes the session) races with
// it (mochi-mqtt/server#488), and the broker dies with the test anyway.
func asPublisher(o Options, shared bool) Options {
	o.CleanSession = shared
	o.Name = "test-publisher"
	return o
}

// TestHandlerErrorRedeliveredAfterReconnect: a failed handler leaves the
// message unacknowledged; with ReconnectAfterUnacked 1 the client reconnects
// at once and the broker resends it (DUP set) on the resumed session. Once
// a handler succeeds the message is acknowledged and never comes back.
func TestHandlerErrorRedeliveredAfterReconnect(t *testing.T) {
	tb := startBroker(t, 0)
	testRedelivery(t, tb.url(), false)
}

// TestHandlerErrorRedeliveredAfterReconnectIntegration runs the same on the
// machine's Mosquitto.
func TestHandlerErrorRedeliveredAfterReconnectIntegration(t *testing.T) {
	testRedelivery(t, "tcp://"+coretest.MQTTAddr(t), true)
}

// testRedelivery: shared marks a broker that outlives the test.
func testRedelivery(t *testing.T, brokerURL string, shared bool) {
	topic := uniqueID("edgeplat-test/redeliver")
	o := testOptions(t, brokerURL)
	o.ReconnectAfterUnacked = 1
	if shared {
		forgetSession(t, brokerURL, o.ClientID)
	}
	c := newClient(t, o)
	var mu sync.Mutex
	failed := map[string]bool{}
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(func(m Message) error {
		mu.Lock()
		defer mu.Unlock()
		if !failed[string(m.Payload)] {
			failed[string(m.Payload)] = true
			return errors.New("transient failure")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, brokerURL), shared))
	start(t, pub)
	waitState(t, pub, StateConnected)

	publishOK(t, pub, topic, "m1")
	in.waitCount(t, 2)
	waitState(t, c, StateConnected)
	publishOK(t, pub, topic, "m2")
	in.waitCount(t, 4)
	// Let a wrong third delivery of m1 or m2 show up.
	time.Sleep(200 * time.Millisecond)
	got := in.payloads()
	if !slices.Equal(got, []string{"m1", "m1", "m2", "m2"}) {
		t.Fatalf("deliveries = %q, want each message twice (failed, then redelivered)", got)
	}
	in.mu.Lock()
	dups := []bool{in.msgs[0].Duplicate, in.msgs[1].Duplicate, in.msgs[2].Duplicate, in.msgs[3].Duplicate}
	in.mu.Unlock()
	if !slices.Equal(dups, []bool{false, true, false, true}) {
		t.Errorf("duplicate flags = %v, want the redeliveries marked", dups)
	}
	if got := value(t, c.m.handlerErrors); got != 2 {
		t.Errorf("handler errors = %v, want 2", got)
	}
	if got := value(t, c.m.forcedReconn); got != 2 {
		t.Errorf("redelivery reconnects = %v, want 2", got)
	}
}

// TestLoneUnackedRedeliveredAfterDelay: one failed message, far fewer than
// ReconnectAfterUnacked, still comes back: RedeliverAfter after it the
// client reconnects, once, and the broker resends it.
func TestLoneUnackedRedeliveredAfterDelay(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("lone")
	o := testOptions(t, tb.url())
	o.ReconnectAfterUnacked = 10
	o.RedeliverAfter = 300 * time.Millisecond
	c := newClient(t, o)
	var failedOnce atomic.Bool
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(func(Message) error {
		if failedOnce.CompareAndSwap(false, true) {
			return errors.New("transient failure")
		}
		return nil
	})); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)

	t0 := time.Now()
	publishOK(t, pub, topic, "lone")
	in.waitCount(t, 2)
	if waited := time.Since(t0); waited < o.RedeliverAfter {
		t.Errorf("redelivered after %s, before RedeliverAfter %s", waited, o.RedeliverAfter)
	}
	in.mu.Lock()
	second := in.msgs[1]
	in.mu.Unlock()
	if string(second.Payload) != "lone" || !second.Duplicate {
		t.Errorf("second delivery %+v, want the message again with DUP", second)
	}
	waitState(t, c, StateConnected)
	// The redelivered copy was acknowledged: nothing more comes, and the
	// timer of the ended connection does not fire again.
	time.Sleep(2 * o.RedeliverAfter)
	if got := in.payloads(); len(got) != 2 {
		t.Errorf("deliveries = %q, want 2", got)
	}
	if got := value(t, c.m.forcedReconn); got != 1 {
		t.Errorf("redelivery reconnects = %v, want 1", got)
	}
}

// forgetSession removes clientID's persistent session from the broker when
// the test ends (a clean-session connect with the same id discards it), so
// a shared broker keeps nothing from tests.
func forgetSession(t *testing.T, brokerURL, clientID string) {
	t.Cleanup(func() {
		o := testOptions(t, brokerURL)
		o.Name = "session-cleaner"
		o.ClientID = clientID
		o.CleanSession = true
		c, err := New(o)
		if err != nil {
			t.Error(err)
			return
		}
		if err := c.Start(context.Background()); err != nil {
			t.Error(err)
			return
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- c.Run(ctx) }()
		deadline := time.Now().Add(waitFor)
		for c.State() != StateConnected && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		<-done
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = c.Stop(sctx)
	})
}

// TestUnackedRedeliveredOnSessionResume: without the forced reconnect, an
// unacknowledged message stays with the broker and comes back when the
// persistent session resumes, here in a new process (a new client with the
// same id).
func TestUnackedRedeliveredOnSessionResume(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("resume")

	o := testOptions(t, tb.url())
	o.ReconnectAfterUnacked = 0
	o.RedeliverAfter = 0
	c := newClient(t, o)
	first := newInbox()
	if err := c.Subscribe(topic, 1, first.handler(func(Message) error { return errors.New("down") })); err != nil {
		t.Fatal(err)
	}
	stopFirst := start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	publishOK(t, pub, topic, "keep-me")
	first.waitCount(t, 1)
	time.Sleep(200 * time.Millisecond)
	if got := first.payloads(); len(got) != 1 {
		t.Fatalf("first client got %q; no redelivery expected on the same connection", got)
	}
	stopFirst()

	o2 := o
	o2.Registerer = prometheus.NewRegistry()
	c2 := newClient(t, o2)
	second := newInbox()
	if err := c2.Subscribe(topic, 1, second.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, c2)
	second.waitCount(t, 1)
	m := <-second.ch
	if string(m.Payload) != "keep-me" || !m.Duplicate {
		t.Errorf("redelivered %+v, want keep-me with DUP", m)
	}
}

// TestHandlerWorkersKeepTopicOrder: with several workers, messages of one
// topic still arrive in order.
func TestHandlerWorkersKeepTopicOrder(t *testing.T) {
	tb := startBroker(t, 0)
	base := uniqueID("workers")
	o := testOptions(t, tb.url())
	o.HandlerWorkers = 4
	o.HandlerBuffer = 4
	c := newClient(t, o)
	var mu sync.Mutex
	perTopic := map[string][]string{}
	var total int
	if err := c.Subscribe(base+"/+", 1, func(_ context.Context, m Message) error {
		time.Sleep(time.Millisecond) // give other workers a chance to overtake
		mu.Lock()
		defer mu.Unlock()
		perTopic[m.Topic] = append(perTopic[m.Topic], string(m.Payload))
		total++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, asPublisher(testOptions(t, tb.url()), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	const perT = 40
	for i := range perT {
		for k := range 4 {
			if err := pub.Publish(t.Context(), fmt.Sprintf("%s/%d", base, k), 1, false, fmt.Appendf(nil, "%03d", i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	coretest.Eventually(t, waitFor, "all messages", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return total == 4*perT
	})
	mu.Lock()
	defer mu.Unlock()
	for topic, got := range perTopic {
		if !slices.IsSorted(got) || len(got) != perT {
			t.Errorf("%s: %d messages, sorted %v", topic, len(got), slices.IsSorted(got))
		}
	}
}

// TestPublishAndSubscribeAfterStop: a stopped client refuses work, and
// stopping twice or stopping an unstarted client is fine.
func TestPublishAndSubscribeAfterStop(t *testing.T) {
	c := newClient(t, testOptions(t, "tcp://127.0.0.1:1"))
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(t.Context(), "a", 1, false, nil); !errors.Is(err, ErrStopped) {
		t.Errorf("Publish after Stop = %v", err)
	}
	if err := c.Subscribe("a", 1, func(context.Context, Message) error { return nil }); !errors.Is(err, ErrStopped) {
		t.Errorf("Subscribe after Stop = %v", err)
	}
	if err := c.Run(t.Context()); err == nil {
		t.Error("Run after Stop succeeded")
	}
	if err := c.Publish(t.Context(), "a/+", 1, false, nil); err == nil {
		t.Error("publish to a wildcard topic succeeded")
	}
	if c.State() != StateStopped {
		t.Errorf("state %s", c.State())
	}
}

// TestPanickingHandlerDoesNotCrash: a panic is an unacknowledged failure.
func TestPanickingHandlerDoesNotCrash(t *testing.T) {
	tb := startBroker(t, 0)
	topic := uniqueID("panic")
	o := testOptions(t, tb.url())
	o.ReconnectAfterUnacked = 0
	o.RedeliverAfter = 0
	c := newClient(t, o)
	done := make(chan struct{})
	var once sync.Once
	if err := c.Subscribe(topic, 1, func(context.Context, Message) error {
		defer once.Do(func() { close(done) })
		panic("boom")
	}); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	publishOK(t, c, topic, "x")
	<-done
	coretest.Eventually(t, waitFor, "handler error counted", func() bool { return value(t, c.m.handlerErrors) == 1 })
	if c.State() != StateConnected {
		t.Errorf("state %s", c.State())
	}
}
