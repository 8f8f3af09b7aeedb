package api

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// TestStreamEntryFormatSetting: api.stream_entry_format chooses the form of
// the stream entries; either way each entry decodes to the message of the
// live payload, and a message the compact form cannot hold is written as
// JSON.
func TestStreamEntryFormatSetting(t *testing.T) {
	const agent = "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11"
	v := 21.5
	at := telemetry.TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	far := telemetry.TimestampOf(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC))
	b := envelope.Batch{MsgID: "v2_Ab12Cd34_7", Messages: []telemetry.Message{
		{AgentUUID: agent, DeviceName: "plc1", Protocol: "modbus", MsgID: "v2_Ab12Cd34_7", Timestamp: at,
			Readings: []telemetry.Reading{{Name: "a", Value: &v, Unit: "C", Timestamp: at}, {Name: "b", Quality: "BAD"}}},
		{AgentUUID: agent, DeviceName: "plc2", Timestamp: far, Readings: []telemetry.Reading{{Name: "a", Value: &v}}},
	}}
	tests := []struct {
		setting string
		compact []bool // per message
	}{
		{"", []bool{true, false}},
		{config.StreamEntryCompact, []bool{true, false}},
		{config.StreamEntryJSON, []bool{false, false}},
	}
	for _, tt := range tests {
		t.Run("setting "+tt.setting, func(t *testing.T) {
			if tt.setting != "" {
				t.Setenv("EDGEPLAT_API_STREAM_ENTRY_FORMAT", tt.setting)
			}
			pipe := newTestPipeline(t, nil)
			tp := envelope.Topic{Kind: envelope.Telemetry, Tenant: "AAAAAAAAAAAAAAAAAAAAAA", Agent: "BBBBBBBBBBBBBBBBBBBBBA", AgentUUID: agent}
			req, err := pipe.request(tp, b)
			if err != nil {
				t.Fatal(err)
			}
			var live []json.RawMessage
			if err := json.Unmarshal(req.Payload, &live); err != nil || len(live) != len(b.Messages) {
				t.Fatalf("live payload %s: %v", req.Payload, err)
			}
			for i, en := range req.Entries {
				data := en[telemetry.StreamField]
				if got := telemetry.IsCompact(data); got != tt.compact[i] {
					t.Errorf("entry %d compact = %v, want %v: %q", i, got, tt.compact[i], data)
				}
				if !tt.compact[i] && data != string(live[i]) {
					t.Errorf("JSON entry %d = %s, want the live payload's %s", i, data, live[i])
				}
				got, gerr := telemetry.DecodeMessage([]byte(data))
				want, werr := telemetry.DecodeMessage(live[i])
				if (gerr == nil) != (werr == nil) || !reflect.DeepEqual(got, want) {
					t.Errorf("entry %d decodes to %+v (%v), the live payload to %+v (%v)", i, got, gerr, want, werr)
				}
			}
		})
	}
	t.Run("unknown form refused", func(t *testing.T) {
		t.Setenv("EDGEPLAT_API_STREAM_ENTRY_FORMAT", "msgpack")
		_, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
		if err == nil || !strings.Contains(err.Error(), "api.stream_entry_format") {
			t.Fatalf("Load = %v, want an error naming api.stream_entry_format", err)
		}
	})
}
