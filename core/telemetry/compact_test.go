package telemetry

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

func float(v float64) *float64 { return &v }

// viaJSON is what ingest decodes from m's JSON entry.
func viaJSON(t testing.TB, m *Message) (Message, error) {
	t.Helper()
	data, err := m.AppendEntryJSON(nil)
	if err != nil {
		return Message{}, err
	}
	return DecodeMessage(data)
}

func TestCompactEntryMatchesJSON(t *testing.T) {
	at := time.Date(2026, 11, 22, 10, 0, 0, 123456789, time.UTC)
	paris := time.FixedZone("CET", 3600)
	tests := []struct {
		name string
		m    Message
	}{
		{"minimal", Message{AgentUUID: agent, DeviceName: "plc1", Readings: []Reading{{Name: "t"}}}},
		{"full", Message{AgentUUID: agent, DeviceName: "plc1", Protocol: "modbus", MsgID: "v2_Ab12Cd34_7", Timestamp: TimestampOf(at),
			Readings: []Reading{
				{Name: "a", Value: float(21.5), Unit: "C", Quality: "GOOD", Timestamp: TimestampOf(at)},
				{Name: "b", Value: float(math.Copysign(0, -1)), Unit: "C", Quality: "GOOD", Timestamp: TimestampOf(at.Add(time.Millisecond))},
				{Name: "c", Unit: "bar", Quality: "BAD", AnomalyScore: float(0.75)},
				{Name: "d", Value: float(math.MaxFloat64), Quality: "BAD", Timestamp: TimestampOf(at.Add(300 * time.Microsecond))},
				{Name: "é ✓", Value: float(1e-300), Unit: "C"},
			}}},
		{"reading times without a message time", Message{AgentUUID: "x", DeviceName: "d", Readings: []Reading{
			{Name: "a", Timestamp: TimestampOf(at.In(paris))}, {Name: "b", Timestamp: TimestampOf(time.UnixMilli(-1))}}}},
		{"years at the bounds", Message{AgentUUID: "x", DeviceName: "d", Timestamp: TimestampOf(time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC)),
			Readings: []Reading{{Name: "a", Timestamp: TimestampOf(time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC))}}}},
		{"unit and quality that come back", Message{AgentUUID: "x", DeviceName: "d", Readings: []Reading{
			{Name: "a", Unit: "C", Quality: "q"}, {Name: "b"}, {Name: "c", Unit: "C", Quality: "q"}, {Name: "d", Unit: "C"}, {Name: "e", Quality: "q"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data, ok := tt.m.AppendCompactEntry([]byte("keep"))
			if !ok || string(data[:4]) != "keep" || !IsCompact(string(data[4:])) {
				t.Fatalf("AppendCompactEntry = %q, %v", data, ok)
			}
			want, err := viaJSON(t, &tt.m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := DecodeMessage(data[4:])
			if err != nil {
				t.Fatalf("DecodeMessage: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("compact %#v\njson    %#v", got, want)
			}
			lent, err := dirtyArena(t).Decode(string(data[4:]))
			if err != nil || !reflect.DeepEqual(lent, want) {
				t.Fatalf("arena: %v\n%#v", err, lent)
			}
			if jsonData, _ := tt.m.AppendEntryJSON(nil); len(data)-4 >= len(jsonData) {
				t.Errorf("compact entry of %d bytes, JSON %d", len(data)-4, len(jsonData))
			}
		})
	}
}

// TestCompactEntryDeclines: what only the JSON form can write is left to it.
func TestCompactEntryDeclines(t *testing.T) {
	ok := Reading{Name: "a", Value: float(1)}
	tests := []struct {
		name string
		m    Message
	}{
		{"no readings", Message{AgentUUID: agent, DeviceName: "d"}},
		{"empty readings", Message{AgentUUID: agent, DeviceName: "d", Readings: []Reading{}}},
		{"invalid UTF-8 device", Message{AgentUUID: agent, DeviceName: "d\xff", Readings: []Reading{ok}}},
		{"invalid UTF-8 unit", Message{AgentUUID: agent, DeviceName: "d", Readings: []Reading{ok, {Name: "b", Unit: "\xfe"}}}},
		{"NaN value", Message{AgentUUID: agent, DeviceName: "d", Readings: []Reading{{Name: "a", Value: float(math.NaN())}}}},
		{"infinite score", Message{AgentUUID: agent, DeviceName: "d", Readings: []Reading{{Name: "a", AnomalyScore: float(math.Inf(1))}}}},
		{"year 10000", Message{AgentUUID: agent, DeviceName: "d", Timestamp: TimestampOf(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)), Readings: []Reading{ok}}},
		{"reading before year 0", Message{AgentUUID: agent, DeviceName: "d", Readings: []Reading{{Name: "a", Timestamp: TimestampOf(time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC))}}}},
	}
	for _, tt := range tests {
		if data, ok := tt.m.AppendCompactEntry([]byte("x")); ok || string(data) != "x" {
			t.Errorf("%s: AppendCompactEntry = %q, %v; want the input back and false", tt.name, data, ok)
		}
	}
}

