package storetest

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

func testSetNXWithTTL(t *testing.T, e *env) {
	k, forever := e.name("msgid"), e.name("forever")
	if ok, err := e.st.SetNX(e.ctx, k, "1", 100*time.Millisecond); !ok || err != nil {
		t.Fatalf("first SetNX = %v, %v; want true", ok, err)
	}
	if ok, err := e.st.SetNX(e.ctx, k, "2", time.Hour); ok || err != nil {
		t.Fatalf("repeated SetNX = %v, %v; want false: a duplicate msgId", ok, err)
	}
	coretest.Eventually(t, wait, "the key to expire", func() bool {
		ok, err := e.st.SetNX(e.ctx, k, "3", time.Hour)
		if err != nil {
			t.Fatalf("SetNX: %v", err)
		}
		return ok
	})
	if ok, _ := e.st.SetNX(e.ctx, k, "4", time.Hour); ok {
		t.Error("the key set again after expiry did not take")
	}
	if ok, err := e.st.SetNX(e.ctx, forever, "1", 0); !ok || err != nil {
		t.Fatalf("SetNX without TTL = %v, %v", ok, err)
	}
	time.Sleep(20 * time.Millisecond)
	if ok, _ := e.st.SetNX(e.ctx, forever, "2", 0); ok {
		t.Error("a key without TTL went away")
	}
}

