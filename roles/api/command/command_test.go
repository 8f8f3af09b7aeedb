package command

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is an MQTT client with a persistent session that keeps, in
// arrival order, the payloads of every command topic. Its session
// outlives a clean broker restart, so it misses nothing sent while it
// reconnects.
type recorder struct {
	mu   sync.Mutex
	got  []string
	stop func()
}

func newRecorder(t *testing.T, url string) *recorder {
	t.Helper()
	o := mqttx.DefaultOptions()
	o.Name, o.BrokerURL, o.ClientID, o.CleanSession = "recorder", url, "command-test-recorder", false
	o.BackoffBase, o.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	o.Logger = slog.New(slog.DiscardHandler)
	c, err := mqttx.New(o)
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	if err := c.Subscribe("i/+/a/+/cmd/#", 1, func(_ context.Context, m mqttx.Message) error {
		r.mu.Lock()
		r.got = append(r.got, m.Topic+" "+string(m.Payload))
		r.mu.Unlock()
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.stop = runClient(t, c)
	coretest.Eventually(t, 10*time.Second, "the recorder to connect", func() bool { return c.State() == mqttx.StateConnected })
	return r
}

func (r *recorder) messages() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// runClient starts c and returns the function that stops it.
func runClient(t *testing.T, c *mqttx.Client) func() {
	t.Helper()
	if err := c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = c.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			<-done
			_ = c.Stop(context.Background())
		})
	}
	t.Cleanup(stop)
	return stop
}

