package mqttx

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestWarnsWhenFallingBehind: a handler that takes no message fills its
// worker's buffer; the client then stops reading from the broker, which
// queues and in the end drops for it, so it must say so while it waits,
// and count the time.
func TestWarnsWhenFallingBehind(t *testing.T) {
	defer func(d time.Duration) { behindWarnAfter = d }(behindWarnAfter)
	behindWarnAfter = 50 * time.Millisecond
	b := startBroker(t, 0)
	var logs coretest.SyncBuffer
	o := testOptions(t, b.url())
	o.HandlerWorkers, o.HandlerBuffer = 1, 1
	o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	c := newClient(t, o)
	release := make(chan struct{})
	got := make(chan struct{}, 1)
	topic := uniqueID("behind")
	if err := c.Subscribe(topic, 1, func(ctx context.Context, _ Message) error {
		select {
		case got <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	stop := start(t, c)
	waitState(t, c, StateConnected)
	pub := newClient(t, testOptions(t, b.url()))
	start(t, pub)
	waitState(t, pub, StateConnected)
	// The subscription is made once the connection is up, so a message
	// published at once may find no subscriber: publish until the handler
	// holds one.
	coretest.Eventually(t, waitFor, "the handler to hold a message", func() bool {
		if err := pub.Publish(t.Context(), topic, 1, false, []byte{0}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			return true
		case <-time.After(100 * time.Millisecond):
			return false
		}
	})
	for i := range 3 { // one in the buffer, one waiting, one more
		if err := pub.Publish(t.Context(), topic, 1, false, []byte{byte(i + 1)}); err != nil {
			t.Fatal(err)
		}
	}
	coretest.Eventually(t, waitFor, "the falling-behind warning", func() bool {
		return strings.Contains(logs.String(), "mqtt subscriber falling behind")
	})
	close(release)
	coretest.Eventually(t, waitFor, "the wait to be counted", func() bool { return testutil.ToFloat64(c.m.behind) > 0 })
	stop()
}