func testPubSub(t *testing.T, e *env) {
	a, b, other := e.name("chan-a"), e.name("chan-b"), e.name("chan-other")
	sub, err := e.st.Subscribe(e.ctx, a, b)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	second, err := e.st.Subscribe(e.ctx, a, a) // a duplicate channel subscribes once
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer second.Close()

	payload := []byte("m1")
	for _, m := range []struct {
		ch, p string
	}{{a, "m1"}, {other, "lost"}, {b, "m2"}, {a, "m3"}} {
		if m.p == "m1" {
			if err := e.st.Publish(e.ctx, m.ch, payload); err != nil {
				t.Fatalf("Publish: %v", err)
			}
			payload[0] = 'X' // the caller may reuse its buffer
			continue
		}
		if err := e.st.Publish(e.ctx, m.ch, []byte(m.p)); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	receive := func(s streamstore.Subscription, n int) []streamstore.Message {
		t.Helper()
		var got []streamstore.Message
		for len(got) < n {
			select {
			case m, ok := <-s.C():
				if !ok {
					t.Fatalf("subscription closed after %d of %d messages", len(got), n)
				}
				got = append(got, m)
			case <-time.After(wait):
				t.Fatalf("received %d of %d messages", len(got), n)
			}
		}
		return got
	}
	got := receive(sub, 3)
	var onA []string
	for _, m := range got {
		switch m.Channel {
		case a:
			onA = append(onA, string(m.Payload))
		case b:
			if string(m.Payload) != "m2" {
				t.Errorf("on %s got %q", b, m.Payload)
			}
		default:
			t.Errorf("message on unsubscribed channel %s", m.Channel)
		}
	}
	if !slices.Equal(onA, []string{"m1", "m3"}) {
		t.Errorf("on %s got %q, want m1 then m3", a, onA)
	}
	if got := receive(second, 2); string(got[0].Payload) != "m1" || string(got[1].Payload) != "m3" {
		t.Errorf("second subscriber got %v", got)
	}
	if sub.Dropped() != 0 {
		t.Errorf("Dropped = %d with a reading subscriber", sub.Dropped())
	}

	if err := sub.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	_ = sub.Close() // twice is fine
	coretest.Eventually(t, wait, "C to close after Close", func() bool {
		select {
		case _, ok := <-sub.C():
			return !ok
		default:
			return false
		}
	})
	// Publishing to a channel nobody listens to is fine.
	if err := e.st.Publish(e.ctx, other, []byte("x")); err != nil {
		t.Errorf("Publish without subscribers: %v", err)
	}
	if _, err := e.st.Subscribe(e.ctx); err == nil {
		t.Error("Subscribe to no channels succeeded")
	}
}

func testStreamsDiscovery(t *testing.T, e *env) {
	// Tenant ids carry the test's unique prefix, so the exact pattern below
	// only sees this test's streams even on a shared Redis. It goes without
	// its braces: these are tenant names as the roles write them, which
	// Redis Cluster spreads over slots by tenant.
	prefix := strings.Trim(e.prefix, "{}")
	tenant := func(id, suffix string) string {
		n := "tenant:" + prefix + "-" + id + ":agent:devices:" + suffix
		e.track(n)
		return n
	}
	t1, t2 := tenant("t1", "ingestion"), tenant("t2", "ingestion")
	e.add(t1, 1)
	e.ensureGroup(t2, "device-writers", "0") // an empty stream counts
	e.add(tenant("t1", "dlq"), 1)
	if ok, err := e.st.SetNX(e.ctx, tenant("t9", "ingestion"), "not a stream", time.Hour); !ok || err != nil {
		t.Fatalf("SetNX: %v %v", ok, err)
	}
	mine := "tenant:" + prefix + "-*:agent:devices:ingestion"
	streams := func(pattern string) []string {
		t.Helper()
		got, err := e.st.Streams(e.ctx, pattern)
		if err != nil {
			t.Fatalf("Streams(%s): %v", pattern, err)
		}
		return got
	}
	if got := streams(mine); !slices.Equal(got, []string{t1, t2}) {
		t.Errorf("Streams(%s) = %v, want %v", mine, got, []string{t1, t2})
	}
	// A tenant appearing later is discovered on the next call.
	t3 := tenant("t3", "ingestion")
	e.add(t3, 1)
	if got := streams(mine); !slices.Equal(got, []string{t1, t2, t3}) {
		t.Errorf("after a new tenant, Streams = %v", got)
	}
	// The production pattern sees them too, among whatever else exists.
	all := streams("tenant:*:agent:devices:ingestion")
	for _, s := range []string{t1, t2, t3} {
		if !slices.Contains(all, s) {
			t.Errorf("Streams(tenant:*:agent:devices:ingestion) misses %s", s)
		}
	}
	if !slices.IsSorted(all) {
		t.Error("Streams result is not sorted")
	}
	for pattern, want := range map[string][]string{
		"tenant:" + prefix + "-t[12]:agent:devices:ingestion": {t1, t2},
		"tenant:" + prefix + "-t[^1]:agent:devices:*":         {t2, t3},
		"tenant:" + prefix + "-t?:agent:devices:dlq":          {tenant("t1", "dlq")},
		"tenant:" + prefix + "-t1:agent:devices:ingestion":    {t1},
		"tenant:" + prefix + "-nobody*":                       nil,
	} {
		if got := streams(pattern); !slices.Equal(got, want) {
			t.Errorf("Streams(%s) = %v, want %v", pattern, got, want)
		}
	}
}

func testDelete(t *testing.T, e *env) {
	s, k, missing := e.name("s"), e.name("k"), e.name("missing")
	e.add(s, 3)
	e.ensureGroup(s, "g", "0")
	if ok, _ := e.st.SetNX(e.ctx, k, "v", time.Hour); !ok {
		t.Fatal("SetNX failed")
	}
	if n, err := e.st.Delete(e.ctx, s, k, missing); n != 2 || err != nil {
		t.Fatalf("Delete = %d, %v; want 2", n, err)
	}
	if n := e.length(s); n != 0 {
		t.Errorf("Len after Delete = %d", n)
	}
	if _, err := e.st.Group(e.ctx, s, "g"); err == nil {
		t.Error("the group survived Delete")
	}
	if ok, _ := e.st.SetNX(e.ctx, k, "v", time.Hour); !ok {
		t.Error("the key survived Delete")
	}
	if got, _ := e.st.Streams(e.ctx, s); len(got) != 0 {
		t.Errorf("Streams lists a deleted stream: %v", got)
	}
	if n, err := e.st.Delete(e.ctx); n != 0 || err != nil {
		t.Errorf("Delete of nothing = %d, %v", n, err)
	}
}

func testDeleteEndsBlockedRead(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "$")
	done := make(chan error, 1)
	go func() {
		_, err := e.st.ReadGroup(e.ctx, s, "g", "c", 1, time.Minute)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := e.st.Delete(e.ctx, s); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("read blocked on a deleted stream: %v, want ErrNoGroup", err)
		}
	case <-time.After(wait):
		t.Fatal("Delete did not end a blocked read")
	}
}

func testMemoryAndPing(t *testing.T, e *env) {
	if err := e.st.Ping(e.ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	e.add(e.name("s"), 10)
	used, limit, err := e.st.Memory(e.ctx)
	if err != nil || used <= 0 || limit < 0 {
		t.Errorf("Memory = %d, %d, %v; want used > 0 and a cap >= 0", used, limit, err)
	}
}
