package mqtt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Fields of a frame object that describe the frame rather than carry a
// value.
const (
	fieldDeviceName = "deviceName"
	fieldTimestamp  = "timestamp"
	// MetricFrame is the metric of the BAD reading an undecodable frame
	// turns into.
	MetricFrame = "frame"
)

// errNotObject is the cause of the BAD reading of a frame that is valid
// JSON but not an object or an array of objects.
var errNotObject = errors.New("frame is not a JSON object or array of objects")

// frameDecoder turns frames into readings for one endpoint.
type frameDecoder struct {
	device     string // default device name: the endpoint's name
	deviceID   string
	dataPoints []adapters.DataPoint
}

// decoded is what one frame yields: one []Reading per object (a JSON array
// of objects is several messages), and the number of invalid parts.
type decoded struct {
	messages [][]adapters.Reading
	invalid  int
}

// decode maps one frame to readings (see README "Frames and readings").
// It never fails: what cannot be decoded becomes a BAD reading with the
// metric "frame" and BAD_DATA.
func (d *frameDecoder) decode(frame []byte, received time.Time) decoded {
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber() // keep integers exact and apart from floats
	var v any
	err := dec.Decode(&v)
	if err == nil {
		// One frame is one JSON value: "{...}{...}" lacks a delimiter.
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("data after the JSON value")
		}
	}
	if err != nil {
		return decoded{messages: [][]adapters.Reading{{d.invalidReading(received, err)}}, invalid: 1}
	}
	switch v := v.(type) {
	case map[string]any:
		return decoded{messages: [][]adapters.Reading{d.objectReadings(v, received)}}
	case []any:
		var out decoded
		for i, e := range v {
			if obj, ok := e.(map[string]any); ok {
				out.messages = append(out.messages, d.objectReadings(obj, received))
				continue
			}
			out.invalid++
			out.messages = append(out.messages, []adapters.Reading{
				d.invalidReading(received, fmt.Errorf("array element %d: %w", i, errNotObject)),
			})
		}
		return out
	}
	return decoded{messages: [][]adapters.Reading{{d.invalidReading(received, errNotObject)}}, invalid: 1}
}

func (d *frameDecoder) invalidReading(at time.Time, err error) adapters.Reading {
	return adapters.BadReading(d.device, d.deviceID, adapters.DataPoint{Name: MetricFrame}, at,
		adapters.WithCode(adapters.CodeBadData, err))
}

// objectReadings maps one frame object: the configured data points, or
// without any, every top-level scalar field.
func (d *frameDecoder) objectReadings(obj map[string]any, received time.Time) []adapters.Reading {
	device := d.device
	if s, ok := obj[fieldDeviceName].(string); ok && s != "" {
		device = s
	}
	at := received
	if t, ok := parseTimestamp(obj[fieldTimestamp]); ok {
		at = t
	}
	if len(d.dataPoints) > 0 {
		out := make([]adapters.Reading, 0, len(d.dataPoints))
		for _, dp := range d.dataPoints {
			raw, found := lookup(obj, dp.Register)
			var v any
			var err error
			if !found {
				err = fmt.Errorf("field %q missing from frame", dp.Register)
			} else {
				v, err = scalar(raw, dp)
			}
			if err != nil {
				out = append(out, adapters.BadReading(device, d.deviceID, dp, at, adapters.WithCode(adapters.CodeBadData, err)))
				continue
			}
			out = append(out, adapters.Reading{DeviceName: device, DeviceID: d.deviceID, Metric: dp.Name,
				Value: v, Unit: dp.Unit, Timestamp: at, Quality: adapters.Good})
		}
		return out
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		if k != fieldDeviceName && k != fieldTimestamp {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys) // a Go map has no order; the frame's own is lost
	out := make([]adapters.Reading, 0, len(keys))
	for _, k := range keys {
		v, err := scalar(obj[k], adapters.DataPoint{Name: k})
		if err != nil {
			continue // nested objects, arrays and nulls are not values
		}
		out = append(out, adapters.Reading{DeviceName: device, DeviceID: d.deviceID, Metric: k,
			Value: v, Timestamp: at, Quality: adapters.Good})
	}
	return out
}

// lookup finds a field by its path: the whole path as a key first, so
// a key that contains dots works, then dot-separated segments through
// objects and, by index, arrays.
func lookup(obj map[string]any, path string) (any, bool) {
	if v, ok := obj[path]; ok {
		return v, true
	}
	var cur any = obj
	for seg := range strings.SplitSeq(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// scalar converts a decoded JSON value into a reading's value: an integer
// literal stays an int64 unless scaled, other numbers are float64 times the
// scale, booleans and strings are kept. The data point's type, when set,
// must match the JSON kind; a scale implies a number.
func scalar(v any, dp adapters.DataPoint) (any, error) {
	want := kindOf(dp.Type)
	if want == "" && dp.Scale != nil {
		want = "number"
	}
	mismatch := func(got string) error {
		return fmt.Errorf("field %q is %s, want %s", dp.Register, got, want)
	}
	switch v := v.(type) {
	case json.Number:
		if want != "" && want != "number" {
			return nil, mismatch("a number")
		}
		return number(v, dp)
	case bool:
		if want != "" && want != "bool" {
			return nil, mismatch("a boolean")
		}
		return v, nil
	case string:
		if want != "" && want != "string" {
			return nil, mismatch("a string")
		}
		return v, nil
	case nil:
		return nil, fmt.Errorf("field %q is null", dp.Register)
	}
	return nil, fmt.Errorf("field %q is not a number, boolean or string", dp.Register)
}

func number(n json.Number, dp adapters.DataPoint) (any, error) {
	s := n.String()
	if dp.Scale == nil && !strings.ContainsAny(s, ".eE") {
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, fmt.Errorf("field %q: number %s out of range", dp.Register, s)
	}
	f *= dp.ScaleOr1()
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("field %q: scaled value out of range", dp.Register)
	}
	return f, nil
}

// Unix milliseconds accepted as a frame timestamp: years 1970 to 9999, so
// that a value in seconds or nanoseconds is not taken for a wrong date.
const maxUnixMS = 253402300799999

// parseTimestamp reads a frame's timestamp: an RFC 3339 string or Unix
// milliseconds. Anything else leaves the receive time in place.
func parseTimestamp(v any) (time.Time, bool) {
	switch v := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, v)
		return t.UTC(), err == nil
	case json.Number:
		f, err := strconv.ParseFloat(v.String(), 64)
		if err != nil || f < 0 || f > maxUnixMS {
			return time.Time{}, false
		}
		ms := math.Floor(f)
		return time.UnixMilli(int64(ms)).Add(time.Duration((f - ms) * float64(time.Millisecond))).UTC(), true
	}
	return time.Time{}, false
}