// startPublisher runs a publisher over a fresh API-side client on url.
func startPublisher(t *testing.T, url string) (*Publisher, *mqttx.Client, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	var p *Publisher
	o := mqttx.DefaultOptions()
	o.Name, o.BrokerURL, o.ClientID = "api-mqtt", url, "command-test-api"
	o.BackoffBase, o.BackoffMax = 50*time.Millisecond, 200*time.Millisecond
	o.Logger = slog.New(slog.DiscardHandler)
	o.OnStateChange = func(from, to mqttx.State) { p.StateChanged(from, to) }
	c, err := mqttx.New(o)
	if err != nil {
		t.Fatal(err)
	}
	p, err = New(c, Options{QoS: 1, Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	stopClient := runClient(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = p.Run(ctx) }()
	// The publisher stops before its client, as lifecycle.Run orders them.
	t.Cleanup(func() { cancel(); <-done; _ = p.Stop(context.Background()); stopClient() })
	return p, c, reg
}

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return coretest.MetricValue(t, reg, name, nil)
}

// TestPublisherQueuesWhileTheBrokerIsAwayIntegration: with the broker
// stopped, commands wait in the pending queue (Publish returns at once);
// when it is back they are sent in order, before the commands published
// after the restart.
func TestPublisherQueuesWhileTheBrokerIsAwayIntegration(t *testing.T) {
	broker := coretest.PrivateMosquitto(t)
	rec := newRecorder(t, broker.URL())
	p, c, reg := startPublisher(t, broker.URL())
	coretest.Eventually(t, 10*time.Second, "the publisher's client to connect", func() bool { return c.State() == mqttx.StateConnected })
	tenant, agent := codec.NewUUID(), codec.NewUUID()
	topic := control.CommandTopic(control.Prefix(tenant, agent), control.CmdTargetState)
	var want []string
	send := func(i int) {
		t.Helper()
		payload := fmt.Sprintf(`{"version":%d}`, i)
		start := time.Now()
		if err := p.Publish(tenant, agent, control.CmdTargetState, []byte(payload)); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("Publish took %s", d)
		}
		want = append(want, topic+" "+payload)
	}
	send(1)
	coretest.Eventually(t, 10*time.Second, "the first command", func() bool { return len(rec.messages()) == 1 })

	broker.Stop()
	coretest.Eventually(t, 10*time.Second, "the client to see the broker gone", func() bool { return c.State() != mqttx.StateConnected })
	for i := 2; i <= 6; i++ {
		send(i)
	}
	if n := p.Pending(); n != 5 {
		t.Fatalf("pending = %d while the broker is away, want 5", n)
	}
	if v := metric(t, reg, "edgeplat_api_commands_pending"); v != 5 {
		t.Fatalf("edgeplat_api_commands_pending = %v, want 5", v)
	}

	broker.Start()
	// New commands right after the restart, while the client may still be
	// reconnecting or flushing: they must come after the pending ones.
	for i := 7; i <= 9; i++ {
		send(i)
	}
	coretest.Eventually(t, 20*time.Second, "every command after the restart", func() bool { return len(rec.messages()) >= len(want) })
	if got := rec.messages(); !slices.Equal(got, want) {
		t.Fatalf("commands in this order:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	coretest.Eventually(t, 5*time.Second, "the pending gauge to reach 0", func() bool { return metric(t, reg, "edgeplat_api_commands_pending") == 0 })
	if v := metric(t, reg, "edgeplat_api_commands_published_total") + metric(t, reg, "edgeplat_api_commands_requeued_total"); v != 9 {
		t.Errorf("published + requeued = %v, want 9", v)
	}
	if v := metric(t, reg, "edgeplat_api_commands_dropped_total"); v != 0 {
		t.Errorf("edgeplat_api_commands_dropped_total = %v, want 0", v)
	}
}

// TestPublisherDropsTheOldestWhenFullIntegration: past the capacity of
// 1000 the oldest pending commands are dropped and counted; the rest
// arrive in order once the broker is back.
func TestPublisherDropsTheOldestWhenFullIntegration(t *testing.T) {
	broker := coretest.PrivateMosquitto(t)
	rec := newRecorder(t, broker.URL())
	p, c, reg := startPublisher(t, broker.URL())
	coretest.Eventually(t, 10*time.Second, "the publisher's client to connect", func() bool { return c.State() == mqttx.StateConnected })
	broker.Stop()
	coretest.Eventually(t, 10*time.Second, "the client to see the broker gone", func() bool { return c.State() != mqttx.StateConnected })

	tenant, agent := codec.NewUUID(), codec.NewUUID()
	const extra = 3
	for i := 1; i <= DefaultCapacity+extra; i++ {
		if err := p.Publish(tenant, agent, control.CmdReceipts, fmt.Appendf(nil, "%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if v := metric(t, reg, "edgeplat_api_commands_dropped_total"); v != extra {
		t.Fatalf("edgeplat_api_commands_dropped_total = %v, want %d", v, extra)
	}
	if v := metric(t, reg, "edgeplat_api_commands_pending"); v != DefaultCapacity {
		t.Fatalf("edgeplat_api_commands_pending = %v, want %d", v, DefaultCapacity)
	}

	broker.Start()
	coretest.Eventually(t, 30*time.Second, "the kept commands", func() bool { return len(rec.messages()) >= DefaultCapacity })
	got := rec.messages()
	if len(got) != DefaultCapacity {
		t.Fatalf("received %d commands, want %d", len(got), DefaultCapacity)
	}
	topic := control.CommandTopic(control.Prefix(tenant, agent), control.CmdReceipts)
	for i, m := range got {
		if want := fmt.Sprintf("%s %d", topic, i+1+extra); m != want {
			t.Fatalf("command %d is %q, want %q (the oldest %d dropped, the rest in order)", i, m, want, extra)
		}
	}
}

func TestPublisherRefusesBadNames(t *testing.T) {
	// A client never started: validation happens before anything is sent.
	o := mqttx.DefaultOptions()
	o.BrokerURL, o.ClientID = "tcp://127.0.0.1:1", "unused"
	c, err := mqttx.New(o)
	if err != nil {
		t.Fatal(err)
	}
	p, err := New(c, Options{QoS: 1})
	if err != nil {
		t.Fatal(err)
	}
	tenant, agent := codec.NewUUID(), codec.NewUUID()
	for _, name := range []string{"", "a//b", "jobs/+", "#", "x/"} {
		if err := p.Publish(tenant, agent, name, nil); err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
	if err := p.Publish(tenant, agent, "jobs/42", nil); err != nil {
		t.Errorf("jobs/42: %v", err)
	}
	if err := p.Publish(tenant, agent, "x", make([]byte, control.MaxCommandBytes+1)); err == nil {
		t.Error("an oversized command accepted")
	}
	if n := p.Pending(); n != 1 {
		t.Errorf("pending = %d, want 1 (jobs/42 only)", n)
	}
	if _, err := New(c, Options{QoS: 3}); err == nil {
		t.Error("qos 3 accepted")
	}
}

// BenchmarkPublisherDrain measures commands per second through the single
// sender on a private Mosquitto: the rate receipts and notices can reach.
func BenchmarkPublisherDrain(b *testing.B) {
	broker := coretest.PrivateMosquitto(b)
	reg := prometheus.NewRegistry()
	var p *Publisher
	o := mqttx.DefaultOptions()
	o.Name, o.BrokerURL, o.ClientID = "api-mqtt", broker.URL(), "command-bench-api"
	o.Logger = slog.New(slog.DiscardHandler)
	o.OnStateChange = func(from, to mqttx.State) { p.StateChanged(from, to) }
	c, err := mqttx.New(o)
	if err != nil {
		b.Fatal(err)
	}
	if p, err = New(c, Options{QoS: 1, Registerer: reg}); err != nil {
		b.Fatal(err)
	}
	if err := c.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	wg.Go(func() { _ = p.Run(ctx) })
	defer func() { cancel(); wg.Wait(); _ = c.Stop(context.Background()) }()
	coretest.Eventually(b, 10*time.Second, "the client to connect", func() bool { return c.State() == mqttx.StateConnected })
	tenant, agent := codec.NewUUID(), codec.NewUUID()
	payload := []byte(`{"version":1}`)
	b.ResetTimer()
	for range b.N {
		// Stay under the capacity, as a steady load does: what the
		// benchmark measures is the sender, not the drops.
		for p.Pending() >= DefaultCapacity/2 {
			time.Sleep(time.Millisecond)
		}
		if err := p.Publish(tenant, agent, control.CmdTargetState, payload); err != nil {
			b.Fatal(err)
		}
	}
	coretest.Eventually(b, time.Minute, "the queue to drain", func() bool {
		return coretest.MetricValue(b, reg, "edgeplat_api_commands_published_total", nil) == float64(b.N)
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commands/s")
}
