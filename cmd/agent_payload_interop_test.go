package cmd

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// The agent's custom payload read by the cloud's ingest: every compression
// the agent can publish, through both of the cloud's paths (the MessagePack
// fast path envelope.MapMsgpack behind codec.Unwrap, and codec.Decode
// followed by envelope.Map), arrives with its devices, metrics, values,
// units, qualities and timestamps unchanged.
//
// Only custom is covered: the cloud's envelope package reads the custom
// envelope and nothing else, so a tags, ecp or ml payload on a telemetry
// topic is dropped there as an invalid envelope (the last subtest pins
// that down, so the day the cloud learns them this test is extended).

type interopReading struct {
	device, metric, unit, quality string
	value                         *float64
	at                            time.Time
}

func interopBatch(extra int) (batch.Batch, []interopReading) {
	t0 := time.Date(2026, 11, 24, 10, 0, 0, 123456789, time.FixedZone("CET", 3600))
	num := func(f float64) *float64 { return &f }
	opc := adapters.Reading{DeviceName: "opc-server", DeviceID: "ns=2;s=Line1", Metric: "flow", Value: 12.25, Unit: "m3/h",
		Timestamp: t0.Add(300 * time.Millisecond), Quality: adapters.Good, Protocol: "opcua", NodeType: "Double"}
	poll1 := []adapters.Reading{
		{DeviceName: "plc-1", DeviceID: "10.0.0.5:502/1", Metric: "temperature", Value: 21.5, Unit: "C", Timestamp: t0, Quality: adapters.Good},
		{DeviceName: "plc-1", DeviceID: "10.0.0.5:502/1", Metric: "count", Value: int64(42), Timestamp: t0, Quality: adapters.Good},
		{DeviceName: "plc-1", DeviceID: "10.0.0.5:502/1", Metric: "running", Value: true, Timestamp: t0, Quality: adapters.Good},
		{DeviceName: "plc-1", DeviceID: "10.0.0.5:502/1", Metric: "pressure", Unit: "bar", Timestamp: t0,
			Quality: adapters.Bad, QualityCode: "TIMEOUT"},
		{DeviceName: "plc-1", DeviceID: "10.0.0.5:502/1", Metric: "ratio", Value: float32(0.1), Timestamp: t0, Quality: adapters.Good},
	}
	want := []interopReading{
		{"plc-1", "temperature", "C", "GOOD", num(21.5), t0},
		{"plc-1", "count", "", "GOOD", num(42), t0},
		{"plc-1", "running", "", "GOOD", num(1), t0},
		{"plc-1", "pressure", "bar", "BAD", nil, t0},
		{"plc-1", "ratio", "", "GOOD", num(0.1), t0},
	}
	poll2 := []adapters.Reading{opc}
	want = append(want, interopReading{"opc-server", "flow", "m3/h", "GOOD", num(12.25), opc.Timestamp})
	for i := range extra {
		at := t0.Add(time.Duration(i+1) * time.Millisecond)
		poll2 = append(poll2, adapters.Reading{DeviceName: "plc-2", DeviceID: "d2", Metric: fmt.Sprintf("reg%03d", i),
			Value: float64(i) / 7, Unit: "V", Timestamp: at, Quality: adapters.Good})
		want = append(want, interopReading{"plc-2", fmt.Sprintf("reg%03d", i), "V", "GOOD", num(float64(i) / 7), at})
	}
	return batch.Batch{Endpoint: "line-1", Messages: []batch.Message{
		{Endpoint: "line-1", Readings: poll1, Received: t0.Add(time.Second)},
		{Endpoint: "line-1", Readings: poll2, Received: t0.Add(2 * time.Second)},
	}}, want
}

