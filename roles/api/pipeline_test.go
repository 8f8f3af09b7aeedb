package api

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	dto "github.com/prometheus/client_model/go"
)

func randomID(t *testing.T) string {
	var u codec.UUID
	if _, err := rand.Read(u[:]); err != nil {
		t.Fatal(err)
	}
	return codec.EncodeID(u)
}

func envelopeFor(seq int, value float64) map[string]any {
	return map[string]any{
		"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus", "msgId": fmt.Sprintf("v2_Ab12Cd34_%d", seq),
		"messages": []any{map[string]any{"readings": []any{
			map[string]any{"deviceName": "plc1", "metric": "temp", "value": value, "unit": "C", "quality": "GOOD"},
			map[string]any{"deviceName": "plc2", "metric": "rpm", "value": 1500, "quality": "GOOD"},
		}}},
	}
}

// TestPipelineIntegration publishes to the real Mosquitto with paho, as an
// agent does, and reads what the pipeline appended to the real Redis.
func TestPipelineIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	brokerAddr := coretest.MQTTAddr(t)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	tenantA, tenantB, agent := randomID(t), randomID(t), randomID(t)
	defer store.Delete(ctx, telemetry.IngestionStream(tenantA), telemetry.IngestionStream(tenantB))

	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second), Streams: store}
	pipe, err := newPipeline(cfg, r)
	if err != nil {
		t.Fatal(err)
	}
	mo := mqttx.DefaultOptions()
	mo.BrokerURL, mo.ClientID, mo.CleanSession, mo.Registerer, mo.Name = "tcp://"+brokerAddr, "pipeline-test-"+agent, true, r.Metrics, "api-mqtt"
	client, err := mqttx.New(mo)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"i/" + tenantA + "/a/+/endpoints/#", "i/" + tenantB + "/a/+/endpoints/#", "i/" + tenantA + "/bad/#"} {
		if err := client.Subscribe(f, 1, pipe.handle); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(rctx, lifecycle.Options{}, pipe, client) }()
	defer func() { cancel(); <-done }()
	coretest.Eventually(t, 10*time.Second, "the subscriber to connect", func() bool { return client.Check(ctx) == nil })

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	publish := func(topic string, payload []byte) {
		t.Helper()
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	topicA := "i/" + tenantA + "/a/" + agent + "/endpoints/modbus"
	seq := 0
	for _, f := range codec.Formats() {
		for _, compact := range []bool{false, true} {
			seq++
			raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: f, Compact: compact})
			if err != nil {
				t.Fatal(err)
			}
			publish(topicA, raw)
		}
	}
	dup, _ := codec.Encode(envelopeFor(1, 999), codec.EncodeOptions{Format: codec.FormatJSON})
	publish(topicA, dup)                                                    // tenant A repeats msgId 1: dropped
	publish("i/"+tenantB+"/a/"+agent+"/endpoints/modbus", dup)              // tenant B, same msgId: lands
	publish("i/"+tenantA+"/bad/topic", []byte("x"))                         // malformed topic
	publish(topicA, []byte{0x78, 0x9c, 0xff, 0x00})                         // undecodable
	publish(topicA, []byte(`{"messages":[{"readings":[{"metric":"x"}]}]}`)) // invalid envelope
	last, _ := codec.Encode(envelopeFor(100, 1), codec.EncodeOptions{Format: codec.FormatJSON})
	publish(topicA, last) // after the bad ones: the subscriber kept going

	wantA := (seq + 1) * 2 // two devices per message
	coretest.Eventually(t, 10*time.Second, "the entries of tenant A", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenantA))
		return n >= int64(wantA)
	})
	time.Sleep(200 * time.Millisecond)
	entries, err := store.Range(ctx, telemetry.IngestionStream(tenantA), "-", "+", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != wantA {
		t.Fatalf("tenant A has %d entries, want %d (8 encodings + the last, 2 devices each; the duplicate dropped)", len(entries), wantA)
	}
	for i, en := range entries {
		m, err := telemetry.ParseMessage([]byte(en.Values[telemetry.StreamField]))
		if err != nil {
			t.Fatalf("entry %d breaks the stream contract: %v", i, err)
		}
		if m.MsgID == "v2_Ab12Cd34_1" && m.DeviceName == "plc1" && *m.Readings[0].Value != 1 {
			t.Errorf("msgId 1 carries %g: the duplicate replaced it", *m.Readings[0].Value)
		}
	}
	coretest.Eventually(t, 10*time.Second, "tenant B's message", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenantB))
		return n == 2
	})
	for name, want := range map[string]float64{"api_telemetry_duplicates_total": 1, "api_mqtt_messages_dropped_total": 3} {
		if got := counter(t, r, name); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	var m map[string]any
	_ = json.Unmarshal([]byte(entries[0].Values["data"]), &m)
	if m["agentUuid"] == "" {
		t.Errorf("entry = %v", m)
	}
}

func counter(t *testing.T, r *rt.Runtime, name string) float64 {
	t.Helper()
	mfs, err := r.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += value(m)
		}
	}
	return sum
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}
