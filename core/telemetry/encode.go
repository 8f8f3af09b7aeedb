package telemetry

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// AppendJSON appends m encoded exactly as json.Marshal encodes it, byte for
// byte, and fails where json.Marshal fails (a NaN or infinite value).
//
// The Cloud API encodes every decoded message it appends to a stream, and
// json.Marshal's reflection was its largest cost per message. The bytes are
// the stream contract, so they stay those of encoding/json:
// FuzzAppendJSONMatchesStdlib compares the two.
func (m *Message) AppendJSON(dst []byte) ([]byte, error) {
	return m.appendJSON(dst, false)
}

// AppendEntryJSON is AppendJSON of m with each reading's timestamp left out
// where it is the message's instant: the stream contract gives such a
// reading the message's timestamp back, so ingestion writes the same rows.
// Agents stamp a poll's readings alike, and the repeated timestamps were
// over a third of a stream entry's bytes, which Redis copies on append, on
// every read, and in the live publish. FuzzAppendJSONMatchesStdlib checks
// the bytes against json.Marshal of such a copy of m and the rows against
// m's.
func (m *Message) AppendEntryJSON(dst []byte) ([]byte, error) {
	return m.appendJSON(dst, true)
}

func (m *Message) appendJSON(dst []byte, entry bool) ([]byte, error) {
	dst = append(dst, `{"agentUuid":`...)
	dst = appendJSONString(dst, m.AgentUUID)
	dst = append(dst, `,"deviceName":`...)
	dst = appendJSONString(dst, m.DeviceName)
	if m.Protocol != "" {
		dst = append(dst, `,"protocol":`...)
		dst = appendJSONString(dst, m.Protocol)
	}
	if m.Timestamp != nil {
		dst = append(dst, `,"timestamp":`...)
		dst = m.Timestamp.appendJSON(dst)
	}
	if m.MsgID != "" {
		dst = append(dst, `,"msgId":`...)
		dst = appendJSONString(dst, m.MsgID)
	}
	dst = append(dst, `,"readings":`...)
	if m.Readings == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i := range m.Readings {
			if i > 0 {
				dst = append(dst, ',')
			}
			r := &m.Readings[i]
			ownTime := r.Timestamp != nil && !(entry && m.sharesTime(r))
			var err error
			if dst, err = r.appendJSON(dst, ownTime); err != nil {
				return nil, err
			}
		}
		dst = append(dst, ']')
	}
	return append(dst, '}'), nil
}

// sharesTime reports whether r's timestamp is the message's instant.
func (m *Message) sharesTime(r *Reading) bool {
	return m.Timestamp != nil && r.Timestamp != nil &&
		(r.Timestamp == m.Timestamp || r.Timestamp.Equal(m.Timestamp.Time))
}

// appendJSON appends r; its timestamp only with withTime.
func (r *Reading) appendJSON(dst []byte, withTime bool) ([]byte, error) {
	dst = append(dst, `{"name":`...)
	dst = appendJSONString(dst, r.Name)
	dst = append(dst, `,"value":`...)
	if r.Value == nil {
		dst = append(dst, "null"...)
	} else {
		var err error
		if dst, err = appendJSONFloat(dst, *r.Value); err != nil {
			return nil, fmt.Errorf("reading %q: %w", r.Name, err)
		}
	}
	if r.Unit != "" {
		dst = append(dst, `,"unit":`...)
		dst = appendJSONString(dst, r.Unit)
	}
	if r.Quality != "" {
		dst = append(dst, `,"quality":`...)
		dst = appendJSONString(dst, r.Quality)
	}
	if withTime {
		dst = append(dst, `,"timestamp":`...)
		dst = r.Timestamp.appendJSON(dst)
	}
	if r.AnomalyScore != nil {
		dst = append(dst, `,"anomalyScore":`...)
		var err error
		if dst, err = appendJSONFloat(dst, *r.AnomalyScore); err != nil {
			return nil, fmt.Errorf("reading %q: anomaly score: %w", r.Name, err)
		}
	}
	return append(dst, '}'), nil
}

// appendJSON is MarshalJSON without the allocation. Its text holds no
// character JSON would escape, so it is what json.Marshal writes too.
func (t Timestamp) appendJSON(dst []byte) []byte {
	dst = append(dst, '"')
	dst = appendTimestamp(dst, t.Time)
	return append(dst, '"')
}

// appendTimestamp is t.UTC().AppendFormat(dst, timestampLayout), written
// out for years 0 to 9999: every reading carries a timestamp, and the
// general formatter was a fifth of the cost of encoding a message.
// FuzzAppendTimestamp compares the two.
func appendTimestamp(dst []byte, t time.Time) []byte {
	t = t.UTC()
	year, month, day := t.Date()
	if year < 0 || year > 9999 {
		return t.AppendFormat(dst, timestampLayout)
	}
	hour, minute, sec := t.Clock()
	ms := t.Nanosecond() / int(time.Millisecond)
	dst = append(dst,
		byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
		byte('0'+int(month)/10), byte('0'+int(month)%10), '-',
		byte('0'+day/10), byte('0'+day%10), 'T',
		byte('0'+hour/10), byte('0'+hour%10), ':',
		byte('0'+minute/10), byte('0'+minute%10), ':',
		byte('0'+sec/10), byte('0'+sec%10), '.',
		byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
	return dst
}

// appendJSONFloat is json.Marshal's float64: an error for NaN and
// infinities, which JSON cannot hold.
func appendJSONFloat(dst []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("json: unsupported value: %s", strconv.FormatFloat(f, 'g', -1, 64))
	}
	return codec.AppendJSONFloat(dst, f, 64), nil
}

// appendJSONString is json.Marshal's string encoding, HTML escaped.
func appendJSONString(dst []byte, s string) []byte { return codec.AppendJSONString(dst, s, true) }
