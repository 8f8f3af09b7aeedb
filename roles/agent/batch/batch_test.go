package batch

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// chanSink passes batches to a channel and fails the test when Deliver
// runs twice at once.
type chanSink struct {
	t      *testing.T
	ch     chan Batch
	inside atomic.Int32
}

func newChanSink(t *testing.T) *chanSink { return &chanSink{t: t, ch: make(chan Batch, 1000)} }

func (s *chanSink) Deliver(_ context.Context, b Batch) {
	if s.inside.Add(1) != 1 {
		s.t.Error("Deliver called concurrently")
	}
	time.Sleep(50 * time.Microsecond) // widen the window a concurrent call would need
	s.inside.Add(-1)
	s.ch <- b
}

func (s *chanSink) next(t *testing.T) Batch {
	t.Helper()
	select {
	case b := <-s.ch:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no batch delivered")
		return Batch{}
	}
}

func (s *chanSink) none(t *testing.T) {
	t.Helper()
	select {
	case b := <-s.ch:
		t.Fatalf("unexpected batch %s of %d messages", b.Reason, len(b.Messages))
	default:
	}
}

func msg(i, size int) Message {
	return Message{
		Readings: []adapters.Reading{{DeviceName: "d", Metric: "m", Value: float64(i), Quality: adapters.Good}},
		Received: time.Now(), Size: size,
	}
}

// checkGoroutines fails the test when, after it, more goroutines run than
// before it: the Batcher's timer goroutine must end with Close.
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<16)
				t.Errorf("%d goroutines left, %d before:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
}

func TestTriggers(t *testing.T) {
	type want struct {
		reason   string
		messages int
	}
	tests := []struct {
		name    string
		opts    Options
		adds    int
		size    int
		flush   string // Flush reason after the adds, "" for none
		want    []want
		pending int
	}{
		{name: "no buffering", opts: Options{}, adds: 3, want: []want{{ReasonImmediate, 1}, {ReasonImmediate, 1}, {ReasonImmediate, 1}}},
		{name: "size", opts: Options{Size: 3}, adds: 7, want: []want{{ReasonSize, 3}, {ReasonSize, 3}}, pending: 1},
		{name: "size then disconnect", opts: Options{Size: 3}, adds: 5, flush: ReasonDisconnect, want: []want{{ReasonSize, 3}, {ReasonDisconnect, 2}}},
		{name: "max messages", opts: Options{Time: time.Hour, MaxMessages: 4}, adds: 9, want: []want{{ReasonMaxMessages, 4}, {ReasonMaxMessages, 4}}, pending: 1},
		{name: "size below max messages wins", opts: Options{Size: 2, MaxMessages: 2}, adds: 2, want: []want{{ReasonSize, 2}}},
		{name: "memory", opts: Options{Size: 100, MaxBytes: 100}, adds: 5, size: 40, want: []want{{ReasonMemory, 3}}, pending: 2},
		{name: "time", opts: Options{Time: 20 * time.Millisecond}, adds: 3, want: []want{{ReasonTime, 3}}},
		{name: "flush of nothing", opts: Options{Size: 10}, adds: 0, flush: ReasonDisconnect},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			sink := newChanSink(t)
			b := New("ep", tt.opts, sink)
			ctx := context.Background()
			size := tt.size
			if size == 0 {
				size = 10
			}
			for i := range tt.adds {
				if err := b.Add(ctx, msg(i, size)); err != nil {
					t.Fatal(err)
				}
			}
			if tt.flush != "" {
				b.Flush(ctx, tt.flush)
			}
			seq := 0
			for _, w := range tt.want {
				got := sink.next(t)
				if got.Reason != w.reason || len(got.Messages) != w.messages || got.Endpoint != "ep" {
					t.Fatalf("batch %s/%s of %d messages, want %s of %d", got.Endpoint, got.Reason, len(got.Messages), w.reason, w.messages)
				}
				if got.Bytes != w.messages*size {
					t.Errorf("Bytes %d, want %d", got.Bytes, w.messages*size)
				}
				for _, m := range got.Messages {
					if m.Readings[0].Value != float64(seq) || m.Endpoint != "ep" {
						t.Fatalf("message %v (endpoint %q), want %d: out of order", m.Readings[0].Value, m.Endpoint, seq)
					}
					seq++
				}
			}
			if n, _ := b.Pending(); n != tt.pending {
				t.Errorf("Pending %d, want %d", n, tt.pending)
			}
			if tt.opts.Time == 0 || tt.opts.Time == time.Hour {
				sink.none(t)
			}
			if err := b.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if tt.pending > 0 {
				if got := sink.next(t); got.Reason != ReasonClose || len(got.Messages) != tt.pending {
					t.Fatalf("Close delivered %s of %d, want close of %d", got.Reason, len(got.Messages), tt.pending)
				}
			}
			sink.none(t)
		})
	}
}

