package envelope

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

const (
	tenantUUID = "5d4c3b2a-1f0e-4d9c-8b7a-6f5e4d3c2b1a"
	agentUUID  = "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11"
)

func ids(t *testing.T) (string, string) {
	tn, err := codec.IDFromUUID(tenantUUID)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := codec.IDFromUUID(agentUUID)
	if err != nil {
		t.Fatal(err)
	}
	return tn, ag
}

func TestParseTopic(t *testing.T) {
	tn, ag := ids(t)
	tests := []struct {
		topic    string
		kind     Kind
		endpoint string
		wantErr  bool
	}{
		{"i/" + tn + "/a/" + ag + "/endpoints/modbus", Telemetry, "modbus", false},
		{"i/" + tn + "/a/" + ag + "/endpoints/plant/line-1/plc", Telemetry, "plant/line-1/plc", false},
		{"i/" + tn + "/a/" + ag + "/state", State, "", false},
		{"i/" + tn + "/a/" + ag + "/metrics", Metrics, "", false},
		{"i/" + tn + "/a/" + ag + "/endpoints/", 0, "", true},
		{"i/" + tn + "/a/" + ag + "/state/extra", 0, "", true},
		{"i/" + tn + "/a/" + ag + "/other", 0, "", true},
		{"i/" + tenantUUID + "/a/" + ag + "/state", 0, "", true}, // hyphenated form is not a topic id
		{"i/" + tn + "/a/" + ag[:21] + "/state", 0, "", true},
		{"x/" + tn + "/a/" + ag + "/state", 0, "", true},
		{"i/" + tn + "/b/" + ag + "/state", 0, "", true},
		{"", 0, "", true},
	}
	for _, tt := range tests {
		got, err := ParseTopic(tt.topic)
		if tt.wantErr {
			if !errors.Is(err, ErrTopic) {
				t.Errorf("ParseTopic(%q) = %+v, %v; want ErrTopic", tt.topic, got, err)
			}
			continue
		}
		if err != nil || got.Kind != tt.kind || got.Endpoint != tt.endpoint || got.AgentUUID != agentUUID || got.Tenant != tn {
			t.Errorf("ParseTopic(%q) = %+v, %v", tt.topic, got, err)
		}
	}
}

func envelopeValue() map[string]any {
	return map[string]any{
		"timestamp": "2026-11-22T10:00:00.000Z",
		"protocol":  "modbus",
		"msgId":     "v2_Ab12Cd34_42",
		"messages": []any{
			map[string]any{"readings": []any{
				map[string]any{"deviceName": "plc1", "deviceId": "1", "metric": "temp", "value": 21.5, "unit": "C", "quality": "GOOD", "timestamp": "2026-11-22T09:59:59.500Z"},
				map[string]any{"deviceName": "plc2", "metric": "rpm", "value": 1500, "quality": "GOOD"},
				map[string]any{"deviceName": "plc1", "metric": "pressure", "value": nil, "quality": "BAD", "qualityCode": "TIMEOUT"},
				map[string]any{"deviceName": "plc2", "metric": "running", "value": true, "timestamp": int64(1763805600000)},
			}},
		},
	}
}

