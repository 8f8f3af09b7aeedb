package outbound

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"go.uber.org/goleak"
)

// TestMain checks that every worker's goroutines end with its Run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const waitFor = 10 * time.Second

// fakeTransport is a scripted destination: a connected flag the test
// flips, a Changes channel, and a Send that records what it got and
// answers each message with outcome's verdict.
type fakeTransport struct {
	changes chan struct{}

	mu        sync.Mutex
	connected bool
	// outcome decides one message's result; nil delivers. It may block
	// (a slow or dead peer) and must then honour ctx.
	outcome func(ctx context.Context, m dest.Message) error
	calls   [][]string     // payloads of every Send, in call order
	got     map[string]int // deliveries per payload
	order   []string       // delivered payloads in order
}

func newFakeTransport(connected bool) *fakeTransport {
	return &fakeTransport{changes: make(chan struct{}, 1), connected: connected, got: map[string]int{}}
}

func (f *fakeTransport) Connected() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connected
}

func (f *fakeTransport) Changes() <-chan struct{} { return f.changes }

func (f *fakeTransport) setConnected(v bool) {
	f.mu.Lock()
	f.connected = v
	f.mu.Unlock()
	select {
	case f.changes <- struct{}{}:
	default:
	}
}

func (f *fakeTransport) setOutcome(fn func(ctx context.Context, m dest.Message) error) {
	f.mu.Lock()
	f.outcome = fn
	f.mu.Unlock()
}

func (f *fakeTransport) Send(ctx context.Context, msgs []dest.Message) []error {
	f.mu.Lock()
	payloads := make([]string, len(msgs))
	for i, m := range msgs {
		payloads[i] = string(m.Payload)
	}
	f.calls = append(f.calls, payloads)
	connected, outcome := f.connected, f.outcome
	f.mu.Unlock()
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		switch {
		case !connected:
			errs[i] = fmt.Errorf("fake send: %w", dest.ErrNotConnected)
		case outcome != nil:
			errs[i] = outcome(ctx, m)
		}
		if errs[i] == nil {
			f.mu.Lock()
			f.got[string(m.Payload)]++
			f.order = append(f.order, string(m.Payload))
			f.mu.Unlock()
		}
	}
	return errs
}

func (f *fakeTransport) sendCalls() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeTransport) delivered() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.order)
}

// deliveries returns how often each payload was delivered.
func (f *fakeTransport) deliveries() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]int, len(f.got))
	for k, v := range f.got {
		out[k] = v
	}
	return out
}

// hang makes every message wait for the end of its Send's ctx, as a peer
// that accepted the connection and then stopped answering.
// holdPayload is a Send outcome that holds the message whose payload is p
// until gate closes (or ctx ends), then answers with then (nil: delivered).
func holdPayload(p string, gate <-chan struct{}, then func(context.Context, dest.Message) error) func(context.Context, dest.Message) error {
	return func(ctx context.Context, m dest.Message) error {
		if string(m.Payload) == p {
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if then == nil {
			return nil
		}
		return then(ctx, m)
	}
}

func hang(ctx context.Context, _ dest.Message) error {
	<-ctx.Done()
	return fmt.Errorf("no acknowledgement: %w", ctx.Err())
}

// clock is a Now the test moves. It starts an hour ahead of the wall
// clock because Enqueue stamps records with the wall clock: they are
// ready at once, while the retry waits Reject sets follow this clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Now().Add(time.Hour)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newStore opens an agent store in a temporary directory.
func newStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return st
}

// newQueue returns the store's offline queue with DefaultQueueOptions
// changed by mutate. The flush interval is an hour unless mutate sets it,
// so that only the trigger a test is about starts a cycle.
func newQueue(t *testing.T, st *store.Store, mutate func(*store.QueueOptions)) *store.Queue {
	t.Helper()
	o := store.DefaultQueueOptions()
	o.FlushIntervalMS = int(time.Hour / time.Millisecond)
	if mutate != nil {
		mutate(&o)
	}
	q, err := st.OfflineQueue(o)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// transitionLog is a slog handler that keeps the publish mode transitions.
type transitionLog struct {
	mu  *sync.Mutex
	got *[]string
}

func newTransitionLog() transitionLog { return transitionLog{mu: new(sync.Mutex), got: new([]string)} }

func (transitionLog) Enabled(context.Context, slog.Level) bool { return true }

func (h transitionLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "publish mode changed" {
		return nil
	}
	var from, to string
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "from":
			from = a.Value.String()
		case "to":
			to = a.Value.String()
		}
		return true
	})
	h.mu.Lock()
	*h.got = append(*h.got, from+"→"+to)
	h.mu.Unlock()
	return nil
}

func (h transitionLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h transitionLog) WithGroup(string) slog.Handler      { return h }

func (h transitionLog) list() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(*h.got)
}

// workerOptions are options for a worker on tr and q, destination 1,
// logging its transitions to log.
func workerOptions(tr Transport, q Queue, log transitionLog) Options {
	return Options{Destination: 1, Name: "test", Transport: tr, Queue: q, Logger: slog.New(log)}
}

func newWorker(t *testing.T, o Options) *Worker {
	t.Helper()
	w, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// run runs w until the returned stop is called (also at cleanup), which
// waits for Run and fails the test if it errs or hangs.
func run(t *testing.T, w *Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
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
		})
	}
	t.Cleanup(stop)
	return stop
}

func item(prefix string, i int) Item {
	id := fmt.Sprintf("%s-%04d", prefix, i)
	return Item{MsgID: id, Topic: "t/" + prefix, Payload: []byte(id)}
}

func offer(t *testing.T, w *Worker, it Item) {
	t.Helper()
	if err := w.Offer(context.Background(), it); err != nil {
		t.Fatalf("offer %s: %v", it.MsgID, err)
	}
}

func ids(prefix string, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, item(prefix, i).MsgID)
	}
	return out
}

// far is a time by which every queued record is ready.
var far = time.Now().Add(365 * 24 * time.Hour)

// queued returns dest's queued records in queue order.
func queued(t *testing.T, q Queue, d int64) []store.QueuedRecord {
	t.Helper()
	recs, err := q.Ready(context.Background(), d, 1<<30, far)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func queuedIDs(t *testing.T, q Queue, d int64) []string {
	t.Helper()
	var out []string
	for _, r := range queued(t, q, d) {
		out = append(out, r.MsgID)
	}
	return out
}

func status(t *testing.T, w *Worker) Status {
	t.Helper()
	st, err := w.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func waitMode(t *testing.T, w *Worker, want Mode) {
	t.Helper()
	coretest.Eventually(t, waitFor, "mode "+string(want), func() bool { return w.Mode() == want })
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	coretest.Eventually(t, waitFor, what, cond)
}

// hasInOrder reports whether want appears in got in order, other entries
// in between allowed.
func hasInOrder(got, want []string) bool {
	i := 0
	for _, g := range got {
		if i < len(want) && g == want[i] {
			i++
		}
	}
	return i == len(want)
}

func hasPrefix(m dest.Message, p string) bool { return strings.HasPrefix(string(m.Payload), p) }
