package mqttx

import (
	"strings"
	"testing"
	"time"

	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/packets"
)

// denySubscribe lets everyone connect and publish, and refuses
// subscriptions to filters under prefix.
type denySubscribe struct {
	mochi.HookBase
	prefix string
}

func (h *denySubscribe) ID() string { return "deny-subscribe" }
func (h *denySubscribe) Provides(b byte) bool {
	return b == mochi.OnConnectAuthenticate || b == mochi.OnACLCheck
}
func (h *denySubscribe) OnConnectAuthenticate(*mochi.Client, packets.Packet) bool { return true }
func (h *denySubscribe) OnACLCheck(_ *mochi.Client, topic string, write bool) bool {
	return write || !strings.HasPrefix(topic, h.prefix)
}

// TestOptionalSubscriptionRefused: a broker refusing an optional
// subscription leaves the connection up and the other subscriptions
// working; the same refusal of a plain subscription fails the connection.
func TestOptionalSubscriptionRefused(t *testing.T) {
	b := startBrokerWith(t, 0, &denySubscribe{prefix: "stats/"})
	topic := uniqueID("optional")
	c := newClient(t, testOptions(t, b.url()))
	in := newInbox()
	if err := c.Subscribe(topic, 1, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	if err := c.SubscribeOptional("stats/#", 0, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, testOptions(t, b.url()))
	start(t, pub)
	waitState(t, pub, StateConnected)
	if err := pub.Publish(t.Context(), topic, 1, false, []byte("after the refusal")); err != nil {
		t.Fatal(err)
	}
	select {
	case m := <-in.ch:
		if string(m.Payload) != "after the refusal" {
			t.Errorf("got %q", m.Payload)
		}
	case <-time.After(waitFor):
		t.Fatal("no message on the plain subscription after the optional one was refused")
	}
	if c.State() != StateConnected {
		t.Errorf("state %v after an optional subscription was refused, want connected", c.State())
	}

	strict := newClient(t, testOptions(t, b.url()))
	if err := strict.Subscribe("stats/#", 0, in.handler(nil)); err != nil {
		t.Fatal(err)
	}
	start(t, strict)
	waitState(t, strict, StateReconnecting)
}