// TestMapEveryEncoding: whatever layers the agent used, the same messages
// come out, with the readings' own timestamps kept.
func TestMapEveryEncoding(t *testing.T) {
	tn, ag := ids(t)
	topic, err := ParseTopic("i/" + tn + "/a/" + ag + "/endpoints/modbus")
	if err != nil {
		t.Fatal(err)
	}
	var want string
	for _, f := range codec.Formats() {
		for _, compact := range []bool{false, true} {
			raw, err := codec.Encode(envelopeValue(), codec.EncodeOptions{Format: f, Compact: compact})
			if err != nil {
				t.Fatal(err)
			}
			dec, err := codec.Decode(raw, codec.Limits{})
			if err != nil {
				t.Fatalf("%s compact=%v: %v", f, compact, err)
			}
			b, err := Map(topic, dec.Value)
			if err != nil {
				t.Fatalf("%s compact=%v: %v", f, compact, err)
			}
			got, _ := json.Marshal(b)
			if want == "" {
				want = string(got)
			} else if string(got) != want {
				t.Errorf("%s compact=%v gave\n%s\nwant\n%s", f, compact, got, want)
			}
		}
	}
	var b Batch
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	if b.MsgID != "v2_Ab12Cd34_42" || len(b.Messages) != 2 {
		t.Fatalf("batch = %s", want)
	}
	plc1, plc2 := b.Messages[0], b.Messages[1]
	if plc1.DeviceName != "plc1" || len(plc1.Readings) != 2 || plc1.AgentUUID != agentUUID || plc1.Protocol != "modbus" {
		t.Errorf("plc1 = %+v", plc1)
	}
	if !plc1.Readings[0].Timestamp.Equal(time.Date(2026, 11, 22, 9, 59, 59, 500e6, time.UTC)) || *plc1.Readings[0].Value != 21.5 {
		t.Errorf("plc1 temp = %+v", plc1.Readings[0])
	}
	if plc1.Readings[1].Value != nil || plc1.Readings[1].Quality != "BAD" {
		t.Errorf("a BAD read must keep a null value: %+v", plc1.Readings[1])
	}
	if *plc2.Readings[0].Value != 1500 || *plc2.Readings[1].Value != 1 || !plc2.Readings[1].Timestamp.Equal(time.UnixMilli(1763805600000)) {
		t.Errorf("plc2 = %+v", plc2.Readings)
	}
	for _, m := range b.Messages {
		if err := m.Validate(); err != nil {
			t.Errorf("mapped message fails the stream contract: %v", err)
		}
	}
}

func TestMapRejects(t *testing.T) {
	tn, ag := ids(t)
	topic, _ := ParseTopic("i/" + tn + "/a/" + ag + "/endpoints/opcua/line")
	tests := []struct {
		name   string
		mutate func(map[string]any)
		want   string
	}{
		{"no messages", func(e map[string]any) { delete(e, "messages") }, "messages is missing"},
		{"bad msgId", func(e map[string]any) { e["msgId"] = "v1_x_1" }, "msg"},
		{"bad timestamp", func(e map[string]any) { e["timestamp"] = "noon" }, "timestamp"},
		{"reading without device", func(e map[string]any) {
			e["messages"] = []any{map[string]any{"readings": []any{map[string]any{"metric": "t", "value": 1}}}}
		}, "no deviceName"},
		{"only text values", func(e map[string]any) {
			e["messages"] = []any{map[string]any{"readings": []any{map[string]any{"deviceName": "d", "metric": "t", "value": "hot"}}}}
		}, "no numeric readings"},
		{"empty", func(e map[string]any) { e["messages"] = []any{} }, "no readings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := envelopeValue()
			tt.mutate(e)
			_, err := Map(topic, e)
			if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Map = %v, want ErrPayload mentioning %q", err, tt.want)
			}
		})
	}
	// Without a protocol in the envelope, the endpoint topic's first segment.
	e := envelopeValue()
	delete(e, "protocol")
	b, err := Map(topic, e)
	if err != nil || b.Messages[0].Protocol != "opcua" {
		t.Errorf("protocol fallback = %+v, %v", b, err)
	}
	if _, err := Map(topic, []any{1}); !errors.Is(err, ErrPayload) {
		t.Errorf("array payload: %v", err)
	}
}

func FuzzParseTopic(f *testing.F) {
	f.Add("i/XdQ7Kh8fTZ2Le2-PXk0rGg/a/Cx5cUp9KTB6Nfi9rgwmhEQ/endpoints/modbus")
	f.Add("i/a/a/a/state")
	f.Fuzz(func(t *testing.T, topic string) {
		tp, err := ParseTopic(topic)
		if err == nil && (tp.Kind == 0 || len(tp.AgentUUID) != 36) {
			t.Fatalf("accepted %q as %+v", topic, tp)
		}
	})
}

func FuzzMap(f *testing.F) {
	seed, _ := json.Marshal(envelopeValue())
	f.Add(seed)
	f.Add([]byte(`{"messages":[{"readings":[{"deviceName":"d","metric":"m","value":1e308}]}]}`))
	topic := Topic{Kind: Telemetry, AgentUUID: agentUUID, Endpoint: "modbus"}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec, err := codec.Decode(data, codec.Limits{})
		if err != nil {
			return
		}
		b, err := Map(topic, dec.Value)
		if err != nil {
			return
		}
		for _, m := range b.Messages {
			if err := m.Validate(); err != nil {
				t.Fatalf("Map produced an invalid message: %v", err)
			}
		}
	})
}

