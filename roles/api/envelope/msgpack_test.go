package envelope

import (
	"fmt"
	"math"
	"reflect"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
)

// both maps payload through the generic path (codec.Decode, Map) and the
// fast path (codec.Unwrap, MapMsgpack). fast reports whether the fast path
// took the payload; when it did, the two results must be equal.
func both(t testing.TB, topic Topic, payload []byte, lim codec.Limits) (generic Batch, genericErr error, fast bool) {
	t.Helper()
	if dec, err := codec.Decode(payload, lim); err != nil {
		genericErr = err
	} else {
		generic, genericErr = Map(topic, dec.Value)
	}
	var fb Batch
	fast = codec.Unwrap(payload, lim, func(b []byte, enc codec.Encoding, lim codec.Limits) bool {
		if enc != codec.EncodingMsgpack {
			return false
		}
		var ok bool
		fb, ok = MapMsgpack(topic, b, lim)
		return ok
	})
	if !fast {
		return generic, genericErr, false
	}
	if genericErr != nil {
		t.Fatalf("fast path accepted a payload the generic path refuses (%v):\n%+v", genericErr, fb)
	}
	if !reflect.DeepEqual(fb, generic) {
		t.Fatalf("fast path mapped\n%s\ngeneric path mapped\n%s", dump(fb), dump(generic))
	}
	return generic, nil, true
}

func dump(b Batch) string {
	s := fmt.Sprintf("msgId=%q\n", b.MsgID)
	for _, m := range b.Messages {
		s += fmt.Sprintf("  %s %s %s ts=%v msgId=%q\n", m.AgentUUID, m.DeviceName, m.Protocol, m.Timestamp, m.MsgID)
		for _, r := range m.Readings {
			v := "nil"
			if r.Value != nil {
				v = fmt.Sprint(*r.Value)
			}
			s += fmt.Sprintf("    %q=%s %q %q ts=%v\n", r.Name, v, r.Unit, r.Quality, r.Timestamp)
		}
	}
	return s
}

func testTopic(t testing.TB) Topic {
	tn, ag := codec.EncodeID(codec.UUID{1}), codec.EncodeID(codec.UUID{2})
	topic, err := ParseTopic("i/" + tn + "/a/" + ag + "/endpoints/modbus/line-1")
	if err != nil {
		t.Fatal(err)
	}
	return topic
}

func reading(dev, metric string, value any, extra ...any) map[string]any {
	r := map[string]any{"deviceName": dev, "metric": metric, "value": value, "unit": "C",
		"quality": "GOOD", "timestamp": "2026-11-22T10:00:00.123Z"}
	for i := 0; i+1 < len(extra); i += 2 {
		if extra[i+1] == nil {
			delete(r, extra[i].(string))
			continue
		}
		r[extra[i].(string)] = extra[i+1]
	}
	return r
}

func env(readings ...any) map[string]any {
	return map[string]any{"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus", "msgId": "v2_Ab12Cd34_7",
		"messages": []any{map[string]any{"readings": readings}}}
}

