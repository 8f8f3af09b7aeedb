package mqttx

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestReconnectBackoffAndResubscribe: the broker goes away; the client
// reconnects on the 1,2,4,8 schedule (shortened to 20,40,80,160 ms), counts
// attempts, and when a fresh broker (no sessions) is back on the same port
// reconnects and makes its subscription again.
func TestReconnectBackoffAndResubscribe(t *testing.T) {
	tb := startBroker(t, 0)
	testReconnect(t, tb.url(), tb.stop, func() { startBroker(t, tb.port) })
}

// TestReconnectBackoffAndResubscribeIntegration runs the same against a
// private Mosquitto, stopped cleanly (it saves the session, subscription
// included, and restores it) and killed (the session is lost: only the
// client's own resubscription brings the message in).
func TestReconnectBackoffAndResubscribeIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: needs Mosquitto, skipped in -short mode")
	}
	for _, outage := range []struct {
		name string
		down func(*coretest.MosquittoServer)
	}{
		{"stop", (*coretest.MosquittoServer).Stop},
		{"kill", (*coretest.MosquittoServer).Kill},
	} {
		t.Run(outage.name, func(t *testing.T) {
			srv := coretest.PrivateMosquitto(t)
			testReconnect(t, srv.URL(), func() { outage.down(srv) }, srv.Start)
		})
	}
}

// testReconnect checks the reconnect schedule and the resubscription
// against the broker at brokerURL; down takes the broker away and up brings
// it back on the same port.
func testReconnect(t *testing.T, brokerURL string, down, up func()) {
	topic := uniqueID("resub")

	o := testOptions(t, brokerURL)
	var tr transitions
	o.OnStateChange = tr.record
	c := newClient(t, o)
	type attempt struct {
		n     int
		delay time.Duration
		at    time.Time
	}
	var mu sync.Mutex
	var attempts []attempt
	c.hooks.attempt = func(n int, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, attempt{n, d, time.Now()})
	}
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)

	down()
	waitState(t, c, StateReconnecting)
	coretest.Eventually(t, waitFor, "6 reconnect attempts", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(attempts) >= 6
	})
	if err := c.Check(t.Context()); !errors.Is(err, ErrNotConnected) || !strings.Contains(err.Error(), "reconnecting") {
		t.Errorf("Check while reconnecting = %v", err)
	}
	mu.Lock()
	seen := append([]attempt(nil), attempts[:6]...)
	mu.Unlock()
	ms := time.Millisecond
	wantDelays := []time.Duration{20 * ms, 40 * ms, 80 * ms, 160 * ms, 160 * ms, 160 * ms}
	for i, a := range seen {
		if a.n != i+1 || a.delay != wantDelays[i] {
			t.Errorf("attempt %d: number %d delay %s, want %d and %s", i, a.n, a.delay, i+1, wantDelays[i])
		}
		// Timers never fire early: the next attempt's hook runs after the
		// previous delay and a failed dial.
		if i > 0 && a.at.Sub(seen[i-1].at) < seen[i-1].delay {
			t.Errorf("attempt %d came %s after attempt %d, before its %s backoff", i, a.at.Sub(seen[i-1].at), i-1, seen[i-1].delay)
		}
	}
	if s := c.Stats(); s.ReconnectAttempts < 5 || s.ConsecutiveFailures < 5 || s.LastError == "" || !s.ConnectedSince.IsZero() {
		t.Errorf("Stats while down = %+v", s)
	}

	up()
	waitState(t, c, StateConnected)
	if s := c.Stats(); s.ConsecutiveFailures != 0 || s.LastError != "" {
		t.Errorf("Stats after reconnect = %+v", s)
	}
	pub := newClient(t, asPublisher(testOptions(t, brokerURL), false))
	start(t, pub)
	waitState(t, pub, StateConnected)
	publishOK(t, pub, topic, "after-restart")
	if got := in.waitCount(t, 1); got[0] != "after-restart" {
		t.Errorf("got %q", got)
	}
	want := []string{"stopped→connecting", "connecting→connected", "connected→reconnecting", "reconnecting→connected"}
	if got := tr.list(); !slices.Equal(got, want) {
		t.Errorf("transitions = %v, want %v", got, want)
	}
}