// TestMapReadingTimestampsAndValues: readings keep their own timestamps
// and values when consecutive readings share, repeat or alternate them,
// and a value is never aliased to another reading's.
func TestMapReadingTimestampsAndValues(t *testing.T) {
	tn, ag := ids(t)
	tp, err := ParseTopic("i/" + tn + "/a/" + ag + "/endpoints/modbus")
	if err != nil {
		t.Fatal(err)
	}
	stamps := []any{"2026-11-22T10:00:00Z", "2026-11-22T10:00:00Z", "2026-11-22T10:00:01Z", int64(1763805600500), "2026-11-22T10:00:00Z"}
	var readings []any
	for i, ts := range stamps {
		readings = append(readings, map[string]any{"deviceName": "plc1", "metric": "m" + string(rune('a'+i)), "value": float64(i), "timestamp": ts})
	}
	for i := range 100 { // past one value slab
		readings = append(readings, map[string]any{"deviceName": "plc2", "metric": "n", "value": int64(i)})
	}
	b, err := Map(tp, map[string]any{"messages": []any{map[string]any{"readings": readings}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []time.Time{
		time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 22, 10, 0, 1, 0, time.UTC), time.UnixMilli(1763805600500), time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC),
	}
	for i, r := range b.Messages[0].Readings {
		if !r.Timestamp.Equal(want[i]) || *r.Value != float64(i) {
			t.Errorf("reading %d: %s %v, want %s %d", i, r.Timestamp, *r.Value, want[i], i)
		}
	}
	for i, r := range b.Messages[1].Readings {
		if *r.Value != float64(i) {
			t.Fatalf("plc2 reading %d = %v", i, *r.Value)
		}
	}
}

// TestMapSkipsTextValues checks that a reading whose value is text (an
// OPC-UA string node, say) is left out and counted, and the envelope's
// numeric readings still arrive, on both mapping paths.
func TestMapSkipsTextValues(t *testing.T) {
	env := map[string]any{"msgId": "v2_Ab12Cd34_9", "messages": []any{map[string]any{"readings": []any{
		map[string]any{"deviceName": "plc", "metric": "label", "value": "line-1"},
		map[string]any{"deviceName": "plc", "metric": "temp", "value": 21.5},
		map[string]any{"deviceName": "plc", "metric": "count", "value": "42"},
	}}}}
	top := Topic{Tenant: "t", Agent: "a", AgentUUID: "a", Endpoint: "opcua"}
	b, err := Map(top, env)
	if err != nil {
		t.Fatal(err)
	}
	if b.Skipped != 1 || len(b.Messages) != 1 || len(b.Messages[0].Readings) != 2 {
		t.Fatalf("Map = %+v, want 2 readings and 1 skipped", b)
	}
	raw, err := codec.Encode(env, codec.EncodeOptions{Format: codec.FormatMsgpack})
	if err != nil {
		t.Fatal(err)
	}
	fast, ok := MapMsgpack(top, raw, codec.DefaultLimits())
	if !ok || fast.Skipped != 1 || len(fast.Messages) != 1 || len(fast.Messages[0].Readings) != 2 {
		t.Fatalf("MapMsgpack = %+v, %v", fast, ok)
	}
}

// TestMapAnomalyScore: a reading's anomaly_score enrichment is kept when it
// is a finite number and left out otherwise, the reading standing either
// way.
func TestMapAnomalyScore(t *testing.T) {
	tn, ag := ids(t)
	tp, err := ParseTopic("i/" + tn + "/a/" + ag + "/endpoints/modbus")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		score any
		want  *float64
	}{
		{0.75, ptrFloat(0.75)},
		{int64(1), ptrFloat(1)},
		{nil, nil},
		{"0.9", nil},
		{math.NaN(), nil},
		{map[string]any{"x": 1.0}, nil},
	}
	for _, tt := range tests {
		r := map[string]any{"deviceName": "plc1", "metric": "t", "value": 20.5}
		if tt.score != nil {
			r["anomaly_score"] = tt.score
		}
		b, err := Map(tp, map[string]any{"messages": []any{map[string]any{"readings": []any{r}}}})
		if err != nil {
			t.Fatalf("score %v: %v", tt.score, err)
		}
		got := b.Messages[0].Readings[0].AnomalyScore
		if (got == nil) != (tt.want == nil) || (got != nil && *got != *tt.want) {
			t.Errorf("score %v: got %v, want %v", tt.score, got, tt.want)
		}
	}
}

func ptrFloat(f float64) *float64 { return &f }