func TestMapMsgpackAgreesWithMap(t *testing.T) {
	topic := testTopic(t)
	anomaly := map[string]any{"threshold": 90.0, "estimated_seconds": int64(30), "confidence": 0.5}
	tests := []struct {
		name string
		v    map[string]any
		fast bool // the fast path must take it
	}{
		{"one device", env(reading("plc1", "t", 21.5), reading("plc1", "p", int64(3))), true},
		{"devices interleaved", env(reading("a", "t", 1.0), reading("b", "t", 2.0), reading("a", "u", 3.0)), true},
		{"deviceId fallback", env(reading("  ", "t", 1.0, "deviceId", "dev-7")), true},
		{"failed read", env(reading("a", "t", nil, "quality", nil, "qualityCode", "BadTimeout")), true},
		{"booleans and numeric strings", env(reading("a", "on", true), reading("a", "off", false), reading("a", "s", " 4.5 ")), true},
		{"large unsigned", env(reading("a", "u", uint64(math.MaxUint64))), true},
		{"negative", env(reading("a", "n", int64(-40)), reading("a", "f32", float32(1.5))), true},
		{"millisecond timestamps", env(reading("a", "t", 1.0, "timestamp", int64(1763805600123))), true},
		{"float timestamp", env(reading("a", "t", 1.0, "timestamp", 1763805600123.0)), true},
		{"null timestamp", env(reading("a", "t", 1.0, "timestamp", nil)), true},
		{"anomaly enrichment", env(reading("a", "t", 1.0, "anomaly_score", 0.2, "detection_methods", []any{"zscore", "mad"},
			"time_to_threshold", anomaly, "trend", "rising")), true},
		{"integer score", env(reading("a", "t", 1.0, "anomaly_score", int64(1))), true},
		{"text score", env(reading("a", "t", 1.0, "anomaly_score", "high")), true},
		{"boolean score", env(reading("a", "t", 1.0, "anomaly_score", true)), true},
		{"no protocol", map[string]any{"msgId": "v2_Ab12Cd34_8", "messages": []any{map[string]any{"readings": []any{reading("a", "t", 1.0)}}}}, true},
		{"no msgId", map[string]any{"protocol": "opcua", "messages": []any{map[string]any{"readings": []any{reading("a", "t", 1.0)}}}}, true},
		{"extra envelope keys", map[string]any{"endpoint": "x", "seq": int64(4), "messages": []any{map[string]any{"endpoint": "e",
			"readings": []any{reading("a", "t", 1.0)}}}}, true},
		{"non-string unit", env(reading("a", "t", 1.0, "unit", int64(5))), true},

		{"no readings", env(), false},
		{"bad msgId", map[string]any{"msgId": "nope", "messages": []any{map[string]any{"readings": []any{reading("a", "t", 1.0)}}}}, false},
		{"no messages", map[string]any{"msgId": "v2_Ab12Cd34_7"}, false},
		{"no device", env(reading("", "t", 1.0)), false},
		{"no metric", env(reading("a", " ", 1.0)), false},
		{"value not a number", env(reading("a", "t", "warm")), false},
		{"value an object", env(reading("a", "t", map[string]any{"x": 1.0})), false},
		{"bad timestamp", env(reading("a", "t", 1.0, "timestamp", "yesterday")), false},
		{"null envelope timestamp", map[string]any{"timestamp": nil, "messages": []any{map[string]any{"readings": []any{reading("a", "t", 1.0)}}}}, false},
	}
	for _, tt := range tests {
		for _, format := range []codec.Format{codec.FormatMsgpack, codec.FormatMsgpackDeflate, codec.FormatJSON} {
			t.Run(tt.name+"/"+string(format), func(t *testing.T) {
				payload, err := codec.Encode(tt.v, codec.EncodeOptions{Format: format})
				if err != nil {
					t.Fatal(err)
				}
				_, gerr, fast := both(t, topic, payload, codec.Limits{})
				want := tt.fast && format != codec.FormatJSON
				if fast != want {
					t.Fatalf("fast path took it: %v, want %v (generic error: %v)", fast, want, gerr)
				}
				if tt.fast && gerr != nil {
					t.Fatalf("generic path refused it: %v", gerr)
				}
			})
		}
	}
}

