package outbound

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/prometheus/client_golang/prometheus"
)

// mqttTransport adapts an mqttx client to Transport, as the MQTT
// destinations do.
type mqttTransport struct {
	c       *mqttx.Client
	changes chan struct{}
}

func (m *mqttTransport) Connected() bool          { return m.c.State() == mqttx.StateConnected }
func (m *mqttTransport) Changes() <-chan struct{} { return m.changes }

func (m *mqttTransport) Send(ctx context.Context, msgs []dest.Message) []error {
	out := make([]mqttx.Outgoing, len(msgs))
	for i, msg := range msgs {
		out[i] = mqttx.Outgoing{Topic: msg.Topic, QoS: 1, Payload: msg.Payload}
	}
	errs := m.c.Send(ctx, out)
	for i, err := range errs {
		if errors.Is(err, mqttx.ErrNotConnected) {
			errs[i] = fmt.Errorf("%w: %w", dest.ErrNotConnected, err)
		}
	}
	return errs
}

// startMQTT runs an mqttx client on url until the test ends.
func startMQTT(t *testing.T, url, name string, onChange func(from, to mqttx.State)) *mqttx.Client {
	t.Helper()
	o := mqttx.DefaultOptions()
	o.Name = name
	o.BrokerURL = url
	o.ClientID = fmt.Sprintf("%s-%d", name, time.Now().UnixNano())
	o.BackoffBase, o.BackoffMax = 20*time.Millisecond, 160*time.Millisecond
	o.ConnectTimeout, o.AckTimeout = 2*time.Second, 5*time.Second
	o.FatalRecoveryCooldown = 100 * time.Millisecond
	o.MaxReconnectAttempts = 0
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	o.Registerer = prometheus.NewRegistry()
	o.OnStateChange = onChange
	c, err := mqttx.New(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s Run: %v", name, err)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := c.Stop(sctx); err != nil {
			t.Errorf("%s Stop: %v", name, err)
		}
	})
	return c
}

// TestBrokerOutageIntegration publishes 200 items through a worker on a
// real Mosquitto that is stopped part-way and started again: a subscriber
// gets every msgId at least once, the queue ends empty, and the mode goes
// direct → buffer-only → recovering → direct.
func TestBrokerOutageIntegration(t *testing.T) {
	srv := coretest.PrivateMosquitto(t)
	topic := fmt.Sprintf("i/outbound-test-%d", time.Now().UnixNano())

	var mu sync.Mutex
	received := map[string]int{}
	sub := startMQTT(t, srv.URL(), "outbound-subscriber", nil)
	if err := sub.Subscribe(topic+"/#", 1, func(_ context.Context, m mqttx.Message) error {
		var p struct {
			MsgID string `json:"msgId"`
		}
		if err := json.Unmarshal(m.Payload, &p); err != nil {
			return nil // not ours; acknowledged so it does not come back
		}
		mu.Lock()
		received[p.MsgID]++
		mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	receivedAll := func(n int) bool {
		mu.Lock()
		defer mu.Unlock()
		for i := range n {
			if received[item("m", i).MsgID] == 0 {
				return false
			}
		}
		return true
	}

	tr := &mqttTransport{changes: make(chan struct{}, 1)}
	tr.c = startMQTT(t, srv.URL(), "outbound-publisher", func(_, _ mqttx.State) {
		select {
		case tr.changes <- struct{}{}:
		default:
		}
	})
	coretest.Eventually(t, waitFor, "clients connected", func() bool {
		return sub.State() == mqttx.StateConnected && tr.Connected()
	})

	st := newStore(t)
	q := newQueue(t, st, func(o *store.QueueOptions) {
		o.FlushIntervalMS = 500
		o.FlushBatchSize = 25
	})
	log := newTransitionLog()
	w := newWorker(t, workerOptions(tr, q, log))
	run(t, w)
	waitMode(t, w, ModeDirect)

	offerN := func(from, to int) {
		for i := from; i < to; i++ {
			id := item("m", i).MsgID
			payload := fmt.Sprintf(`{"msgId":%q,"seq":%d}`, id, i)
			offer(t, w, Item{MsgID: id, Topic: topic + "/endpoints/line-1", Payload: []byte(payload)})
			time.Sleep(time.Millisecond)
		}
	}
	offerN(0, 80)
	coretest.Eventually(t, waitFor, "80 delivered directly", func() bool { return status(t, w).Delivered == 80 })

	srv.Stop()
	waitMode(t, w, ModeBufferOnly)
	offerN(80, 180)
	coretest.Eventually(t, waitFor, "100 queued during the outage", func() bool { return status(t, w).Records == 100 })

	srv.Start()
	// The last 20 are offered while the queue drains.
	offerN(180, 200)
	coretest.Eventually(t, 30*time.Second, "every msgId received", func() bool { return receivedAll(200) })
	waitMode(t, w, ModeDirect)
	coretest.Eventually(t, waitFor, "queue empty", func() bool { return status(t, w).Records == 0 })

	s := status(t, w)
	t.Logf("status: delivered %d directly, replayed %d, buffered %d; queue counters %+v",
		s.Delivered, s.Replayed, s.Buffered, s.Counters)
	if s.Replayed < 100 || s.Delivered+s.Replayed < 200 || s.Counters.Rejected != 0 || s.DeadLetters != 0 ||
		s.Refused != 0 || s.LastFlushSuccess.IsZero() {
		t.Errorf("status %+v", s)
	}
	if got := log.list(); !hasInOrder(got, []string{"buffer-only→direct", "direct→buffer-only", "buffer-only→recovering", "recovering→direct"}) {
		t.Errorf("transitions %v", got)
	} else {
		t.Logf("transitions %v", got)
	}
}
