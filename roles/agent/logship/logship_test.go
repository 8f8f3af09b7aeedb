package logship

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
)

func TestBufferBounds(t *testing.T) {
	tests := []struct {
		name             string
		maxLines, maxB   int
		add              []string
		wantLines, wantB int
		wantDropped      int64
		wantFirst        string
	}{
		{"under both", 3, 100, []string{"a", "bb"}, 2, 3, 0, "a"},
		{"lines bound", 2, 100, []string{"a", "b", "c"}, 2, 2, 1, "b"},
		{"bytes bound", 10, 5, []string{"aaa", "bbb", "cc"}, 2, 5, 1, "bbb"},
		{"line over the byte bound", 10, 4, []string{"a", "bbbbb"}, 1, 1, 1, "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBuffer(tt.maxLines, tt.maxB)
			for _, s := range tt.add {
				b.add([]byte(s))
			}
			lines, bytes, dropped := b.stats()
			if lines != tt.wantLines || bytes != tt.wantB || dropped != tt.wantDropped {
				t.Fatalf("stats = %d lines, %d bytes, %d dropped; want %d, %d, %d", lines, bytes, dropped, tt.wantLines, tt.wantB, tt.wantDropped)
			}
			got, _ := b.batch(100, 1000)
			if string(got[0]) != tt.wantFirst {
				t.Fatalf("oldest line %q, want %q", got[0], tt.wantFirst)
			}
		})
	}
}

// TestAckAfterDrop: lines dropped while their batch was in flight are not
// removed twice, and the lines added meanwhile stay.
func TestAckAfterDrop(t *testing.T) {
	b := newBuffer(3, 1000)
	for _, s := range []string{"1", "2", "3"} {
		b.add([]byte(s))
	}
	got, last := b.batch(2, 1000)
	if len(got) != 2 {
		t.Fatalf("batch %q", got)
	}
	b.add([]byte("4")) // drops "1"
	b.add([]byte("5")) // drops "2"
	b.ack(last)
	rest, _ := b.batch(10, 1000)
	if strings.Join(bs(rest), ",") != "3,4,5" {
		t.Fatalf("after ack: %q", rest)
	}
}

func bs(in [][]byte) []string {
	out := make([]string, len(in))
	for i, b := range in {
		out[i] = string(b)
	}
	return out
}

// recorder is an Uploader that decodes what the shipper sends, as the
// cloud's route does, and answers with fail.
type recorder struct {
	mu    sync.Mutex
	lines []telemetry.LogEntry
	calls int
	fail  error
}

func (r *recorder) UploadLogs(_ context.Context, gz []byte) error {
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		return err
	}
	var got []telemetry.LogEntry
	sc := bufio.NewScanner(zr)
	for sc.Scan() {
		var e telemetry.LogEntry
		if err := e.UnmarshalJSON(sc.Bytes()); err != nil {
			return err
		}
		got = append(got, e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fail != nil {
		return r.fail
	}
	r.lines = append(r.lines, got...)
	return nil
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

func (r *recorder) count() (lines, calls int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.lines), r.calls
}

// TestShipperThroughTheLogger: lines logged through the agent's ring
// handler reach the uploader as telemetry.LogEntry lines; while the cloud
// fails the breaker opens, the buffer stays within its bound and counts
// what it drops, and the shipper's own warnings are not shipped; once the
// cloud is back a probe closes the breaker and the buffer drains.
func TestShipperThroughTheLogger(t *testing.T) {
	rec := &recorder{}
	var on sync.Mutex
	enabled := true
	reg := prometheus.NewRegistry()
	ring := logring.New(100)
	s, err := New(Options{
		Uploader: rec, Enabled: func() bool { on.Lock(); defer on.Unlock(); return enabled },
		MaxLines: 50, BatchLines: 20, FlushEvery: 20 * time.Millisecond, ProbeEvery: 100 * time.Millisecond,
		Breaker: breaker.Options{MinRequests: 2, Window: time.Minute},
		Metrics: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(logring.Handler(slog.DiscardHandler, ring, slog.LevelInfo)).With("component", "agent")
	s.log = log.With("component", Component)
	ring.SetTap(s.Add)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = s.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	log.Warn("pump pressure high", "bar", 9.5)
	coretest.Eventually(t, 5*time.Second, "the warn line shipped", func() bool { n, _ := rec.count(); return n == 1 })
	rec.mu.Lock()
	e := rec.lines[0]
	rec.mu.Unlock()
	if e.Level != "warn" || e.Message != "pump pressure high bar=9.5" || e.Component != "agent" || e.Timestamp == nil {
		t.Fatalf("shipped %+v", e)
	}

	rec.setFail(&cloud.Error{Status: 503, Message: "down"})
	for i := range 200 {
		log.Info("line", "i", i)
	}
	coretest.Eventually(t, 5*time.Second, "the breaker open", func() bool { return s.Status().CircuitOpen })
	st := s.Status()
	if st.Logs > 50 || st.Dropped < 150 || st.PendingBatches != (st.Logs+19)/20 || !st.Enabled {
		t.Fatalf("status while the cloud is down: %+v", st)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_log_lines_dropped_total", map[string]string{"reason": "overflow"}); v != float64(st.Dropped) {
		t.Fatalf("overflow counter %v, status %d", v, st.Dropped)
	}
	// The breaker's own warning went to the ring, not to the buffer.
	coretest.Eventually(t, 5*time.Second, "the shipper's warning in the ring", func() bool {
		got, _ := ring.Query(logring.Filter{Level: "warn"})
		return len(got) > 0 && got[len(got)-1].Component == Component
	})
	if st := s.Status(); st.Logs > 50 {
		t.Fatalf("the shipper's warning grew the buffer past its bound: %+v", st)
	}
	_, callsOpen := rec.count()
	time.Sleep(300 * time.Millisecond)
	if _, calls := rec.count(); calls > callsOpen+5 {
		t.Fatalf("%d uploads in 300 ms with the breaker open; probes are every 100 ms", calls-callsOpen)
	}

	rec.setFail(nil)
	coretest.Eventually(t, 5*time.Second, "the buffer drained", func() bool { st := s.Status(); return st.Logs == 0 && !st.CircuitOpen })
	rec.mu.Lock()
	for _, l := range rec.lines {
		if l.Component == Component {
			t.Errorf("the shipper shipped its own line: %+v", l)
		}
	}
	rec.mu.Unlock()

	// A batch the cloud refuses for good is dropped, not retried forever.
	rec.setFail(&cloud.Error{Status: 422, Message: "bad line"})
	log.Info("refused line")
	coretest.Eventually(t, 5*time.Second, "the refused line dropped", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_log_lines_dropped_total", map[string]string{"reason": "refused"}) >= 1
	})

	// Off: nothing is kept.
	on.Lock()
	enabled = false
	on.Unlock()
	log.Info("not shipped")
	if st := s.Status(); st.Enabled || st.Logs != 0 {
		t.Fatalf("status when off: %+v", st)
	}
}
