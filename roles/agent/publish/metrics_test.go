package publish

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// switchTransport is a destination that delivers while up.
type switchTransport struct {
	up      atomic.Bool
	changes chan struct{}
}

func (s *switchTransport) Connected() bool          { return s.up.Load() }
func (s *switchTransport) Changes() <-chan struct{} { return s.changes }
func (s *switchTransport) set(up bool) {
	s.up.Store(up)
	select {
	case s.changes <- struct{}{}:
	default:
	}
}
func (s *switchTransport) Send(_ context.Context, msgs []dest.Message) []error {
	errs := make([]error, len(msgs))
	if !s.up.Load() {
		for i := range errs {
			errs[i] = dest.ErrNotConnected
		}
	}
	return errs
}

// TestPublishingMetrics (issue 16 item 18): published messages and bytes
// per destination, the offline queue's depth, bytes and oldest age, and
// flush results are exported, labelled by destination name and type only.
func TestPublishingMetrics(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	tr := &switchTransport{changes: make(chan struct{}, 1)}
	tr.up.Store(true)
	w, err := outbound.New(outbound.Options{Destination: 3, Name: "line-mqtt", Transport: tr, Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	p := New(slog.New(slog.DiscardHandler), func() float64 { return 0 })
	p.dests[3] = &destRun{row: store.Destination{ID: 3, Name: "line-mqtt", Type: "mqtt"}, w: w}
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())

	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = w.Run(wctx) })
	defer func() { cancel(); wg.Wait() }()
	coretest.Eventually(t, 10*time.Second, "direct mode", func() bool { return w.Mode() == outbound.ModeDirect })

	lbl := map[string]string{"destination": "line-mqtt", "type": "mqtt"}
	with := func(k, v string) map[string]string {
		m := map[string]string{k: v}
		for a, b := range lbl {
			m[a] = b
		}
		return m
	}
	for i := range 3 {
		if err := w.Offer(ctx, outbound.Item{MsgID: fmt.Sprint(i), Topic: "t", Payload: []byte("0123456789")}); err != nil {
			t.Fatal(err)
		}
	}
	coretest.Eventually(t, 10*time.Second, "3 direct deliveries", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_published_messages_total", with("path", "direct")) == 3
	})
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_published_bytes_total", with("path", "direct")); v != 30 {
		t.Fatalf("direct bytes %v, want 30", v)
	}

	tr.set(false)
	coretest.Eventually(t, 10*time.Second, "buffer-only", func() bool { return w.Mode() == outbound.ModeBufferOnly })
	for i := range 2 {
		if err := w.Offer(ctx, outbound.Item{MsgID: fmt.Sprint(10 + i), Topic: "t", Payload: []byte("01234")}); err != nil {
			t.Fatal(err)
		}
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_records", lbl); v != 2 {
		t.Fatalf("queue records %v, want 2", v)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_bytes", lbl); v != 10 {
		t.Fatalf("queue bytes %v, want 10", v)
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_oldest_record_age_seconds", lbl); v < 0 {
		t.Fatalf("oldest age %v", v)
	}

	tr.set(true)
	coretest.Eventually(t, 10*time.Second, "the queue replayed", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_published_messages_total", with("path", "replay")) == 2
	})
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_published_bytes_total", with("path", "replay")); v != 10 {
		t.Fatalf("replayed bytes %v, want 10", v)
	}
	// The cycle counts its replayed records before it returns, and the
	// flusher counts the cycle after, so the flush result lags a moment.
	coretest.Eventually(t, 10*time.Second, "a delivering flush counted", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_queue_flushes_total", with("result", "delivered")) >= 1
	})
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_records", lbl); v != 0 {
		t.Fatalf("queue records %v after the replay, want 0", v)
	}
	for _, reason := range []string{"evicted_max_records", "refused", "dead_lettered", "store_error"} {
		if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_dropped_records_total", with("reason", reason)); v != 0 {
			t.Fatalf("dropped for %s: %v, want 0", reason, v)
		}
	}
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	coretest.PromtoolCheck(t, "the publish metrics", rec.Body.String())
}
