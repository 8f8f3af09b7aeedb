package publish

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// TestRouterApplyReceipts: a receipt reaches the destinations with
// receipts on and no other, and the awaiting records, the receipted ones
// and the receipts are exported.
func TestRouterApplyReceipts(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	p := New(slog.New(slog.DiscardHandler), func() float64 { return 0 })
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	workers := map[string]*outbound.Worker{}
	for _, d := range []store.Destination{{ID: 1, Name: "cloud", Type: "platform"}, {ID: 2, Name: "plant", Type: "mqtt"}} {
		tr := &switchTransport{changes: make(chan struct{}, 1)}
		tr.up.Store(true)
		w, err := outbound.New(outbound.Options{Destination: d.ID, Name: d.Name, Transport: tr, Queue: q, Receipts: d.Type == "platform"})
		if err != nil {
			t.Fatal(err)
		}
		p.dests[d.ID] = &destRun{row: d, w: w}
		workers[d.Name] = w
		wg.Go(func() { _ = w.Run(wctx) })
		coretest.Eventually(t, 10*time.Second, "direct mode", func() bool { return w.Mode() == outbound.ModeDirect })
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(p.Collector())
	cloud := map[string]string{"destination": "cloud", "type": "platform"}
	plant := map[string]string{"destination": "plant", "type": "mqtt"}

	for seq := uint64(1); seq <= 4; seq++ {
		id, err := codec.FormatMsgID("Ab12Cd34", seq)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range workers {
			if err := w.Offer(ctx, outbound.Item{MsgID: id, Topic: "t", Payload: []byte(id)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	coretest.Eventually(t, 10*time.Second, "4 awaiting on the platform", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_queue_awaiting_receipt_records", cloud) == 4
	})
	coretest.Eventually(t, 10*time.Second, "4 delivered to the plant", func() bool {
		return coretest.MetricValue(t, reg, "edgeplat_agent_published_messages_total", map[string]string{"destination": "plant", "type": "mqtt", "path": "direct"}) == 4
	})
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_queue_records", plant); v != 0 {
		t.Fatalf("the plant destination keeps %v records; it has no receipts", v)
	}
	n, err := p.ApplyReceipts(ctx, control.Receipts{Keys: []control.KeyReceipt{{KID: "Ab12Cd34", Ranges: []control.Range{{First: 1, Last: 3}}}}})
	if err != nil || n != 3 {
		t.Fatalf("ApplyReceipts = %d, %v; want 3", n, err)
	}
	for name, want := range map[string]float64{
		"edgeplat_agent_queue_awaiting_receipt_records": 1,
		"edgeplat_agent_queue_records":                  1,
		"edgeplat_agent_receipted_records_total":        3,
		"edgeplat_agent_receipts_applied_total":         1,
		"edgeplat_agent_receipt_resent_records_total":   0,
	} {
		if v := coretest.MetricValue(t, reg, name, cloud); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := coretest.MetricValue(t, reg, "edgeplat_agent_receipts_applied_total", plant); v != 0 {
		t.Errorf("receipts applied to the plant destination: %v", v)
	}
	rec := httptest.NewRecorder()
	metrics.Handler(reg).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	coretest.PromtoolCheck(t, "the receipt metrics", rec.Body.String())
}
