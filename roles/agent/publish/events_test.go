package publish

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// platformTransport is a switchTransport with the platform's report
// topics; prefix "" is a platform destination not yet provisioned.
type platformTransport struct {
	*switchTransport
	prefix string
}

func (p *platformTransport) Start(context.Context) error { return nil }
func (p *platformTransport) Stop(context.Context) error  { return nil }
func (p *platformTransport) Topic(_, e string) string    { return p.prefix + "/endpoints/" + e }
func (p *platformTransport) Status() dest.Status         { return dest.Status{Type: "platform"} }
func (p *platformTransport) ReportTopic(name string) string {
	if p.prefix == "" {
		return ""
	}
	return control.ReportTopic(p.prefix, name)
}

// TestSendEvent: an event raised in an outage is queued as a critical
// record on the events topic of every provisioned platform destination;
// an unprovisioned one and third-party brokers get nothing, and an
// invalid event is refused before anything is queued.
func TestSendEvent(t *testing.T) {
	ctx := context.Background()
	q := testQueue(t)
	p := New(slog.New(slog.DiscardHandler), func() float64 { return 0 })
	wctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for _, d := range []struct {
		row    store.Destination
		prefix string
	}{
		{store.Destination{ID: 1, Name: "cloud", Type: "platform"}, "i/T/a/A"},
		{store.Destination{ID: 2, Name: "fresh", Type: "platform"}, ""},
		{store.Destination{ID: 3, Name: "plant", Type: "mqtt"}, "plant"},
	} {
		tr := &platformTransport{switchTransport: &switchTransport{changes: make(chan struct{}, 1)}, prefix: d.prefix}
		w, err := outbound.New(outbound.Options{Destination: d.row.ID, Name: d.row.Name, Transport: tr, Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		p.dests[d.row.ID] = &destRun{row: d.row, t: tr, w: w}
		wg.Go(func() { _ = w.Run(wctx) })
		coretest.Eventually(t, 10*time.Second, "buffering while down", func() bool { return w.Mode() == outbound.ModeBufferOnly })
	}

	if n, err := p.SendEvent(ctx, control.Event{ID: "1", Kind: control.EventDrift, Severity: "fatal", Timestamp: 1, Data: json.RawMessage(`{}`)}); err == nil || n != 0 {
		t.Fatalf("SendEvent of a bad severity = %d, %v; want a refusal", n, err)
	}
	ev := control.Event{ID: "7", Kind: control.EventAnomalyAlert, Severity: control.SeverityCritical, Timestamp: 1700000000000, Data: json.RawMessage(`{"metric":"t"}`)}
	n, err := p.SendEvent(ctx, ev)
	if err != nil || n != 1 {
		t.Fatalf("SendEvent = %d, %v; want 1 destination", n, err)
	}
	for id, want := range map[int64]int{1: 1, 2: 0, 3: 0} {
		recs, err := q.Ready(ctx, id, 10, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != want {
			t.Fatalf("destination %d holds %d records, want %d", id, len(recs), want)
		}
		if want == 0 {
			continue
		}
		r := recs[0]
		var got control.Event
		if err := json.Unmarshal(r.Payload, &got); err != nil || got.ID != ev.ID || got.Kind != ev.Kind {
			t.Fatalf("queued payload %s (%v), want the event", r.Payload, err)
		}
		if !r.Critical || r.Topic != "i/T/a/A/events" || r.MsgID != "ev_anomaly_alert_7" {
			t.Fatalf("queued record critical=%v topic=%q msgId=%q; want critical on i/T/a/A/events", r.Critical, r.Topic, r.MsgID)
		}
	}
}

// testQueue is an offline queue in a store of its own, closed with the test.
func testQueue(t *testing.T) *store.Queue {
	t.Helper()
	st, err := store.Open(t.Context(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	q, err := st.OfflineQueue(store.DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	return q
}
