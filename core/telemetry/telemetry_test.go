package telemetry

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

const agent = "0b1e5c52-9f4a-4c1e-8d7e-2f6b8f0c9a11"

func TestParseMessage(t *testing.T) {
	id, _ := codec.IDFromUUID(agent)
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"iso timestamps", `{"agentUuid":"` + agent + `","deviceName":"plc1","protocol":"modbus","timestamp":"2026-11-22T10:00:00.250Z","readings":[{"name":"temp","value":21.5,"unit":"C","quality":"GOOD","timestamp":"2026-11-22T10:00:00Z"}]}`, ""},
		{"unix ms timestamps", `{"agentUuid":"` + agent + `","deviceName":"plc1","timestamp":1763805600000,"readings":[{"name":"temp","value":1}]}`, ""},
		{"topic-form agent id", `{"agentUuid":"` + id + `","deviceName":"plc1","readings":[{"name":"temp","value":1}]}`, ""},
		{"bad read has null value", `{"agentUuid":"` + agent + `","deviceName":"plc1","readings":[{"name":"temp","value":null,"quality":"BAD"}]}`, ""},
		{"unknown fields are tolerated", `{"agentUuid":"` + agent + `","deviceName":"d","extra":1,"readings":[{"name":"x","value":1,"qualityCode":"TIMEOUT"}]}`, ""},
		{"not json", `hello`, "invalid telemetry message"},
		{"bad agent", `{"agentUuid":"nope","deviceName":"plc1","readings":[{"name":"t","value":1}]}`, "agentUuid"},
		{"no device", `{"agentUuid":"` + agent + `","deviceName":" ","readings":[{"name":"t","value":1}]}`, "deviceName is empty"},
		{"no readings", `{"agentUuid":"` + agent + `","deviceName":"d","readings":[]}`, "no readings"},
		{"unnamed reading", `{"agentUuid":"` + agent + `","deviceName":"d","readings":[{"value":1}]}`, "has no name"},
		{"string value", `{"agentUuid":"` + agent + `","deviceName":"d","readings":[{"name":"t","value":"hot"}]}`, "invalid telemetry message"},
		{"timestamp in seconds by mistake is fine, in ns is not", `{"agentUuid":"` + agent + `","deviceName":"d","timestamp":1763805600000000000,"readings":[{"name":"t","value":1}]}`, "out of range"},
		{"garbage timestamp", `{"agentUuid":"` + agent + `","deviceName":"d","timestamp":"yesterday","readings":[{"name":"t","value":1}]}`, "not ISO 8601"},
		{"trailing data", `{"agentUuid":"` + agent + `","deviceName":"d","readings":[{"name":"t","value":1}]} {}`, "after the top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseMessage([]byte(tt.in))
			if tt.wantErr == "" {
				if err != nil {
					t.Fatalf("ParseMessage: %v", err)
				}
				return
			}
			if err == nil || !errors.Is(err, ErrInvalid) || !contains(err.Error(), tt.wantErr) {
				t.Fatalf("ParseMessage = %v, want an ErrInvalid containing %q", err, tt.wantErr)
			}
		})
	}
}

func contains(s, sub string) bool {
	return len(sub) == 0 || (len(s) >= len(sub) && (s == sub || indexOf(s, sub) >= 0))
}

func indexOf(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return i
		}
	}
	return -1
}

func TestRowsTimestampFallbacks(t *testing.T) {
	m, err := ParseMessage([]byte(`{"agentUuid":"` + agent + `","deviceName":"plc1","protocol":"modbus","timestamp":"2026-11-22T10:00:00Z",
		"readings":[{"name":"own","value":1,"timestamp":1763805601234},{"name":"inherits","value":2}]}`))
	if err != nil {
		t.Fatal(err)
	}
	entry := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	rows := m.Rows("tenant1", entry, nil)
	if len(rows) != 2 {
		t.Fatalf("rows = %d", len(rows))
	}
	if rows[0].MetricName != "plc1.own" || !rows[0].Time.Equal(time.UnixMilli(1763805601234)) {
		t.Errorf("row 0 = %+v", rows[0])
	}
	if rows[1].MetricName != "plc1.inherits" || !rows[1].Time.Equal(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("row 1 = %+v", rows[1])
	}
	if rows[0].AgentUUID.String() != agent || rows[0].TenantID != "tenant1" || rows[0].Protocol != "modbus" {
		t.Errorf("row fields = %+v", rows[0])
	}

	m.Timestamp = nil
	m.Readings[0].Timestamp = nil
	if rows = m.Rows("t", entry, nil); !rows[0].Time.Equal(entry) {
		t.Errorf("message without timestamp should take the entry time, got %s", rows[0].Time)
	}
}

