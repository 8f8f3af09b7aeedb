package api

import (
	"fmt"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/mqttx"
)

// BenchmarkPrepareAndRequest is the subscriber's CPU per message before
// the store: decode a 50-reading msgpack+deflate envelope, map it, and
// encode the stream entries and the live payload.
func BenchmarkPrepareAndRequest(b *testing.B) {
	pipe := newTestPipeline(b, nil)
	var readings []any
	for i := range 50 {
		readings = append(readings, map[string]any{"deviceName": "plc1", "metric": fmt.Sprintf("r%d", i), "value": float64(i) * 1.5,
			"unit": "C", "quality": "GOOD", "timestamp": "2026-11-22T10:00:00.123Z"})
	}
	raw, err := codec.Encode(map[string]any{"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus", "msgId": "v2_Ab12Cd34_7",
		"messages": []any{map[string]any{"readings": readings}}}, codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
	if err != nil {
		b.Fatal(err)
	}
	tenant, agent := codec.EncodeID(codec.UUID{1}), codec.EncodeID(codec.UUID{2})
	msg := mqttx.Message{Topic: "i/" + tenant + "/a/" + agent + "/endpoints/modbus", Payload: raw, QoS: 1}
	b.Run("prepare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := pipe.prepare(msg); !ok {
				b.Fatal("dropped")
			}
		}
	})
	t, batch, _ := pipe.prepare(msg)
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := pipe.request(t, batch); err != nil {
				b.Fatal(err)
			}
		}
	})
}