func TestTimeAfterSizeBatch(t *testing.T) {
	checkGoroutines(t)
	sink := newChanSink(t)
	b := New("ep", Options{Size: 2, Time: 30 * time.Millisecond}, sink)
	ctx := context.Background()
	for i := range 3 {
		_ = b.Add(ctx, msg(i, 1))
	}
	if got := sink.next(t); got.Reason != ReasonSize || len(got.Messages) != 2 {
		t.Fatalf("first batch %s of %d", got.Reason, len(got.Messages))
	}
	// The third message started a new batch, which the timer must still
	// dispatch although the first batch's deadline was cleared.
	if got := sink.next(t); got.Reason != ReasonTime || len(got.Messages) != 1 {
		t.Fatalf("second batch %s of %d", got.Reason, len(got.Messages))
	}
	// And again for a batch started after a time batch.
	_ = b.Add(ctx, msg(3, 1))
	if got := sink.next(t); got.Reason != ReasonTime || got.Messages[0].Readings[0].Value != float64(3) {
		t.Fatalf("third batch %s %v", got.Reason, got.Messages)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	sink.none(t)
}

func TestCloseFlushesAndStops(t *testing.T) {
	checkGoroutines(t)
	sink := newChanSink(t)
	b := New("ep", Options{Time: time.Hour}, sink)
	ctx := context.Background()
	_ = b.Add(ctx, msg(0, 1))
	_ = b.Add(ctx, msg(1, 1))
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := sink.next(t); got.Reason != ReasonClose || len(got.Messages) != 2 {
		t.Fatalf("Close delivered %s of %d", got.Reason, len(got.Messages))
	}
	if err := b.Add(ctx, msg(2, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add after Close: %v", err)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	sink.none(t)
}

// blockingSink blocks in Deliver until its context ends.
type blockingSink struct{ entered chan struct{} }

func (s *blockingSink) Deliver(ctx context.Context, _ Batch) {
	close(s.entered)
	<-ctx.Done()
}

func TestCloseCancelsTimerDelivery(t *testing.T) {
	checkGoroutines(t)
	sink := &blockingSink{entered: make(chan struct{})}
	b := New("ep", Options{Time: time.Millisecond}, sink)
	_ = b.Add(context.Background(), msg(0, 1))
	<-sink.entered
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := b.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want the deadline", err)
	}
}

// TestConcurrentAddsKeepOrder adds from several goroutines while the timer
// flushes: every message is delivered once, each goroutine's messages in
// the order it added them, and chanSink fails on a concurrent Deliver.
func TestConcurrentAddsKeepOrder(t *testing.T) {
	checkGoroutines(t)
	sink := newChanSink(t)
	b := New("ep", Options{Size: 7, Time: time.Millisecond}, sink)
	const writers, each = 4, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				m := msg(i, 1)
				m.Readings[0].DeviceName = string(rune('a' + w))
				if err := b.Add(context.Background(), m); err != nil {
					t.Error(err)
				}
			}
		})
	}
	done := make(chan struct{})
	last := map[string]float64{}
	total := 0
	go func() {
		defer close(done)
		for total < writers*each {
			bt := <-sink.ch
			for _, m := range bt.Messages {
				r := m.Readings[0]
				if prev, ok := last[r.DeviceName]; ok && r.Value.(float64) != prev+1 {
					t.Errorf("writer %s: %v after %v", r.DeviceName, r.Value, prev)
				}
				last[r.DeviceName] = r.Value.(float64)
				total++
			}
		}
	}()
	wg.Wait()
	b.Flush(context.Background(), ReasonDisconnect)
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d messages delivered", total, writers*each)
	}
	if err := b.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestEstimateSizeOnAdd(t *testing.T) {
	sink := newChanSink(t)
	b := New("ep", Options{}, sink)
	m := msg(0, 0)
	m.Readings[0].Value = strings.Repeat("x", 1000)
	_ = b.Add(context.Background(), m)
	got := sink.next(t)
	if got.Bytes < 1000 || got.Messages[0].Size != got.Bytes {
		t.Fatalf("estimated %d bytes for a 1000-byte string value", got.Bytes)
	}
	_ = b.Close(context.Background())
}

func TestMemoryCap(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(old) })
	tests := []struct {
		limit int64
		want  int
	}{
		{100 << 20, 5 << 20},
		{1 << 30, MaxMemoryCap},
		{1 << 20, MinMemoryCap},
	}
	for _, tt := range tests {
		debug.SetMemoryLimit(tt.limit)
		if got := computeMemoryCap(); got != tt.want {
			t.Errorf("limit %d: cap %d, want %d", tt.limit, got, tt.want)
		}
	}
	debug.SetMemoryLimit(math.MaxInt64)
	if got := computeMemoryCap(); got < MinMemoryCap || got > MaxMemoryCap {
		t.Errorf("cap without a limit %d out of bounds", got)
	}
	if got := MemoryCap(); got < MinMemoryCap || got > MaxMemoryCap {
		t.Errorf("MemoryCap %d out of bounds", got)
	}
}

func TestOptionsFor(t *testing.T) {
	o := OptionsFor(adapters.Endpoint{BufferSize: 5, BufferTimeMS: 250})
	if o.Size != 5 || o.Time != 250*time.Millisecond {
		t.Fatalf("OptionsFor: %+v", o)
	}
	b := New("ep", Options{Size: -1}, LogSink{})
	if got := b.Options(); got.MaxMessages != DefaultMaxMessages || got.Size != 0 {
		t.Fatalf("defaults: %+v", got)
	}
}

func TestLogSink(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b := New("boiler", Options{}, LogSink{Logger: log})
	m := msg(0, 0)
	m.Readings = append(m.Readings, m.Readings[0])
	_ = b.Add(context.Background(), m)
	for _, want := range []string{"level=DEBUG", "endpoint=boiler", "messages=1", "readings=2", "reason=immediate"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("log %q lacks %q", buf.String(), want)
		}
	}
}