func TestNormalizeLastWinsAndSorts(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, _ := codec.ParseUUID(agent)
	b := a
	b[0] = 0x00
	val := func(v float64) *float64 { return &v }
	rows := []Row{
		{AgentUUID: a, MetricName: "d.t", Time: base, Value: val(1)},
		{AgentUUID: a, MetricName: "d.a", Time: base, Value: val(2)},
		{AgentUUID: b, MetricName: "d.t", Time: base, Value: val(3)},
		{AgentUUID: a, MetricName: "d.t", Time: base, Value: val(4)}, // duplicate of the first: wins
		{AgentUUID: a, MetricName: "d.t", Time: base.Add(time.Second), Value: val(5)},
	}
	got := Normalize(rows)
	var desc []string
	for _, r := range got {
		desc = append(desc, fmt.Sprintf("%x %s %d %g", r.AgentUUID[0], r.MetricName, r.Time.Second(), *r.Value))
	}
	want := []string{"0 d.t 0 3", "b d.a 0 2", "b d.t 0 4", "b d.t 1 5"}
	if fmt.Sprint(desc) != fmt.Sprint(want) {
		t.Errorf("Normalize = %v, want %v", desc, want)
	}
}

func TestTimestampJSONRoundTrip(t *testing.T) {
	ts := TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC))
	b, _ := ts.MarshalJSON()
	var back Timestamp
	if err := back.UnmarshalJSON(b); err != nil || !back.Equal(ts.Time) {
		t.Errorf("round trip %s -> %v, %v", b, back, err)
	}
}

