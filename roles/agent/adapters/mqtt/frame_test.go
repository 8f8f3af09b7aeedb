package mqtt

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

var received = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// r is a compact expected reading: device, metric, value, quality code
// ("" for GOOD), unit and time (received when zero).
type r struct {
	dev, metric string
	value       any
	code        string
	unit        string
	at          time.Time
}

func (w r) reading() adapters.Reading {
	at := w.at
	if at.IsZero() {
		at = received
	}
	q := adapters.Good
	if w.code != "" {
		q = adapters.Bad
	}
	return adapters.Reading{DeviceName: w.dev, DeviceID: "uuid-1", Metric: w.metric, Value: w.value,
		Unit: w.unit, Timestamp: at, Quality: q, QualityCode: w.code}
}

func TestFrameReadings(t *testing.T) {
	scale := 0.1
	dps := []adapters.DataPoint{
		{Name: "temperature", Register: "sensors.temp", Scale: &scale, Unit: "°C"},
		{Name: "running", Register: "state.on", Type: "bool"},
		{Name: "mode", Register: "mode", Type: "string"},
	}
	at := time.Date(2026, 2, 3, 4, 5, 6, 0, time.UTC)
	tests := []struct {
		name    string
		dps     []adapters.DataPoint
		frame   string
		want    [][]r
		invalid int
	}{
		{name: "top-level scalars", frame: `{"temp":21.5,"count":7,"on":true,"label":"a","nested":{"x":1},"list":[1],"none":null}`,
			want: [][]r{{{"line-1", "count", int64(7), "", "", time.Time{}}, {"line-1", "label", "a", "", "", time.Time{}},
				{"line-1", "on", true, "", "", time.Time{}}, {"line-1", "temp", 21.5, "", "", time.Time{}}}}},
		{name: "device name and ms timestamp", frame: `{"deviceName":"press-7","timestamp":1770091506000,"v":-3}`,
			want: [][]r{{{"press-7", "v", int64(-3), "", "", at}}}},
		{name: "RFC 3339 timestamp", frame: `{"timestamp":"2026-02-03T05:05:06+01:00","v":1e2}`,
			want: [][]r{{{"line-1", "v", 100.0, "", "", at}}}},
		{name: "bad timestamp keeps receive time", frame: `{"timestamp":"yesterday","v":1}`,
			want: [][]r{{{"line-1", "v", int64(1), "", "", time.Time{}}}}},
		{name: "big integer becomes float", frame: `{"v":123456789012345678901234}`,
			want: [][]r{{{"line-1", "v", 1.2345678901234568e23, "", "", time.Time{}}}}},
		{name: "data points", dps: dps, frame: `{"sensors":{"temp":215},"state":{"on":false},"mode":"auto","other":1}`,
			want: [][]r{{{"line-1", "temperature", 21.5, "", "°C", time.Time{}}, {"line-1", "running", false, "", "", time.Time{}},
				{"line-1", "mode", "auto", "", "", time.Time{}}}}},
		{name: "data points missing and mistyped", dps: dps, frame: `{"deviceName":"d2","sensors":{"temp":"hot"},"state":{"on":1}}`,
			want: [][]r{{{"d2", "temperature", nil, "BAD_DATA", "°C", time.Time{}}, {"d2", "running", nil, "BAD_DATA", "", time.Time{}},
				{"d2", "mode", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "data point on object is bad", dps: dps[:1], frame: `{"sensors":{"temp":{"v":1}}}`,
			want: [][]r{{{"line-1", "temperature", nil, "BAD_DATA", "°C", time.Time{}}}}},
		{name: "dotted key and array index", dps: []adapters.DataPoint{{Name: "a", Register: "a.b"}, {Name: "c", Register: "list.1.v"}},
			frame: `{"a.b":1,"list":[{"v":2},{"v":3}]}`,
			want:  [][]r{{{"line-1", "a", int64(1), "", "", time.Time{}}, {"line-1", "c", int64(3), "", "", time.Time{}}}}},
		{name: "array of objects", frame: `[{"deviceName":"a","v":1},{"deviceName":"b","v":2}]`,
			want: [][]r{{{"a", "v", int64(1), "", "", time.Time{}}}, {{"b", "v", int64(2), "", "", time.Time{}}}}},
		{name: "array with a non-object", frame: `[{"v":1},3]`, invalid: 1,
			want: [][]r{{{"line-1", "v", int64(1), "", "", time.Time{}}}, {{"line-1", "frame", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "empty array", frame: `[]`},
		{name: "not JSON", frame: `temp=21`, invalid: 1, want: [][]r{{{"line-1", "frame", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "scalar", frame: `42`, invalid: 1, want: [][]r{{{"line-1", "frame", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "two objects without delimiter", frame: `{"a":1}{"b":2}`, invalid: 1, want: [][]r{{{"line-1", "frame", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "truncated", frame: `{"a":`, invalid: 1, want: [][]r{{{"line-1", "frame", nil, "BAD_DATA", "", time.Time{}}}}},
		{name: "surrounding white space", frame: " \t{\"a\":true}\r", want: [][]r{{{"line-1", "a", true, "", "", time.Time{}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &frameDecoder{device: "line-1", deviceID: "uuid-1", dataPoints: tt.dps}
			got := d.decode([]byte(tt.frame), received)
			var want [][]adapters.Reading
			for _, msg := range tt.want {
				var rs []adapters.Reading
				for _, w := range msg {
					rs = append(rs, w.reading())
				}
				want = append(want, rs)
			}
			if !reflect.DeepEqual(got.messages, want) {
				t.Fatalf("readings\n got %s\nwant %s", dump(got.messages), dump(want))
			}
			if got.invalid != tt.invalid {
				t.Fatalf("invalid %d, want %d", got.invalid, tt.invalid)
			}
		})
	}
}

func dump(v [][]adapters.Reading) string {
	s := ""
	for _, m := range v {
		s += "["
		for _, r := range m {
			s += fmt.Sprintf("{%s %s %#v %s %s %s %s} ", r.DeviceName, r.Metric, r.Value, r.Quality, r.QualityCode, r.Unit, r.Timestamp.Format(time.RFC3339Nano))
		}
		s += "] "
	}
	return s
}

// FuzzFrameReadings decodes arbitrary frames with and without data points:
// it never panics, every reading is either GOOD with a number, boolean or
// string, or BAD with no value and BAD_DATA, and a JSON object is never
// counted invalid.
func FuzzFrameReadings(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[{"a":1},2]`, `{"deviceName":"x","timestamp":1e300,"v":1e308}`,
		`{"sensors":{"temp":[1,2]}}`, `{"timestamp":"2026-01-01T00:00:00Z","s":"x"}`, `nul`, `{"a":1}x`, `"str"`} {
		f.Add([]byte(s))
	}
	scale := 1e300
	dps := []adapters.DataPoint{{Name: "t", Register: "sensors.temp", Scale: &scale}, {Name: "a", Register: "a", Type: "int"},
		{Name: "i", Register: "list.0"}, {Name: "s", Register: "s", Type: "string"}}
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, withDPs := range []bool{false, true} {
			d := &frameDecoder{device: "dev", deviceID: "id"}
			if withDPs {
				d.dataPoints = dps
			}
			got := d.decode(frame, received)
			var obj map[string]any
			if json.Unmarshal(frame, &obj) == nil && obj != nil && got.invalid != 0 {
				t.Fatalf("object frame %q counted invalid", frame)
			}
			for _, msg := range got.messages {
				for _, r := range msg {
					checkReading(t, frame, r)
				}
			}
			if withDPs {
				for _, msg := range got.messages {
					if len(msg) != len(dps) && !(len(msg) == 1 && msg[0].Metric == MetricFrame) {
						t.Fatalf("%q: %d readings for %d data points", frame, len(msg), len(dps))
					}
				}
			}
		}
	})
}

func checkReading(t *testing.T, frame []byte, r adapters.Reading) {
	t.Helper()
	switch r.Quality {
	case adapters.Good:
		switch v := r.Value.(type) {
		case int64, bool, string:
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				t.Fatalf("%q: non-finite value %v", frame, v)
			}
		default:
			t.Fatalf("%q: GOOD reading %s with value %T", frame, r.Metric, r.Value)
		}
		if r.QualityCode != "" {
			t.Fatalf("%q: GOOD reading with code %s", frame, r.QualityCode)
		}
	case adapters.Bad:
		if r.Value != nil || r.QualityCode != adapters.CodeBadData {
			t.Fatalf("%q: BAD reading %+v", frame, r)
		}
	default:
		t.Fatalf("%q: quality %q", frame, r.Quality)
	}
	if r.Timestamp.IsZero() || r.DeviceName == "" {
		t.Fatalf("%q: reading without time or device: %+v", frame, r)
	}
}
