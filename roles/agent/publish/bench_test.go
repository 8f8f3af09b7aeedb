package publish

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// benchReadings is the size of one benchmark batch: one poll of a device
// with 100 data points.
const benchReadings = 100

// benchPublisher opens a publisher on a fresh store with one platform
// destination on broker and one subscription in msgpack+deflate.
func benchPublisher(b *testing.B, brokerURL string) (*Router, *destRun) {
	b.Helper()
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(ctx, b.TempDir(), log)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	d, err := st.Publishing().CreateDestination(ctx, store.Destination{Name: "cloud", Type: "platform", Enabled: true})
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

func waitDelivered(b *testing.B, r *destRun, n int64) {
	b.Helper()
	deadline := time.Now().Add(5 * time.Minute)
	for {
		st, err := r.w.Status(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		if st.Delivered+st.Replayed >= n && st.Records == 0 {
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
//	go test -run '^$' -bench PublishPlatform -benchtime 20000x ./roles/agent/publish/
func BenchmarkPublishPlatformIntegration(b *testing.B) {
	broker := coretest.PrivateMosquitto(b)
	p, r := benchPublisher(b, broker.URL())
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
	const backlog = 10000
	broker := coretest.PrivateMosquitto(b)
	p, r := benchPublisher(b, broker.URL())
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
		if st.Records != backlog {
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