func TestDecodeCompactRefuses(t *testing.T) {
	m := Message{AgentUUID: agent, DeviceName: "d", Timestamp: TimestampOf(time.UnixMilli(1763805600000)),
		Readings: []Reading{{Name: "a", Value: float(1), Unit: "C", Quality: "GOOD"}, {Name: "b", Unit: "C", Quality: "GOOD"}}}
	good, ok := m.AppendCompactEntry(nil)
	if !ok {
		t.Fatal("declined")
	}
	if _, err := DecodeMessage(good); err != nil {
		t.Fatal(err)
	}
	// Offsets in good: prefix 2, agent 1+36, device 1+1, protocol 1, msgId 1,
	// time flag 1 + varint, count 1, then the first reading's flags.
	first := len(CompactPrefix) + 37 + 2 + 1 + 1
	first += 1 + len(varint(1763805600000)) + 1
	nan := append([]byte(nil), good...)
	copy(nan[first+3:], []byte{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}) // the value's 8 bytes after flags and name "a"
	tests := []struct {
		name string
		data string
	}{
		{"prefix only", CompactPrefix},
		{"NUL alone", "\x00"},
		{"unknown version", "\x00\x02" + string(good[2:])},
		{"truncated", string(good[:len(good)-1])},
		{"trailing byte", string(good) + "\x00"},
		{"unknown reading flag", string(good[:first]) + "\x80" + string(good[first+1:])},
		{"same unit on the first reading", string(good[:first]) + string(rune(good[first]|cfSameUnit)) + string(good[first+1:])},
		{"NaN value", string(nan)},
		{"no readings", string(good[:first-1]) + "\x00"},
		{"reading count beyond the data", string(good[:first-1]) + "\x7f" + string(good[first:])},
		{"invalid UTF-8", strings.Replace(string(good), agent, "\xff"+agent[1:], 1)},
		{"unknown timestamp flag", string(good[:first-2-len(varint(1763805600000))]) + "\x02" + string(good[first-1-len(varint(1763805600000)):])},
	}
	for _, tt := range tests {
		_, err := DecodeMessage([]byte(tt.data))
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: DecodeMessage(%q) = %v, want ErrInvalid", tt.name, tt.data, err)
		}
		if _, err := NewReadingArena(8).Decode(tt.data); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: arena Decode = %v, want ErrInvalid", tt.name, err)
		}
	}
}

func varint(v int64) []byte {
	m := Message{Timestamp: TimestampOf(time.UnixMilli(v)), Readings: []Reading{{}}}
	b, _ := m.AppendCompactEntry(nil)
	// prefix, four empty strings, time flag, then the varint, then count 1,
	// flags 0, empty name.
	return b[len(CompactPrefix)+4+1 : len(b)-3]
}