// TestFatalAndCooldownRecovery: MaxReconnectAttempts failed reconnects turn
// the client fatal; after the cooldown it reconnects with counters reset,
// and connects once a broker is there.
func TestFatalAndCooldownRecovery(t *testing.T) {
	port := coretest.FreePort(t)
	o := testOptions(t, fmt.Sprintf("tcp://127.0.0.1:%d", port))
	o.MaxReconnectAttempts = 3
	o.BackoffBase, o.BackoffMax = 10*time.Millisecond, 40*time.Millisecond
	o.FatalRecoveryCooldown = 100 * time.Millisecond
	var tr transitions
	var mu sync.Mutex
	var failuresOnRecovery []int
	var c *Client
	o.OnStateChange = func(from, to State) {
		tr.record(from, to)
		if from == StateFatal {
			mu.Lock()
			failuresOnRecovery = append(failuresOnRecovery, c.Stats().ConsecutiveFailures)
			mu.Unlock()
		}
	}
	c = newClient(t, o)
	var attempts []string
	c.hooks.attempt = func(n int, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		attempts = append(attempts, fmt.Sprintf("%d:%s", n, d))
	}
	start(t, c)

	coretest.Eventually(t, waitFor, "two fatal cycles", func() bool {
		return len(tr.list()) >= 6
	})
	want := []string{"stopped→connecting", "connecting→reconnecting", "reconnecting→fatal", "fatal→reconnecting", "reconnecting→fatal", "fatal→reconnecting"}
	if got := tr.list()[:6]; !slices.Equal(got, want) {
		t.Errorf("transitions = %v, want %v", got, want)
	}
	mu.Lock()
	if got := attempts[:6]; !slices.Equal(got, []string{"1:10ms", "2:20ms", "3:40ms", "1:10ms", "2:20ms", "3:40ms"}) {
		t.Errorf("attempts = %v, want the schedule restarting after the cooldown", got)
	}
	if !slices.Equal(failuresOnRecovery[:2], []int{0, 0}) {
		t.Errorf("consecutive failures on leaving fatal = %v, want reset to 0", failuresOnRecovery)
	}
	mu.Unlock()

	coretest.Eventually(t, waitFor, "fatal again", func() bool { return c.State() == StateFatal })
	if err := c.Check(t.Context()); err == nil || !strings.Contains(err.Error(), "fatal (3 failed reconnects)") {
		t.Errorf("Check in fatal = %v", err)
	}
	if got := value(t, c.m.state.WithLabelValues("fatal")); got != 1 {
		t.Errorf("fatal gauge = %v", got)
	}
	if got := value(t, c.m.reconnects); got < 6 {
		t.Errorf("reconnect attempts counter = %v, want >= 6", got)
	}

	startBroker(t, port)
	waitState(t, c, StateConnected)
	if s := c.Stats(); s.ConsecutiveFailures != 0 || s.ReconnectAttempts < 7 {
		t.Errorf("Stats after recovery = %+v", s)
	}
}

// TestStopDuringStuckConnect: a peer that accepts TCP but never answers the
// CONNECT holds the first attempt for up to ConnectTimeout; Stop must not
// wait for that.
func TestStopDuringStuckConnect(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var held sync.WaitGroup
	accepted := make(chan net.Conn, 4)
	held.Add(1)
	go func() {
		defer held.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- nc
		}
	}()
	defer func() {
		ln.Close()
		held.Wait()
		close(accepted)
		for nc := range accepted {
			nc.Close()
		}
	}()

	o := testOptions(t, "tcp://"+ln.Addr().String())
	o.ConnectTimeout = time.Minute
	c := newClient(t, o)
	stop := start(t, c)
	coretest.Eventually(t, waitFor, "the broker to get the connection", func() bool { return len(accepted) > 0 })
	if c.State() != StateConnecting {
		t.Fatalf("state %s, want connecting", c.State())
	}
	t0 := time.Now()
	stop()
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("Stop took %s with a connect attempt in progress", d)
	}
	if c.State() != StateStopped {
		t.Errorf("state %s", c.State())
	}
}