func FuzzParseMessage(f *testing.F) {
	f.Add([]byte(`{"agentUuid":"` + agent + `","deviceName":"plc1","timestamp":1763805600000,"readings":[{"name":"temp","value":1}]}`))
	f.Add([]byte(`{"agentUuid":"` + agent + `","deviceName":"plc1","timestamp":"2026-11-22T10:00:00Z","readings":[{"name":"t","value":null}]}`))
	f.Add([]byte(`{"readings":[{}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseMessage(data)
		if err != nil {
			return
		}
		rows := m.Rows("t", time.Unix(0, 0), nil)
		if len(rows) != len(m.Readings) {
			t.Fatalf("%d rows for %d readings", len(rows), len(m.Readings))
		}
		Normalize(rows)
	})
}

func TestStreamNames(t *testing.T) {
	for _, s := range []string{IngestionStream("AbC_-x"), DLQStream("AbC_-x"), LogsStream("AbC_-x")} {
		if got, err := TenantOfStream(s); err != nil || got != "AbC_-x" {
			t.Errorf("TenantOfStream(%q) = %q, %v", s, got, err)
		}
	}
	for _, bad := range []string{"tenant::agent:logs", "foo", "tenant:x"} {
		if _, err := TenantOfStream(bad); err == nil {
			t.Errorf("TenantOfStream(%q) should fail", bad)
		}
	}
	if WriterGroup("t1") != "t1:device-writers" || MetricsChannel("t", "a") != "tenant:t:device:a:metrics" {
		t.Error("names changed")
	}
}

func TestParseLogBatch(t *testing.T) {
	good := `{"agentUuid":"` + agent + `","logs":[{"level":"INFO","message":"started","timestamp":1763805600000,"component":"manager","appId":7}]}`
	b, err := ParseLogBatch([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if b.Logs[0].Level != "info" || string(b.Logs[0].Extra) != `{"appId":7}` {
		t.Errorf("parsed %+v extra %s", b.Logs[0], b.Logs[0].Extra)
	}
	for _, bad := range []string{
		`{"agentUuid":"x","logs":[{"level":"info","message":"m","timestamp":1}]}`,
		`{"agentUuid":"` + agent + `","logs":[]}`,
		`{"agentUuid":"` + agent + `","logs":[{"level":"loud","message":"m","timestamp":1}]}`,
		`{"agentUuid":"` + agent + `","logs":[{"level":"info","message":"m"}]}`,
		`[]`,
		`{"agentUuid":"` + agent + `","logs":[{"level":"info","message":"` + strings.Repeat("m", MaxLogBatchBytes) + `","timestamp":1}]}`,
	} {
		if _, err := ParseLogBatch([]byte(bad)); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseLogBatch(%s) = %v, want ErrInvalid", bad, err)
		}
	}
}

func FuzzParseLogBatch(f *testing.F) {
	f.Add([]byte(`{"agentUuid":"` + agent + `","logs":[{"level":"info","message":"m","timestamp":1,"x":[1]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ParseLogBatch(data)
		if err == nil && len(b.Logs) == 0 {
			t.Fatal("accepted a batch without lines")
		}
	})
}

// FuzzDecodeMatchesStdlib: decodeMessage accepts exactly what
// json.Unmarshal into a Message accepts, and yields the same Message.
func FuzzDecodeMatchesStdlib(f *testing.F) {
	for _, s := range []string{
		`{"agentUuid":"` + agent + `","deviceName":"plc1","timestamp":1763805600000,"readings":[{"name":"temp","value":1}]}`,
		`{"AGENTUUID":"a","devicename":"d\u00e9","x":[1,{"y":null}],"readings":[null,{"value":-1.5e3,"unit":"C"}],"readings":[{"name":"n"}]}`,
		`{"readings":[{"name":"a","value":1},{"name":"b"},{"name":"c"}],"readings":[{"value":2}],"readings":[{},{},{}]}`,
		`{"deviceName":"\ud83d\ude00\ud83d x\udc00\\u0041\"","protocol":null,"msgId":"v2_a_1","timestamp":"2026-11-22T10:00:00.5+01:00"}`,
		`null`, ` {} `, `[]`, `{"readings":{}}`, `{"readings":[{"value":"1"}]}`, `{"readings":[{"value":1e400}]}`,
		`{"readings":[{"name":"t","value":1,"anomalyScore":0.25},{"anomalyscore":null},{"anomalyScore":"x"}]}`,
		`{"timestamp":{"a":1}}`, `{"\u212aey":1,"deviceName":5}`, "{\"deviceName\":\"\xff\xfe\"}", `{"a":tru}`, `{"a":01}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if IsCompact(string(data)) {
			return // the other form (FuzzDecodeCompact)
		}
		var want, got Message
		werr := json.Unmarshal(data, &want)
		gerr := decodeMessage(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%q: encoding/json err %v, decodeMessage err %v", data, werr, gerr)
		}
		if werr != nil {
			return
		}
		if !reflect.DeepEqual(want, got) {
			t.Fatalf("%q:\nencoding/json %#v\ndecodeMessage %#v", data, want, got)
		}
		// Through an arena whose spare room another message has dirtied
		// (it outgrew the room and was moved out), the same message.
		a := dirtyArena(t)
		lent, err := a.Decode(string(data))
		if err != nil {
			t.Fatalf("%q: the arena's decoder refused what decodeMessage took: %v", data, err)
		}
		if !reflect.DeepEqual(want, lent) {
			t.Fatalf("%q:\nencoding/json %#v\narena       %#v", data, want, lent)
		}
	})
}

// dirtyArena returns an arena of four readings that a five-reading message
// has filled with values and then left.
func dirtyArena(t *testing.T) *ReadingArena {
	t.Helper()
	a := NewReadingArena(64)
	four := `{"readings":[{"name":"a"},{"name":"b"},{"name":"c"},{"name":"d"}]}`
	if _, err := a.Decode(four); err != nil {
		t.Fatal(err)
	}
	a.Reset()
	r := `{"name":"old","value":1,"unit":"U","quality":"BAD","timestamp":1,"anomalyScore":0.5}`
	if _, err := a.Decode(`{"readings":[` + strings.Repeat(r+",", 4) + r + `]}`); err != nil {
		t.Fatal(err)
	}
	if a.Len() != 0 || a.Cap() != 4 {
		t.Fatalf("dirty arena lent %d of %d, want 0 of 4", a.Len(), a.Cap())
	}
	return a
}

// BenchmarkParseMessage decodes a 50-reading stream entry, as the Cloud API
// writes it, with decodeMessage and, for comparison, encoding/json.
func BenchmarkParseMessage(b *testing.B) {
	m := Message{AgentUUID: agent, DeviceName: "plc1", Protocol: "modbus", MsgID: "v2_Ab12Cd34_7",
		Timestamp: TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))}
	for i := range 50 {
		v := float64(i) * 1.5
		m.Readings = append(m.Readings, Reading{Name: fmt.Sprintf("r%d", i), Value: &v, Unit: "C", Quality: "GOOD",
			Timestamp: TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC))})
	}
	data, err := json.Marshal(m)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ParseMessage", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseMessage(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The form the Cloud API writes: readings stamped with the message's
	// time carry no timestamp of their own.
	for i := range m.Readings {
		m.Readings[i].Timestamp = m.Timestamp
	}
	entry, err := m.AppendEntryJSON(nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("ParseMessage-entry", func(b *testing.B) {
		b.SetBytes(int64(len(entry)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseMessage(entry); err != nil {
				b.Fatal(err)
			}
		}
	})
	compact, ok := m.AppendCompactEntry(nil)
	if !ok {
		b.Fatal("compact form declined")
	}
	b.Run("ParseMessage-compact", func(b *testing.B) {
		b.SetBytes(int64(len(compact)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ParseMessage(compact); err != nil {
				b.Fatal(err)
			}
		}
	})
	// As ingest decodes: through a worker's arena, from the stream's
	// strings.
	for name, form := range map[string]string{"entry": string(entry), "compact": string(compact)} {
		b.Run("arena-"+name, func(b *testing.B) {
			a := NewReadingArena(1 << 10)
			b.SetBytes(int64(len(form)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := a.Decode(form); err != nil {
					b.Fatal(err)
				}
				a.Reset()
			}
		})
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.SetBytes(int64(len(data)))
		b.ReportAllocs()
		for b.Loop() {
			var m Message
			if err := json.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzAppendJSONMatchesStdlib: AppendJSON writes exactly the bytes
// json.Marshal writes, and fails exactly where it fails.
func FuzzAppendJSONMatchesStdlib(f *testing.F) {
	f.Add("plc1", "temp", "C", "GOOD", 21.5, int64(1763805600123), uint8(0xff))
	f.Add("<dev>&\"\\\n\t\x01\x7f", "t\u2028\u2029\xff\xfe", "", "BAD", 1e21, int64(-62135596800000), uint8(0))
	f.Add("d", "m", "u", "q", 1e-7, int64(253402300799999), uint8(0x15))
	f.Add("d", "m", "u", "q", math.NaN(), int64(0), uint8(0x0f))
	f.Add("d", "m", "u", "q", math.Inf(-1), int64(0), uint8(0x0f))
	f.Add("d", "m", "", "", math.Copysign(0, -1), int64(1), uint8(0x2a))
	f.Fuzz(func(t *testing.T, device, metric, unit, quality string, value float64, ms int64, flags uint8) {
		m := Message{AgentUUID: agent, DeviceName: device}
		if flags&1 != 0 {
			m.Protocol = unit + quality
		}
		if flags&2 != 0 {
			m.Timestamp = TimestampOf(time.UnixMilli(ms))
		}
		if flags&4 != 0 {
			m.MsgID = metric
		}
		if flags&8 != 0 {
			m.Readings = []Reading{}
		}
		for i := range int(flags >> 4) {
			r := Reading{Name: metric, Unit: unit, Quality: quality}
			if i%2 == 0 {
				v := value * float64(i+1)
				r.Value = &v
			}
			if i%4 == 3 {
				score := value / float64(i)
				r.AnomalyScore = &score
			}
			switch i % 3 {
			case 1:
				r.Timestamp = TimestampOf(time.UnixMilli(ms + int64(i)))
			case 2:
				// The message's instant, shared or as a value of its own.
				r.Timestamp = m.Timestamp
				if i%4 == 1 {
					r.Timestamp = TimestampOf(time.UnixMilli(ms))
				}
			}
			m.Readings = append(m.Readings, r)
		}
		want, werr := json.Marshal(&m)
		got, gerr := m.AppendJSON(nil)
		fullJSON := got
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("json.Marshal err %v, AppendJSON err %v", werr, gerr)
		}
		if werr == nil && string(got) != string(want) {
			t.Fatalf("AppendJSON\n%s\njson.Marshal\n%s", got, want)
		}

		// The entry form is json.Marshal of m without the readings'
		// timestamps that repeat the message's, and gives the same rows.
		compact := m
		compact.Readings = slices.Clone(m.Readings)
		for i := range compact.Readings {
			if m.Timestamp != nil && compact.Readings[i].Timestamp != nil && compact.Readings[i].Timestamp.Equal(m.Timestamp.Time) {
				compact.Readings[i].Timestamp = nil
			}
		}
		want, werr = json.Marshal(&compact)
		got, gerr = m.AppendEntryJSON(nil)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("json.Marshal err %v, AppendEntryJSON err %v", werr, gerr)
		}
		if werr != nil {
			return
		}
		if string(got) != string(want) {
			t.Fatalf("AppendEntryJSON\n%s\njson.Marshal of the compact copy\n%s", got, want)
		}
		full, err := ParseMessage(fullJSON)
		if err != nil {
			return // not a valid entry (no readings, say): nothing to compare
		}
		short, err := ParseMessage(got)
		if err != nil {
			t.Fatalf("entry form does not parse: %v\n%s", err, got)
		}
		entryTime := time.UnixMilli(1763805600000)
		if a, b := full.Rows("t", entryTime, nil), short.Rows("t", entryTime, nil); !reflect.DeepEqual(a, b) {
			t.Fatalf("rows differ\nfull  %+v\nentry %+v", a, b)
		}
	})
}

// BenchmarkAppendJSON encodes a 50-reading message, and json.Marshal for
// comparison.
func BenchmarkAppendJSON(b *testing.B) {
	m := Message{AgentUUID: agent, DeviceName: "plc1", Protocol: "modbus", MsgID: "v2_Ab12Cd34_7",
		Timestamp: TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))}
	for i := range 50 {
		v := float64(i) * 1.5
		m.Readings = append(m.Readings, Reading{Name: fmt.Sprintf("r%d", i), Value: &v, Unit: "C", Quality: "GOOD",
			Timestamp: TimestampOf(time.Date(2026, 11, 22, 10, 0, 0, 123e6, time.UTC))})
	}
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var err error
			if buf, err = m.AppendJSON(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendCompactEntry", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			var ok bool
			if buf, ok = m.AppendCompactEntry(buf[:0]); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// FuzzAppendTimestamp: the hand-written timestamp format is the layout's.
func FuzzAppendTimestamp(f *testing.F) {
	for _, ns := range []int64{0, 1763805600123456789, -62135596800000000, 253402300799999999999 / 1000, -1, 1e18} {
		f.Add(ns)
	}
	f.Fuzz(func(t *testing.T, ns int64) {
		tm := time.Unix(0, ns).In(time.FixedZone("x", 3600))
		if got, want := string(appendTimestamp(nil, tm)), tm.UTC().Format(timestampLayout); got != want {
			t.Fatalf("appendTimestamp(%d) = %s, want %s", ns, got, want)
		}
		// Years far outside the int64 nanosecond range, in both directions.
		far := time.Unix(ns, 0)
		if got, want := string(appendTimestamp(nil, far)), far.UTC().Format(timestampLayout); got != want {
			t.Fatalf("appendTimestamp(%d s) = %s, want %s", ns, got, want)
		}
	})
}
