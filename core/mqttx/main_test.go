package mqttx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	mochi "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 10 * time.Second

// testBroker is an in-process mochi broker on a port of its own, the fast
// peer most tests here use. It is built here rather than taken from
// roles/broker: core never imports roles, not even in tests (see the import
// rule test in cmd). The Mosquitto production runs is covered by the
// ...Integration tests through coretest.PrivateMosquitto and MQTTAddr.
type testBroker struct {
	t    *testing.T
	s    *mochi.Server
	port int
	once sync.Once
}

// startBroker starts a broker on port (0: a free one). It is stopped when
// the test ends, if still running.
func startBroker(t *testing.T, port int) *testBroker {
	t.Helper()
	return startBrokerWith(t, port, new(auth.AllowHook))
}

// startBrokerWith is startBroker with hook deciding authentication and
// ACLs instead of allowing everything.
func startBrokerWith(t *testing.T, port int, hook mochi.Hook) *testBroker {
	t.Helper()
	// Bind ourselves, as roles/broker does, so that port 0 works and the
	// port is known before mochi serves.
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("listen for broker: %v", err)
	}
	s := mochi.New(&mochi.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err := s.AddHook(hook, nil); err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	if err := s.AddListener(listeners.NewNet("tcp", ln)); err != nil {
		_ = ln.Close()
		t.Fatal(err)
	}
	if err := s.Serve(); err != nil {
		_ = s.Close()
		t.Fatalf("start broker: %v", err)
	}
	tb := &testBroker{t: t, s: s, port: ln.Addr().(*net.TCPAddr).Port}
	t.Cleanup(tb.stop)
	return tb
}

func (tb *testBroker) url() string { return fmt.Sprintf("tcp://127.0.0.1:%d", tb.port) }

// stop closes the broker within a bound: mochi v2.7.9's Close can deadlock
// (mochi-mqtt/server#488, see asPublisher), and a hung test would hide
// which test met it.
func (tb *testBroker) stop() {
	tb.once.Do(func() {
		done := make(chan error, 1)
		go func() { done <- tb.s.Close() }()
		select {
		case err := <-done:
			if err != nil {
				tb.t.Errorf("stop broker: %v", err)
			}
		case <-time.After(5 * time.Second):
			tb.t.Errorf("broker did not close within 5 s")
			// Show where it hangs.
			_ = pprof.Lookup("goroutine").WriteTo(os.Stderr, 1)
		}
	})
}

// uniqueID returns a client id or topic segment no other test run uses, so
// persistent sessions on a shared broker never meet.
func uniqueID(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// testOptions are fast options for tests: short backoff and timeouts.
func testOptions(t *testing.T, brokerURL string) Options {
	o := DefaultOptions()
	o.Name = "test-mqtt"
	o.BrokerURL = brokerURL
	o.ClientID = uniqueID("mqttx-test")
	o.BackoffBase = 20 * time.Millisecond
	o.BackoffMax = 160 * time.Millisecond
	o.ConnectTimeout = 2 * time.Second
	o.AckTimeout = 5 * time.Second
	o.FatalRecoveryCooldown = 100 * time.Millisecond
	o.MaxReconnectAttempts = 0
	o.Logger = slog.New(slog.NewTextHandler(newTestLogWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug}))
	o.Registerer = prometheus.NewRegistry()
	return o
}

// newClient builds a client; start runs it.
func newClient(t *testing.T, o Options) *Client {
	t.Helper()
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// start starts and runs c; the returned stop (also run at cleanup) ends Run
// and calls Stop, once.
func start(t *testing.T, c *Client) (stop func()) {
	t.Helper()
	return runFor(t, c, 5*time.Second)
}

// runFor is start with stopTimeout for Stop, which a member leaving its
// shared group spends draining.
func runFor(t *testing.T, c *Client, stopTimeout time.Duration) (stop func()) {
	t.Helper()
	if err := c.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(waitFor):
				t.Errorf("Run did not return")
			}
			sctx, scancel := context.WithTimeout(context.Background(), stopTimeout)
			defer scancel()
			if err := c.Stop(sctx); err != nil {
				t.Errorf("Stop: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func waitState(t *testing.T, c *Client, want State) {
	t.Helper()
	coretest.Eventually(t, waitFor, "state "+want.String(), func() bool { return c.State() == want })
}

// inbox records what a handler received.
type inbox struct {
	mu   sync.Mutex
	msgs []Message
	ch   chan Message
}

func newInbox() *inbox { return &inbox{ch: make(chan Message, 10000)} }

func (in *inbox) handler(fail func(Message) error) Handler {
	return func(_ context.Context, m Message) error {
		m.Payload = append([]byte(nil), m.Payload...)
		in.mu.Lock()
		in.msgs = append(in.msgs, m)
		in.mu.Unlock()
		in.ch <- m
		if fail != nil {
			return fail(m)
		}
		return nil
	}
}

func (in *inbox) payloads() []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := make([]string, len(in.msgs))
	for i, m := range in.msgs {
		out[i] = string(m.Payload)
	}
	return out
}

func (in *inbox) waitCount(t *testing.T, n int) []string {
	t.Helper()
	coretest.Eventually(t, waitFor, fmt.Sprintf("%d messages", n), func() bool { return len(in.payloads()) >= n })
	return in.payloads()
}

// publishOK publishes and requires the broker's acknowledgement.
func publishOK(t *testing.T, c *Client, topic, payload string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Publish(ctx, topic, 1, false, []byte(payload)); err != nil {
		t.Fatalf("publish %s %q: %v", topic, payload, err)
	}
}

// testLogWriter sends log lines to t.Log until the test ends.
type testLogWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func newTestLogWriter(t *testing.T) *testLogWriter {
	w := &testLogWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return w
}

func (w *testLogWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// transitions records OnStateChange calls.
type transitions struct {
	mu  sync.Mutex
	got []string
}

func (tr *transitions) record(from, to State) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.got = append(tr.got, from.String()+"→"+to.String())
}

func (tr *transitions) list() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]string(nil), tr.got...)
}

func isQueued(err error) bool { return errors.Is(err, ErrQueued) }

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue() + d.GetGauge().GetValue()
}
