package dest

import (
	"bytes"
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// DefaultMeasurement is the measurement of a batch without an endpoint
// name: line protocol has no empty measurement.
const DefaultMeasurement = "edgeplat"

// Tag keys LineProtocol writes.
const (
	TagDevice   = "device"
	TagDeviceID = "device_id"
)

// LineProtocol renders a batch as InfluxDB line protocol with millisecond
// timestamps (write with precision=ms). The measurement is the batch's
// endpoint name; the tags are device (the reading's device name) and
// device_id, each only when set; each (device, device id, millisecond)
// makes one line with a field per metric. Lines are sorted by time, then
// device; fields by name; so the output is deterministic.
//
// Only GOOD readings are written: line protocol has no null, and a failed
// read carries no value. Readings whose value line protocol cannot carry
// (NaN, infinities) are skipped as well; a composite value is written as
// its JSON text. Integers that fit int64 get the "i" suffix, larger
// unsigned ones "u". When one line receives a metric twice, the later
// reading wins, as the database would keep it.
//
// Line protocol cannot carry every string: newlines, carriage returns and
// tabs become spaces, invalid UTF-8 becomes U+FFFD, and in names (the
// measurement, tag keys and values, field keys) backslashes become '/',
// because line protocol cannot escape a backslash there. A field named
// "time", which InfluxDB refuses, is written as "time_". An empty metric
// name is written as "value".
func LineProtocol(b batch.Batch) []byte {
	type key struct {
		dev, id string
		ms      int64
		hasTime bool
	}
	points := map[key]map[string][]byte{}
	var order []key
	for _, m := range b.Messages {
		for _, r := range m.Readings {
			if quality(r) != adapters.Good {
				continue
			}
			v, ok := fieldValue(r.Value)
			if !ok {
				continue
			}
			k := key{dev: name(r.DeviceName), id: name(r.DeviceID)}
			if at := readingTime(r, m); !at.IsZero() {
				k.ms, k.hasTime = at.UnixMilli(), true
			}
			fs, seen := points[k]
			if !seen {
				fs = map[string][]byte{}
				points[k] = fs
				order = append(order, k)
			}
			fs[fieldKey(r.Metric)] = v
		}
	}
	slices.SortFunc(order, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.dev, b.dev), cmp.Compare(a.id, b.id), boolCmp(a.hasTime, b.hasTime))
	})

	measurement := name(b.Endpoint)
	if measurement == "" {
		measurement = DefaultMeasurement
	}
	var out bytes.Buffer
	for _, k := range order {
		out.WriteString(escape(measurement, ", "))
		if k.dev != "" {
			out.WriteString("," + TagDevice + "=" + escape(k.dev, ",= "))
		}
		if k.id != "" {
			out.WriteString("," + TagDeviceID + "=" + escape(k.id, ",= "))
		}
		fs := points[k]
		names := make([]string, 0, len(fs))
		for n := range fs {
			names = append(names, n)
		}
		slices.Sort(names)
		for i, n := range names {
			if i == 0 {
				out.WriteByte(' ')
			} else {
				out.WriteByte(',')
			}
			out.WriteString(escape(n, ",= "))
			out.WriteByte('=')
			out.Write(fs[n])
		}
		if k.hasTime {
			out.WriteByte(' ')
			out.WriteString(strconv.FormatInt(k.ms, 10))
		}
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func boolCmp(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// quality is the reading's quality; one without is GOOD when it has a
// value (the rule of the published payloads).
func quality(r adapters.Reading) string {
	switch {
	case r.Quality != "":
		return r.Quality
	case r.Value == nil:
		return adapters.Bad
	}
	return adapters.Good
}

// readingTime is the reading's own time, else its message's receive time;
// zero leaves the time to the server.
func readingTime(r adapters.Reading, m batch.Message) time.Time {
	if !r.Timestamp.IsZero() {
		return r.Timestamp
	}
	return m.Received
}

// text makes s something line protocol can carry anywhere.
func text(s string) string {
	s = strings.ToValidUTF8(s, string(utf8.RuneError))
	return strings.Map(func(r rune) rune {
		switch r {
		case '\n', '\r', '\t':
			return ' '
		}
		return r
	}, s)
}

// name is text for names, where a backslash cannot be escaped.
func name(s string) string { return strings.ReplaceAll(text(s), `\`, "/") }

func fieldKey(metric string) string {
	k := name(metric)
	switch k {
	case "":
		return "value"
	case "time":
		return "time_"
	}
	return k
}

// escape puts a backslash before every byte of s that is in special.
func escape(s, special string) string {
	if !strings.ContainsAny(s, special) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(special, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// fieldValue encodes a reading's value as a line protocol field value.
func fieldValue(v any) ([]byte, bool) {
	switch x := v.(type) {
	case nil:
		return nil, false
	case bool:
		return strconv.AppendBool(nil, x), true
	case string:
		return quoted(x), true
	case int:
		return intValue(int64(x)), true
	case int8:
		return intValue(int64(x)), true
	case int16:
		return intValue(int64(x)), true
	case int32:
		return intValue(int64(x)), true
	case int64:
		return intValue(x), true
	case uint:
		return uintValue(uint64(x)), true
	case uint8:
		return intValue(int64(x)), true
	case uint16:
		return intValue(int64(x)), true
	case uint32:
		return intValue(int64(x)), true
	case uint64:
		return uintValue(x), true
	case float32:
		return floatValue(float64(x), 32)
	case float64:
		return floatValue(x, 64)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return intValue(i), true
		}
		if u, err := strconv.ParseUint(x.String(), 10, 64); err == nil {
			return uintValue(u), true
		}
		if f, err := x.Float64(); err == nil {
			return floatValue(f, 64)
		}
		return quoted(x.String()), true
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil, false
	}
	return quoted(string(j)), true
}

func intValue(i int64) []byte { return append(strconv.AppendInt(nil, i, 10), 'i') }

func uintValue(u uint64) []byte {
	if u <= math.MaxInt64 {
		return intValue(int64(u))
	}
	return append(strconv.AppendUint(nil, u, 10), 'u')
}

// floatValue writes the shortest decimal that reads back as the value in
// its own precision; a float32 0.1 stays 0.1.
func floatValue(f float64, bits int) ([]byte, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, false
	}
	return strconv.AppendFloat(nil, f, 'g', -1, bits), true
}

func quoted(s string) []byte {
	s = text(s)
	b := make([]byte, 0, len(s)+2)
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
