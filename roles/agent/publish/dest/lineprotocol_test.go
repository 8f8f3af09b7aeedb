package dest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

var lpTime = time.Date(2026, 3, 1, 12, 0, 0, 123_456_789, time.UTC)

func TestLineProtocolGolden(t *testing.T) {
	at := lpTime
	b := batch.Batch{Endpoint: "line 1,hall=A", Messages: []batch.Message{
		{Received: at.Add(time.Second), Readings: []adapters.Reading{
			{DeviceName: "plc-1", DeviceID: "7", Metric: "temp", Value: 21.5, Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "count", Value: int64(42), Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "running", Value: true, Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "mode", Value: `auto "fast"\x`, Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "big", Value: uint64(math.MaxUint64), Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "f32", Value: float32(0.1), Quality: adapters.Good, Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "pressure", Value: nil, Quality: adapters.Bad, QualityCode: "TIMEOUT", Timestamp: at},
			{DeviceName: "plc-1", DeviceID: "7", Metric: "nan", Value: math.NaN(), Quality: adapters.Good, Timestamp: at},
		}},
		{Readings: []adapters.Reading{
			{DeviceName: "dev a=b", Metric: "a,b c=d", Value: json.Number("3"), Timestamp: at.Add(-time.Second)},
			{DeviceName: "dev a=b", Metric: "time", Value: 1, Timestamp: at.Add(-time.Second)},
			{DeviceName: "dev a=b", Metric: `back\slash`, Value: map[string]int{"x": 1}, Timestamp: at.Add(-time.Second)},
		}},
		{Received: at.Add(time.Minute), Readings: []adapters.Reading{
			{Metric: "temp", Value: -1e21, Quality: adapters.Good},
			{Metric: "temp", Value: 3.0, Quality: adapters.Good}, // the later one wins
			{Metric: "", Value: "multi\nline", Quality: adapters.Good},
		}},
	}}
	golden(t, "lineprotocol.golden", LineProtocol(b))
}