func interopTopic(t *testing.T) envelope.Topic {
	t.Helper()
	topic := "i/" + codec.EncodeID(codec.NewUUID()) + "/a/" + codec.EncodeID(codec.NewUUID()) + "/endpoints/modbus/line-1"
	tp, err := envelope.ParseTopic(topic)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// cloudRead reads a payload as roles/api's pipeline does (prepare): the
// MessagePack fast path first, then the generic decoder. It returns both
// results so the test holds each to the expectation.
func cloudRead(t *testing.T, tp envelope.Topic, b []byte) (generic envelope.Batch, fast *envelope.Batch) {
	t.Helper()
	var fb envelope.Batch
	if codec.Unwrap(b, codec.Limits{}, func(raw []byte, enc codec.Encoding, lim codec.Limits) bool {
		var ok bool
		if enc == codec.EncodingMsgpack {
			fb, ok = envelope.MapMsgpack(tp, raw, lim)
		}
		return ok
	}) {
		fast = &fb
	}
	dec, err := codec.Decode(b, codec.Limits{})
	if err != nil {
		t.Fatalf("cloud decode: %v", err)
	}
	generic, err = envelope.Map(tp, dec.Value)
	if err != nil {
		t.Fatalf("cloud map: %v", err)
	}
	return generic, fast
}

func checkCloudBatch(t *testing.T, got envelope.Batch, msgID, protocol string, sent time.Time, want []interopReading) {
	t.Helper()
	if got.MsgID != msgID {
		t.Errorf("msgId %q, want %q", got.MsgID, msgID)
	}
	var flat []interopReading
	for _, m := range got.Messages {
		if m.Protocol != protocol || m.MsgID != msgID {
			t.Errorf("device %s: protocol %q msgId %q", m.DeviceName, m.Protocol, m.MsgID)
		}
		if m.Timestamp == nil || !m.Timestamp.Equal(sent) {
			t.Errorf("device %s: envelope timestamp %v, want %v", m.DeviceName, m.Timestamp, sent)
		}
		for _, r := range m.Readings {
			ir := interopReading{device: m.DeviceName, metric: r.Name, unit: r.Unit, quality: r.Quality, value: r.Value}
			if r.Timestamp != nil {
				ir.at = r.Timestamp.Time
			}
			flat = append(flat, ir)
		}
	}
	if len(flat) != len(want) {
		t.Fatalf("%d readings arrived, %d sent", len(flat), len(want))
	}
	for i, w := range want {
		g := flat[i]
		if g.device != w.device || g.metric != w.metric || g.unit != w.unit || g.quality != w.quality {
			t.Errorf("reading %d: %s/%s unit %q quality %q, want %s/%s unit %q quality %q",
				i, g.device, g.metric, g.unit, g.quality, w.device, w.metric, w.unit, w.quality)
		}
		if (g.value == nil) != (w.value == nil) || g.value != nil && *g.value != *w.value {
			t.Errorf("reading %d (%s): value %v, want %v", i, w.metric, deref(g.value), deref(w.value))
		}
		if !g.at.Equal(w.at) {
			t.Errorf("reading %d (%s): timestamp %v, want the original %v", i, w.metric, g.at, w.at)
		}
	}
}

func deref(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

func TestAgentPayloadCloudInterop(t *testing.T) {
	sent := time.Date(2026, 11, 24, 9, 0, 5, 500_000_000, time.UTC)
	tp := interopTopic(t)
	for _, size := range []struct {
		name  string
		extra int
	}{{"small", 0}, {"over-4KB", 80}} {
		b, want := interopBatch(size.extra)
		for seq, c := range codec.Formats() {
			t.Run(size.name+"/"+string(c), func(t *testing.T) {
				msgID, err := codec.FormatMsgID("Ab3dEf9h", uint64(1000+seq))
				if err != nil {
					t.Fatal(err)
				}
				doc, err := payload.Build(payload.Custom, b, payload.Options{
					Protocol: "modbus", MsgID: msgID, Now: func() time.Time { return sent }})
				if err != nil {
					t.Fatal(err)
				}
				// As the agent publishes: through the subscription's
				// Compressor, CPU idle.
				comp, err := payload.NewCompressor(c, func() float64 { return 5 })
				if err != nil {
					t.Fatal(err)
				}
				wire, used, err := comp.Encode(doc)
				if err != nil {
					t.Fatal(err)
				}
				if big := size.extra > 0; big && used != c {
					t.Fatalf("a %d-byte-plus payload went out as %s, setting %s", payload.DeflateMinBytes, used, c)
				}
				// And forced into the setting's exact wire format, so a
				// small payload is also seen deflated.
				forced, err := codec.Encode(doc, codec.EncodeOptions{Format: c})
				if err != nil {
					t.Fatal(err)
				}
				for _, w := range []struct {
					b []byte
					f codec.Format
				}{{wire, used}, {forced, c}} {
					generic, fast := cloudRead(t, tp, w.b)
					checkCloudBatch(t, generic, msgID, "modbus", sent, want)
					if w.f.Encoding() == codec.EncodingMsgpack {
						if fast == nil {
							t.Fatalf("%s: the cloud's MessagePack fast path declined the agent's payload", w.f)
						}
						checkCloudBatch(t, *fast, msgID, "modbus", sent, want)
					}
				}
			})
		}
	}

	t.Run("1000th publish raw JSON", func(t *testing.T) {
		b, want := interopBatch(80)
		comp, err := payload.NewCompressor(codec.FormatMsgpackDeflate, nil)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := payload.Build(payload.Custom, b, payload.Options{Protocol: "modbus", MsgID: "v2_Ab3dEf9h_7", Now: func() time.Time { return sent }})
		if err != nil {
			t.Fatal(err)
		}
		for range payload.RawJSONEvery - 1 {
			if _, _, err := comp.Encode(doc); err != nil {
				t.Fatal(err)
			}
		}
		wire, used, err := comp.Encode(doc)
		if err != nil || used != codec.FormatJSON {
			t.Fatalf("1000th publish: %s, %v", used, err)
		}
		generic, _ := cloudRead(t, tp, wire)
		checkCloudBatch(t, generic, "v2_Ab3dEf9h_7", "modbus", sent, want)
	})

	// The cloud has no reader for the snapshot formats: envelope.Map wants
	// messages[].readings[], which tags, ecp and ml do not have.
	t.Run("snapshot formats not read by the cloud", func(t *testing.T) {
		b, _ := interopBatch(0)
		for _, f := range []payload.Format{payload.Tags, payload.ECP, payload.ML} {
			doc, err := payload.Build(f, b, payload.Options{Now: func() time.Time { return sent }})
			if err != nil {
				t.Fatal(err)
			}
			wire, err := codec.Encode(doc, codec.EncodeOptions{})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := codec.Decode(wire, codec.Limits{})
			if err != nil {
				t.Fatalf("%s: codec cannot decode it: %v", f, err)
			}
			if _, err := envelope.Map(tp, dec.Value); err == nil || !strings.Contains(err.Error(), "messages") {
				t.Errorf("%s: envelope.Map = %v; if the cloud now reads %s, check it field by field here", f, err, f)
			}
		}
	})
}
