package publish

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// benchReadings is the size of one benchmark batch: one poll of a device
// with 100 data points.
const benchReadings = 100

// benchPublisher opens a publisher on a fresh store with one platform
// destination on broker, with or without delivery receipts, and one
// subscription in msgpack+deflate. A cloud stand-in (benchCloud) reads
// what reaches the broker and, with receipts, confirms it once a second,
// as the Cloud API's receipt tracker does.
func benchPublisher(b *testing.B, brokerURL string, receipts bool) (*Router, *destRun) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, b.TempDir(), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	config := json.RawMessage(`{"receipts":false}`)
	if receipts {
		config = json.RawMessage(`{"receipts":true}`)
	}
	d, err := st.Publishing().CreateDestination(ctx, store.Destination{Name: "cloud", Type: "platform", Enabled: true, Config: config})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Publishing().CreateSubscription(ctx, store.Subscription{DestinationID: d.ID, PayloadFormat: "custom", Compression: "msgpack+deflate", Enabled: true}); err != nil {
		b.Fatal(err)
	}
	tenant, agentID := codec.EncodeID(codec.NewUUID()), codec.EncodeID(codec.NewUUID())
	creds := dest.PlatformCredentials{BrokerURL: brokerURL, ClientID: "bench-" + agentID, TopicPrefix: "i/" + tenant + "/a/" + agentID}
	p := New(log, nil)
	runCtx, cancel := context.WithCancel(ctx)
	if err := p.Open(runCtx, st, creds, "BenchKid"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		p.Close()
		cancel()
	})
	r := p.platformRuns()[0]
	// The stand-in runs either way, so both compare on the same CPU.
	benchCloud(b, brokerURL, p, receipts)
	deadline := time.Now().Add(10 * time.Second)
	for !r.t.Connected() || r.w.Mode() != "direct" {
		if time.Now().After(deadline) {
			b.Fatal("platform destination not connected")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return p, r
}

// benchBatch is one poll of 100 float readings of one device.
func benchBatch(i int) batch.Batch {
	now := time.Now()
	rs := make([]adapters.Reading, benchReadings)
	for j := range rs {
		rs[j] = adapters.Reading{DeviceName: "press-1", DeviceID: "unit-1", Metric: "r" + strconv.Itoa(j),
			Value: float64(i*benchReadings+j) * 0.25, Unit: "bar", Timestamp: now, Quality: adapters.Good}
	}
	return batch.Batch{Endpoint: "press-1", Messages: []batch.Message{{Endpoint: "press-1", Readings: rs, Received: now}}}
}

var benchEndpoint = adapters.Endpoint{UUID: "bench", Name: "press-1", Protocol: "modbus", MQTTTopic: "plant/press-1"}

// benchCloud subscribes to the agents' telemetry on brokerURL and, when
// apply, hands the msgIds it got to p as one receipt a second.
func benchCloud(b *testing.B, brokerURL string, p *Router, apply bool) {
	b.Helper()
	o := mqttx.DefaultOptions()
	o.Name, o.BrokerURL, o.ClientID = "bench-cloud", brokerURL, fmt.Sprintf("bench-cloud-%d", time.Now().UnixNano())
	o.Logger = slog.New(slog.DiscardHandler)
	o.Registerer = prometheus.NewRegistry()
	c, err := mqttx.New(o)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	held := map[string][]control.Range{}
	if err := c.Subscribe("i/+/a/+/endpoints/#", 1, func(_ context.Context, m mqttx.Message) error {
		dec, err := codec.Decode(m.Payload, codec.Limits{})
		if err != nil {
			return nil
		}
		doc, _ := dec.Value.(map[string]any)
		id, _ := doc["msgId"].(string)
		if kid, seq, err := codec.ParseMsgID(id); err == nil {
			mu.Lock()
			held[kid] = control.AddSeq(held[kid], seq)
			mu.Unlock()
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := c.Start(ctx); err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Go(func() { _ = c.Run(ctx) })
	wg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			mu.Lock()
			var r control.Receipts
			for kid, rs := range held {
				r.Keys = append(r.Keys, control.KeyReceipt{KID: kid, Ranges: rs})
			}
			held = map[string][]control.Range{}
			mu.Unlock()
			if apply && len(r.Keys) > 0 {
				if _, err := p.ApplyReceipts(ctx, r); err != nil && ctx.Err() == nil {
					b.Errorf("apply receipts: %v", err)
				}
			}
		}
	})
	b.Cleanup(func() {
		cancel()
		wg.Wait()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = c.Stop(sctx)
	})
}

// waitDelivered waits until the broker acknowledged n messages and
// nothing is left to send: records awaiting a receipt were sent.
func waitDelivered(b *testing.B, r *destRun, n int64) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		st, err := r.w.Status(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if st.Delivered+st.Replayed >= n && st.Records == st.Awaiting {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("delivered %d of %d (status %+v)", st.Delivered+st.Replayed, n, st)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// BenchmarkPublishPlatformIntegration is the publish throughput of one
// agent to the platform destination on a private Mosquitto: batches of
// 100 readings, routed, encoded in the custom format with msgpack+deflate
// (deflate only under 70 % CPU, docs/agent.md section Publishing), handed to the
// destination's worker and acknowledged by the broker (PUBACK).
//
// Sub-benchmarks compare the destination with delivery receipts off and
// on (each direct send then also writes its batch to SQLite, and the
// receipts delete it).
//
//	go test -run '^$' -bench PublishPlatform -benchtime 20000x ./roles/agent/publish/
func BenchmarkPublishPlatformIntegration(b *testing.B) {
	for _, receipts := range []bool{false, true} {
		b.Run(fmt.Sprintf("receipts=%t", receipts), func(b *testing.B) { benchPublish(b, receipts) })
	}
}

func benchPublish(b *testing.B, receipts bool) {
	broker := coretest.PrivateMosquitto(b)
	p, r := benchPublisher(b, broker.URL(), receipts)
	ctx := context.Background()
	batches := make([]batch.Batch, 64)
	for i := range batches {
		batches[i] = benchBatch(i)
	}
	before, _ := r.w.Status(ctx)
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		p.Deliver(ctx, benchEndpoint, batches[i%len(batches)])
	}
	waitDelivered(b, r, before.Delivered+before.Replayed+int64(b.N))
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "batches/s")
	b.ReportMetric(float64(b.N*benchReadings)/elapsed.Seconds(), "readings/s")
	b.ReportMetric(rssMB(), "maxRSS-MB")
}

// BenchmarkDrainBacklogIntegration is the drain rate of a 10,000-record
// backlog: the broker is stopped, 10,000 batches are queued in SQLite,
// the broker comes back and the worker replays the backlog.
//
//	go test -run '^$' -bench DrainBacklog -benchtime 1x ./roles/agent/publish/
func BenchmarkDrainBacklogIntegration(b *testing.B) {
	for _, receipts := range []bool{false, true} {
		b.Run(fmt.Sprintf("receipts=%t", receipts), func(b *testing.B) { benchDrain(b, receipts) })
	}
}

func benchDrain(b *testing.B, receipts bool) {
	const backlog = 10000
	broker := coretest.PrivateMosquitto(b)
	p, r := benchPublisher(b, broker.URL(), receipts)
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		broker.Stop()
		deadline := time.Now().Add(30 * time.Second)
		for r.w.Mode() != "buffer-only" {
			if time.Now().After(deadline) {
				b.Fatal("the worker did not notice the broker stop")
			}
			time.Sleep(10 * time.Millisecond)
		}
		for i := range backlog {
			p.Deliver(ctx, benchEndpoint, benchBatch(i))
		}
		st, _ := r.w.Status(ctx)
		if st.Records-st.Awaiting != backlog {
			b.Fatalf("backlog of %d records, want %d", st.Records, backlog)
		}
		before := st.Delivered + st.Replayed
		broker.Start()
		// The reconnect backoff is not the drain: time from the moment
		// the destination is connected again.
		for !r.t.Connected() {
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		start := time.Now()
		waitDelivered(b, r, before+backlog)
		elapsed := time.Since(start)
		b.ReportMetric(backlog/elapsed.Seconds(), "records/s")
		b.ReportMetric(float64(st.Bytes)/backlog, "bytes/record")
	}
	b.ReportMetric(rssMB(), "maxRSS-MB")
}

// rssMB is the peak resident set of this process (VmHWM) in MB.
func rssMB() float64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}
