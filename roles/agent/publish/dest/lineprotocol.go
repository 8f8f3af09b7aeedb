package dest

import (
	"cmp"
	"encoding/json"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/influxdata/line-protocol/v2/lineprotocol"

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
// (NaN, infinities) are skipped as well, and so are lines whose time it
// cannot carry (outside int64 nanoseconds: before 1677 or after 2262,
// which InfluxDB refuses too); a composite value is written as
// its JSON text. Integers that fit int64 get the "i" suffix, larger
// unsigned ones "u". When one line receives a metric twice, the later
// reading wins, as the database would keep it.
//
// Line protocol cannot carry every string: newlines, carriage returns and
// tabs become spaces, invalid UTF-8 becomes U+FFFD, and in names (the
// measurement, tag keys and values, field keys) backslashes become '/',
// because line protocol cannot escape a backslash there, and other control
// characters become spaces, because the encoder refuses them. A field named
// "time", which InfluxDB refuses, is written as "time_". An empty metric
// name is written as "value".
func LineProtocol(b batch.Batch) []byte {
	type key struct {
		dev, id string
		ms      int64
		hasTime bool
	}
	points := map[key]map[string]lineprotocol.Value{}
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
				fs = map[string]lineprotocol.Value{}
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
	var enc lineprotocol.Encoder
	enc.SetPrecision(lineprotocol.Millisecond)
	for _, k := range order {
		enc.StartLine(measurement)
		// The encoder wants tag keys in lexical order: device < device_id.
		if k.dev != "" {
			enc.AddTag(TagDevice, k.dev)
		}
		if k.id != "" {
			enc.AddTag(TagDeviceID, k.id)
		}
		fs := points[k]
		names := make([]string, 0, len(fs))
		for n := range fs {
			names = append(names, n)
		}
		slices.Sort(names)
		for _, n := range names {
			enc.AddField(n, fs[n])
		}
		var at time.Time
		if k.hasTime {
			at = time.UnixMilli(k.ms)
		}
		enc.EndLine(at)
		// name and fieldValue already made every part encodable, so an
		// error here is a time out of line protocol's range: the encoder
		// has dropped that line, and the rest of the batch still goes.
		enc.ClearErr()
	}
	return enc.Bytes()
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

// name is text for names, where a backslash cannot be escaped and the
// encoder refuses every control character.
func name(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\\':
			return '/'
		case r < 0x20 || r == 0x7f:
			return ' '
		}
		return r
	}, text(s))
}

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

// fieldValue converts a reading's value to a line protocol field value.
func fieldValue(v any) (lineprotocol.Value, bool) {
	switch x := v.(type) {
	case nil:
		return lineprotocol.Value{}, false
	case bool:
		return lineprotocol.BoolValue(x), true
	case string:
		return stringValue(x)
	case int:
		return lineprotocol.IntValue(int64(x)), true
	case int8:
		return lineprotocol.IntValue(int64(x)), true
	case int16:
		return lineprotocol.IntValue(int64(x)), true
	case int32:
		return lineprotocol.IntValue(int64(x)), true
	case int64:
		return lineprotocol.IntValue(x), true
	case uint:
		return uintValue(uint64(x)), true
	case uint8:
		return lineprotocol.IntValue(int64(x)), true
	case uint16:
		return lineprotocol.IntValue(int64(x)), true
	case uint32:
		return lineprotocol.IntValue(int64(x)), true
	case uint64:
		return uintValue(x), true
	case float32:
		// The encoder formats float64s; going through the float32's own
		// shortest decimal keeps a float32 0.1 written as 0.1, not as
		// 0.10000000149011612.
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return lineprotocol.FloatValue(f)
	case float64:
		return lineprotocol.FloatValue(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return lineprotocol.IntValue(i), true
		}
		if u, err := strconv.ParseUint(x.String(), 10, 64); err == nil {
			return uintValue(u), true
		}
		if f, err := x.Float64(); err == nil {
			return lineprotocol.FloatValue(f)
		}
		return stringValue(x.String())
	}
	j, err := json.Marshal(v)
	if err != nil {
		return lineprotocol.Value{}, false
	}
	return stringValue(string(j))
}

// uintValue writes integers that fit int64 with the "i" suffix, which
// every InfluxDB-compatible server reads; "u" only where it must.
func uintValue(u uint64) lineprotocol.Value {
	if u <= math.MaxInt64 {
		return lineprotocol.IntValue(int64(u))
	}
	return lineprotocol.UintValue(u)
}

func stringValue(s string) (lineprotocol.Value, bool) { return lineprotocol.StringValue(text(s)) }
