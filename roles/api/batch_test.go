package api

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// newTestPipeline builds a pipeline from the API defaults and the
// environment, with store as its stream store (nil: none).
func newTestPipeline(t testing.TB, store streamstore.Store) *pipeline {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(),
		Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, store)
	if err != nil {
		t.Fatal(err)
	}
	return pipe
}

// counterValue reads one counter.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return value(&m)
}

// TestHandleBatchSettlesEachMessage: one batch mixing good messages,
// unusable ones and repeats (of an earlier batch and within the batch)
// acknowledges every message and appends each good one once.
func TestHandleBatchSettlesEachMessage(t *testing.T) {
	for _, mode := range []string{config.DedupModeKey, config.DedupModeSequence} {
		t.Run(mode, func(t *testing.T) {
			store, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			t.Setenv("DEDUP_MODE", mode)
			pipe := newTestPipeline(t, store)
			tenant, agent := randomID(t), randomID(t)
			topic := "i/" + tenant + "/a/" + agent + "/endpoints/modbus"
			msg := func(seq int) mqttx.Message {
				raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
				if err != nil {
					t.Fatal(err)
				}
				return mqttx.Message{Topic: topic, Payload: raw, QoS: 1}
			}
			ctx := context.Background()
			if errs := pipe.handleBatch(ctx, []mqttx.Message{msg(1)}); errs[0] != nil {
				t.Fatal(errs[0])
			}
			batch := []mqttx.Message{
				msg(2),
				{Topic: "i/short/a/" + agent + "/endpoints/modbus", Payload: msg(3).Payload}, // bad tenant id
				{Topic: topic, Payload: []byte{0x78, 0x9c, 0xff}},                            // torn deflate
				msg(1), // repeat of the first batch
				msg(4),
				msg(4), // repeat within this batch
			}
			errs := pipe.handleBatch(ctx, batch)
			if len(errs) != len(batch) {
				t.Fatalf("%d results for %d messages", len(errs), len(batch))
			}
			for i, err := range errs {
				if err != nil {
					t.Errorf("message %d: %v, want acknowledged", i, err)
				}
			}
			// Each envelope holds two devices: one entry each.
			if n, err := store.Len(ctx, telemetry.IngestionStream(tenant)); err != nil || n != 3*2 {
				t.Errorf("stream length %d (%v), want 6: messages 1, 2 and 4 once each", n, err)
			}
			if got := counterValue(t, pipe.m.duplicates); got != 2 {
				t.Errorf("duplicates = %v, want 2", got)
			}
			if got := counterValue(t, pipe.m.dropped.WithLabelValues("topic")); got != 1 {
				t.Errorf("dropped for topic = %v, want 1", got)
			}
		})
	}
}

// TestLivePayloadIsTheMessagesArray: the live payload, assembled from the
// entries' encodings, is exactly json.Marshal of the batch's messages.
func TestLivePayloadIsTheMessagesArray(t *testing.T) {
	pipe := newTestPipeline(t, nil)
	tenant, agent := randomID(t), randomID(t)
	for _, env := range []map[string]any{
		envelopeFor(1, 21.5), // two devices
		{"timestamp": "2026-11-22T10:00:00Z", "msgId": "v2_Ab12Cd34_2", "messages": []any{map[string]any{"readings": []any{
			map[string]any{"deviceName": `pl"c<1>&`, "metric": "t\u00e9mp\n", "value": nil, "quality": "BAD", "timestamp": int64(1763805600123)},
		}}}},
	} {
		raw, err := codec.Encode(env, codec.EncodeOptions{Format: codec.FormatJSON})
		if err != nil {
			t.Fatal(err)
		}
		top, b, ok := pipe.prepare(mqttx.Message{Topic: "i/" + tenant + "/a/" + agent + "/endpoints/modbus", Payload: raw})
		if !ok {
			t.Fatal("message dropped")
		}
		req, err := pipe.request(top, b)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(b.Messages)
		if err != nil {
			t.Fatal(err)
		}
		if string(req.Payload) != string(want) {
			t.Errorf("live payload\n%s\nwant\n%s", req.Payload, want)
		}
	}
}