// FuzzCompactMatchesJSON: a message decoded from its compact entry is the
// message decoded from its JSON entry, and the compact form is declined
// only for what it cannot hold.
func FuzzCompactMatchesJSON(f *testing.F) {
	f.Add("plc1", "temp", "C", "GOOD", 21.5, int64(1763805600123), uint16(0xfff))
	f.Add("<dev>&\"\\\n\t\x01\x7f", "t\u2028\u2029", "", "BAD", 1e21, int64(-62135596800000), uint16(0))
	f.Add("d", "m\xff", "u", "q", 1e-7, int64(253402300799999), uint16(0x35))
	f.Add("d", "m", "u", "q", math.NaN(), int64(0), uint16(0xf0f))
	f.Add("d", "m", "", "", math.Copysign(0, -1), int64(1), uint16(0x2a3))
	f.Fuzz(func(t *testing.T, device, metric, unit, quality string, value float64, ms int64, flags uint16) {
		m := Message{AgentUUID: agent, DeviceName: device}
		if flags&1 != 0 {
			m.Protocol = unit + quality
		}
		if flags&2 != 0 {
			m.Timestamp = TimestampOf(time.UnixMilli(ms).Add(time.Duration(flags>>12) * 77 * time.Microsecond))
		}
		if flags&4 != 0 {
			m.MsgID = metric
		}
		for i := range int(flags >> 4 & 0x3f) {
			r := Reading{Name: fmt.Sprint(metric, i)}
			if i%3 != 2 {
				r.Unit = unit
			}
			if i%5 != 1 {
				r.Quality = quality
			}
			if i%2 == 0 {
				r.Value = float(value * float64(i+1))
			}
			if i%4 == 3 {
				r.AnomalyScore = float(value / float64(i))
			}
			switch i % 3 {
			case 1:
				r.Timestamp = TimestampOf(time.UnixMilli(ms + int64(i)*int64(flags&8)))
			case 2:
				r.Timestamp = m.Timestamp
				if i%4 == 1 {
					r.Timestamp = TimestampOf(time.UnixMilli(ms).Add(time.Duration(i) * time.Microsecond))
				}
			}
			m.Readings = append(m.Readings, r)
		}
		data, ok := m.AppendCompactEntry(nil)
		want, werr := viaJSON(t, &m)
		if !ok {
			// Declined: then the JSON entry either fails too, carries a
			// year outside 0..9999, repairs invalid UTF-8, or has no
			// readings.
			if werr == nil && len(m.Readings) > 0 && allValid(&m) && inYears(&m) {
				t.Fatalf("declined %#v, whose JSON entry decodes", m)
			}
			return
		}
		if werr != nil {
			t.Fatalf("compact form took what the JSON form refuses (%v): %#v", werr, m)
		}
		got, err := DecodeMessage(data)
		if err != nil {
			t.Fatalf("compact entry does not decode: %v\n%q", err, data)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("compact %#v\njson    %#v", got, want)
		}
	})
}

func allValid(m *Message) bool {
	s := []string{m.AgentUUID, m.DeviceName, m.Protocol, m.MsgID}
	for _, r := range m.Readings {
		s = append(s, r.Name, r.Unit, r.Quality)
	}
	for _, x := range s {
		if strings.ToValidUTF8(x, "\uFFFD") != x {
			return false
		}
	}
	return true
}

func inYears(m *Message) bool {
	ok := func(ts *Timestamp) bool { return ts == nil || (ts.UTC().Year() >= 0 && ts.UTC().Year() <= 9999) }
	for _, r := range m.Readings {
		if !ok(r.Timestamp) {
			return false
		}
	}
	return ok(m.Timestamp)
}

// FuzzDecodeCompact: any compact entry decodes without panicking, through
// an arena as without, to a message whose compact entry decodes back to
// the same rows; a message that validates gives one row per reading.
func FuzzDecodeCompact(f *testing.F) {
	m := Message{AgentUUID: agent, DeviceName: "plc1", Protocol: "modbus", MsgID: "v2_a_1", Timestamp: TimestampOf(time.UnixMilli(1763805600000)),
		Readings: []Reading{{Name: "a", Value: float(1), Unit: "C", Quality: "GOOD", AnomalyScore: float(0.5)},
			{Name: "b", Unit: "C", Quality: "GOOD", Timestamp: TimestampOf(time.UnixMilli(1))}, {Name: "c", Quality: "BAD"}}}
	good, _ := m.AppendCompactEntry(nil)
	f.Add(good)
	f.Add([]byte(CompactPrefix))
	f.Add([]byte("\x00\x01\x00\x00\x00\x00\x00\x01\x00\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if !IsCompact(string(data)) {
			data = append([]byte(CompactPrefix), data...)
		}
		got, err := DecodeMessage(data)
		lent, aerr := dirtyArena(t).Decode(string(data))
		if (err == nil) != (aerr == nil) || !reflect.DeepEqual(got, lent) {
			t.Fatalf("%q: DecodeMessage %v, arena %v\n%#v\n%#v", data, err, aerr, got, lent)
		}
		if err != nil {
			return
		}
		again, ok := got.AppendCompactEntry(nil)
		if !ok {
			t.Fatalf("%q: decoded %#v, which the compact form declines", data, got)
		}
		// A reading timed at the message's millisecond may come back
		// without a time of its own, as through the JSON form: the rows
		// are the same.
		back, err := DecodeMessage(again)
		at := time.Unix(0, 0)
		if err != nil || !reflect.DeepEqual(back.Rows("t", at, nil), got.Rows("t", at, nil)) {
			t.Fatalf("%q: round trip %v\n%#v\n%#v", data, err, got, back)
		}
		if got.Validate() == nil {
			if rows := got.Rows("t", time.Unix(0, 0), nil); len(rows) != len(got.Readings) {
				t.Fatalf("%d rows for %d readings", len(rows), len(got.Readings))
			}
		}
	})
}