func TestLineProtocolEmpty(t *testing.T) {
	tests := []struct {
		name string
		b    batch.Batch
	}{
		{"no messages", batch.Batch{Endpoint: "e"}},
		{"only bad readings", batch.Batch{Endpoint: "e", Messages: []batch.Message{{Readings: []adapters.Reading{
			{Metric: "m", Quality: adapters.Bad, QualityCode: "TIMEOUT"}, {Metric: "n"},
		}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LineProtocol(tt.b); len(got) != 0 {
				t.Fatalf("got %q, want nothing", got)
			}
		})
	}
}

// lpPoint is one parsed line.
type lpPoint struct {
	measurement string
	tags        map[string]string
	fields      map[string]string // raw field values, strings unquoted
	ts          string
}

// parseLine is a small line protocol tokenizer, written from the
// InfluxDB reference rather than from LineProtocol, so the fuzz test
// checks the output against the format and not against itself. It
// accepts backslash escapes of ',', ' ' and '=' in names and of '"' and
// '\' in string fields, and nothing unescaped that would split a line.
func parseLine(line string) (lpPoint, error) {
	p := lpPoint{tags: map[string]string{}, fields: map[string]string{}}
	if strings.ContainsAny(line, "\n\r") {
		return p, errors.New("newline inside a line")
	}
	i := 0
	// readName reads up to an unescaped byte of stops.
	readName := func(stops string) (string, error) {
		var b strings.Builder
		for i < len(line) {
			c := line[i]
			if c == '\\' && i+1 < len(line) && strings.IndexByte(",= ", line[i+1]) >= 0 {
				b.WriteByte(line[i+1])
				i += 2
				continue
			}
			if c == '\\' {
				return "", fmt.Errorf("unescapable backslash at %d", i)
			}
			if strings.IndexByte(stops, c) >= 0 {
				break
			}
			b.WriteByte(c)
			i++
		}
		return b.String(), nil
	}
	var err error
	if p.measurement, err = readName(", "); err != nil || p.measurement == "" {
		return p, fmt.Errorf("measurement: %q %v", p.measurement, err)
	}
	for i < len(line) && line[i] == ',' {
		i++
		k, err := readName("=, ")
		if err != nil || k == "" || i >= len(line) || line[i] != '=' {
			return p, fmt.Errorf("tag key at %d: %v", i, err)
		}
		i++
		v, err := readName(", =")
		if err != nil || v == "" {
			return p, fmt.Errorf("tag value at %d: %v", i, err)
		}
		p.tags[k] = v
	}
	if i >= len(line) || line[i] != ' ' {
		return p, fmt.Errorf("no field set at %d", i)
	}
	for {
		i++
		k, err := readName("=, ")
		if err != nil || k == "" || i >= len(line) || line[i] != '=' {
			return p, fmt.Errorf("field key at %d: %v", i, err)
		}
		i++
		var v string
		if i < len(line) && line[i] == '"' {
			i++
			var b strings.Builder
			for {
				if i >= len(line) {
					return p, errors.New("unterminated string")
				}
				c := line[i]
				if c == '\\' && i+1 < len(line) && (line[i+1] == '"' || line[i+1] == '\\') {
					b.WriteByte(line[i+1])
					i += 2
					continue
				}
				if c == '"' {
					i++
					break
				}
				if c == '\\' {
					return p, errors.New("lone backslash in a string")
				}
				b.WriteByte(c)
				i++
			}
			v = "string:" + b.String()
		} else {
			start := i
			for i < len(line) && line[i] != ',' && line[i] != ' ' {
				i++
			}
			v = line[start:i]
			if err := checkNumberOrBool(v); err != nil {
				return p, fmt.Errorf("field %q: %w", k, err)
			}
		}
		if _, dup := p.fields[k]; dup {
			return p, fmt.Errorf("field %q twice", k)
		}
		p.fields[k] = v
		if i >= len(line) || line[i] != ',' {
			break
		}
	}
	if i < len(line) {
		if line[i] != ' ' {
			return p, fmt.Errorf("junk at %d", i)
		}
		p.ts = line[i+1:]
		if _, err := fmt.Sscanf(p.ts, "%d", new(int64)); err != nil || strings.ContainsAny(p.ts, " +") {
			return p, fmt.Errorf("timestamp %q", p.ts)
		}
	}
	return p, nil
}

func checkNumberOrBool(v string) error {
	switch v {
	case "true", "false":
		return nil
	}
	var err error
	switch {
	case strings.HasSuffix(v, "i"):
		_, err = fmt.Sscanf(strings.TrimSuffix(v, "i"), "%d", new(int64))
	case strings.HasSuffix(v, "u"):
		_, err = fmt.Sscanf(strings.TrimSuffix(v, "u"), "%d", new(uint64))
	default:
		var f float64
		_, err = fmt.Sscanf(v, "%g", &f)
		if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
			err = fmt.Errorf("%q is not finite", v)
		}
	}
	return err
}

// FuzzLineProtocol builds batches from arbitrary names and values and
// checks that every line parses and carries the names and string values
// LineProtocol promises (after its documented replacements).
func FuzzLineProtocol(f *testing.F) {
	f.Add("line 1", "plc,1", "id=7", "temp", "x", 21.5, int64(3), uint8(0), int64(1767225600123))
	f.Add("", "", "", "", "", math.NaN(), int64(-1), uint8(1), int64(0))
	f.Add(`a\`, `b\,`, `\ `, "time", "q\"\\\n", math.Inf(1), int64(math.MinInt64), uint8(2), int64(-5))
	f.Add("\xff\xfe", "é ü", "=", "=,", "\r\t", 1e300, int64(math.MaxInt64), uint8(3), int64(1e15))
	f.Fuzz(func(t *testing.T, ep, dev, id, metric, sv string, fv float64, iv int64, pick uint8, ms int64) {
		var v any
		switch pick % 5 {
		case 0:
			v = fv
		case 1:
			v = iv
		case 2:
			v = sv
		case 3:
			v = iv%2 == 0
		case 4:
			v = uint64(iv) + math.MaxInt64
		}
		at := time.UnixMilli(ms % (1 << 44))
		b := batch.Batch{Endpoint: ep, Messages: []batch.Message{{Readings: []adapters.Reading{
			{DeviceName: dev, DeviceID: id, Metric: metric, Value: v, Quality: adapters.Good, Timestamp: at},
			{DeviceName: dev, DeviceID: id, Metric: metric + "2", Value: sv, Quality: adapters.Good, Timestamp: at},
			{DeviceName: dev, Metric: metric, Value: nil, Quality: adapters.Bad, Timestamp: at},
		}}}}
		out := string(LineProtocol(b))
		if at.Before(time.Unix(0, math.MinInt64)) || at.After(time.Unix(0, math.MaxInt64)) {
			if out != "" {
				t.Fatalf("a time line protocol cannot carry (%s) was written: %q", at, out)
			}
			return
		}
		if out != "" && !strings.HasSuffix(out, "\n") {
			t.Fatalf("output does not end with a newline: %q", out)
		}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 1 {
			t.Fatalf("want one line, got %d: %q", len(lines), out)
		}
		p, err := parseLine(lines[0])
		if err != nil {
			t.Fatalf("line %q does not parse: %v", lines[0], err)
		}
		wantM := name(ep)
		if wantM == "" {
			wantM = DefaultMeasurement
		}
		if p.measurement != wantM {
			t.Errorf("measurement %q, want %q", p.measurement, wantM)
		}
		if got, want := p.tags[TagDevice], name(dev); got != want {
			t.Errorf("device tag %q, want %q", got, want)
		}
		if got, want := p.tags[TagDeviceID], name(id); got != want {
			t.Errorf("device_id tag %q, want %q", got, want)
		}
		if got, want := p.fields[fieldKey(metric+"2")], "string:"+text(sv); got != want {
			t.Errorf("string field %q, want %q", got, want)
		}
		if p.ts != fmt.Sprint(at.UnixMilli()) {
			t.Errorf("timestamp %q, want %d", p.ts, at.UnixMilli())
		}
		if _, ok := p.fields[fieldKey(metric)]; !ok && !(pick%5 == 0 && (math.IsNaN(fv) || math.IsInf(fv, 0))) && fieldKey(metric) != fieldKey(metric+"2") {
			t.Errorf("field %q missing from %q", fieldKey(metric), lines[0])
		}
	})
}