// TestMapMsgpackDeclines covers what the fast path leaves to the generic
// decoder, which then accepts or refuses it with its own error.
func TestMapMsgpackDeclines(t *testing.T) {
	topic := testTopic(t)
	good := env(reading("a", "t", 1.0))
	compacted, err := codec.Encode(good, codec.EncodeOptions{Format: codec.FormatMsgpack, Compact: true})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := codec.Encode(good, codec.EncodeOptions{Format: codec.FormatMsgpackDeflate, RawDeflate: true})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := codec.Encode(good, codec.EncodeOptions{Format: codec.FormatMsgpack})
	if err != nil {
		t.Fatal(err)
	}
	// {"messages": [{"readings": [R]}], "messages": ...} and a reading
	// with its metric twice, written by hand: encoders never repeat a key.
	rd := mp(map1(7), str("deviceName"), str("a"), str("metric"), str("t"), str("value"), []byte{0x01},
		str("unit"), str("C"), str("quality"), str("GOOD"), str("timestamp"), str("2026-11-22T10:00:00Z"), str("metric"), str("u"))
	msgs := mp([]byte{0x91}, map1(1), str("readings"), []byte{0x91}, rd)
	dupReading := mp(map1(1), str("messages"), msgs)
	okReading := mp(map1(1), str("messages"), mp([]byte{0x91}, map1(1), str("readings"), []byte{0x91},
		mp(map1(3), str("deviceName"), str("a"), str("metric"), str("t"), str("value"), []byte{0x01})))
	dupTop := mp(map1(2), str("messages"), okReading[1+len(str("messages")):], str("messages"), okReading[1+len(str("messages")):])
	badUTF8 := mp(map1(1), str("messages"), mp([]byte{0x91}, map1(1), str("readings"), []byte{0x91},
		mp(map1(2), str("deviceName"), []byte{0xa2, 0xff, 0xfe}, str("metric"), str("t"))))
	ext := mp(map1(2), str("x"), []byte{0xd4, 0x05, 0x00}, str("messages"), okReading[1+len(str("messages")):])
	trailing := mp(okReading, []byte{0xc0})

	tests := []struct {
		name    string
		payload []byte
		lim     codec.Limits
		valid   bool // the generic path accepts it
	}{
		{"compacted", compacted, codec.Limits{}, true},
		{"raw deflate", raw, codec.Limits{}, true},
		{"depth limit", plain, codec.Limits{MaxDepth: 4}, false},
		{"values limit", plain, codec.Limits{MaxValues: 10}, false},
		{"container limit", plain, codec.Limits{MaxContainerLen: 3}, false},
		{"duplicate reading key", dupReading, codec.Limits{}, false},
		{"duplicate envelope key", dupTop, codec.Limits{}, false},
		{"invalid UTF-8 device", badUTF8, codec.Limits{}, true},
		{"extension", ext, codec.Limits{}, false},
		{"trailing bytes", trailing, codec.Limits{}, false},
		{"truncated", plain[:len(plain)-3], codec.Limits{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, gerr, fast := both(t, topic, tt.payload, tt.lim)
			if fast {
				t.Fatal("fast path took it")
			}
			if (gerr == nil) != tt.valid {
				t.Fatalf("generic path error %v, want valid=%v", gerr, tt.valid)
			}
		})
	}
	if _, _, fast := both(t, topic, okReading, codec.Limits{}); !fast {
		t.Fatal("the hand-written control payload was declined")
	}
}

func mp(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func map1(n int) []byte { return []byte{0x80 | byte(n)} }

func str(s string) []byte { return append([]byte{0xa0 | byte(len(s))}, s...) }

// FuzzMapMsgpack holds the fast path to the generic one: whatever it takes
// must decode and map without error through codec.Decode and Map, to an
// equal Batch.
func FuzzMapMsgpack(f *testing.F) {
	topic := testTopic(f)
	for _, v := range []map[string]any{
		env(reading("plc1", "t", 21.5), reading("plc2", "p", int64(3)), reading("plc1", "b", true)),
		env(reading("a", "t", nil, "quality", nil), reading("a", "s", "4.5", "timestamp", int64(1763805600123))),
		env(reading("a", "t", 1.0, "time_to_threshold", map[string]any{"threshold": 1.0}, "detection_methods", []any{"mad"})),
	} {
		for _, format := range []codec.Format{codec.FormatMsgpack, codec.FormatMsgpackDeflate} {
			payload, err := codec.Encode(v, codec.EncodeOptions{Format: format})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(payload, uint8(0))
		}
	}
	f.Fuzz(func(t *testing.T, payload []byte, limits uint8) {
		var lim codec.Limits
		if limits&1 != 0 {
			lim.MaxDepth = int(limits>>1&7) + 1
		}
		if limits&16 != 0 {
			lim.MaxValues = int(limits >> 5 * 8)
			lim.MaxContainerLen = int(limits>>5) + 1
		}
		both(t, topic, payload, lim)
	})
}
