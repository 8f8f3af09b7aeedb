package payload

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// SchemaML is the schema the ml format declares.
const SchemaML = "service.ml.v1"

// Types of an ecp tag (docs/agent-payloads.md).
const (
	ECPBoolean = 1
	ECPInteger = 2
	ECPFloat   = 3
	ECPString  = 4
)

// DTypes of an ml feature (docs/agent-payloads.md).
const (
	DTypeBool   = "bool"
	DTypeInt    = "int"
	DTypeFloat  = "float"
	DTypeString = "string"
	DTypeError  = "error"
)

// Error codes this package fills in where a reading carries none.
const (
	// CodeReadError is the generic read failure, for a BAD reading that
	// came without a qualityCode: every failed read must carry one.
	CodeReadError = "READ_ERROR"
	// CodeNullValue is the ml error of a reading that is not BAD but has
	// no value (a null in an MQTT frame): ml keeps nulls "as error" and
	// the quality codes of docs/agent.md all describe failed reads, which
	// this is not.
	CodeNullValue = "NULL_VALUE"
)

// Options is what a payload needs besides the batch.
type Options struct {
	// Endpoint is the endpoint's name; the batch's Endpoint when empty.
	Endpoint string
	// Protocol is the endpoint's protocol (custom envelope "protocol").
	Protocol string
	// MsgID is the custom payload's msgId, v2_{kid}_{sequence}; required
	// by Custom, unused by the other formats.
	MsgID string
	// Now is the time source, time.Now when nil: the custom envelope's
	// timestamp, and the time of readings and batches that carry none.
	Now func() time.Time
}

func (o Options) now() time.Time {
	if o.Now != nil {
		return o.Now()
	}
	return time.Now()
}

func (o Options) endpoint(b batch.Batch) string {
	if o.Endpoint != "" {
		return o.Endpoint
	}
	return b.Endpoint
}

// Build builds the document of format f for b.
func Build(f Format, b batch.Batch, o Options) (map[string]any, error) {
	switch f {
	case Custom, "":
		return BuildCustom(b, o)
	case Tags:
		return BuildTags(b, o), nil
	case ECP:
		return BuildECP(b, o), nil
	case ML:
		return BuildML(b, o), nil
	}
	_, err := ParseFormat(string(f))
	return nil, err
}

// ErrMsgID is returned by BuildCustom for a missing or malformed msgId: the
// cloud refuses a custom envelope whose msgId it cannot parse, and
// de-duplicates on it, so one is never made up here.
var ErrMsgID = errors.New("payload: custom payload needs a v2 msgId")

// BuildCustom builds the custom envelope: timestamp (now, ISO 8601),
// protocol, msgId and one message per batch message, each with its
// readings at their original timestamps. A BAD reading has value null and
// a qualityCode; OPC-UA readings keep protocol and nodeType.
func BuildCustom(b batch.Batch, o Options) (map[string]any, error) {
	if _, _, err := codec.ParseMsgID(o.MsgID); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMsgID, err)
	}
	now := o.now()
	msgs := make([]any, 0, len(b.Messages))
	en := enrichment{rs: b.Anomaly}
	i := 0
	for _, m := range b.Messages {
		rs := make([]any, 0, len(m.Readings))
		for _, r := range m.Readings {
			a := en.at(i)
			out := customReading(r, readingTime(r, m, now), enrichedKeys(a))
			if a != nil {
				addEnrichment(out, a)
			}
			rs = append(rs, out)
			i++
		}
		msgs = append(msgs, map[string]any{"readings": rs})
	}
	return map[string]any{
		"timestamp": isoTime(now),
		"protocol":  o.Protocol,
		"msgId":     o.MsgID,
		"messages":  msgs,
	}, nil
}

func customReading(r adapters.Reading, at time.Time, extra int) map[string]any {
	// Sized for the reading's keys plus extra (the anomaly fields), so
	// an enriched reading does not grow its map twice.
	out := make(map[string]any, 8+extra)
	out["deviceName"] = text(r.DeviceName)
	out["deviceId"] = text(r.DeviceID)
	out["metric"] = text(r.Metric)
	out["unit"] = text(r.Unit)
	out["timestamp"] = isoTime(at)
	out["quality"] = text(quality(r))
	if isBad(r) {
		out["value"] = nil
		out["qualityCode"] = text(badCode(r))
	} else {
		v, k := normalize(r.Value)
		if k == kindOther {
			// Kept as the adapter produced it; codec encodes composite
			// values through encoding/json.
			v = r.Value
		}
		out["value"] = v
	}
	if r.Protocol != "" || r.NodeType != "" {
		out["protocol"] = text(r.Protocol)
		out["nodeType"] = text(r.NodeType)
	}
	return out
}

// BuildTags builds the tags document: timestamp (Unix ms), node, group and
// one tag per reading, {name, value}, or {name, error} for a BAD read.
func BuildTags(b batch.Batch, o Options) map[string]any {
	s := newSnapshot(b, o)
	tags := make([]any, 0, len(s.items))
	for _, it := range s.items {
		if isBad(it.r) {
			tags = append(tags, map[string]any{"name": it.name, "error": text(badCode(it.r))})
			continue
		}
		v, _ := scalar(it.r.Value)
		tags = append(tags, map[string]any{"name": it.name, "value": v})
	}
	return s.doc("tags", tags)
}

// BuildECP builds the ecp document: the tags shape with a type on each
// tag, one entry per tag name. De-duplication comes first (the reading
// with the newest timestamp wins, the later one in the batch on a tie) and
// only then are BAD and null tags dropped: a snapshot whose latest read of
// a tag failed omits the tag rather than present an older value as current.
func BuildECP(b batch.Batch, o Options) map[string]any {
	s := newSnapshot(b, o)
	latest := make(map[string]int, len(s.items))
	var order []string
	for i, it := range s.items {
		j, seen := latest[it.name]
		if !seen {
			order = append(order, it.name)
		}
		if !seen || !it.at.Before(s.items[j].at) {
			latest[it.name] = i
		}
	}
	tags := make([]any, 0, len(order))
	for _, name := range order {
		it := s.items[latest[name]]
		if isBad(it.r) {
			continue
		}
		v, k := scalar(it.r.Value)
		if k == kindNull {
			continue
		}
		tags = append(tags, map[string]any{"name": name, "value": v, "type": int64(ecpType(k))})
	}
	return s.doc("tags", tags)
}

// BuildML builds the ml document: timestamp (Unix ms), node, group, schema
// service.ml.v1 and one feature per reading, none de-duplicated. A failed
// read, or a null value, is a feature of dtype error with value null and
// the code in error.
func BuildML(b batch.Batch, o Options) map[string]any {
	s := newSnapshot(b, o)
	feats := make([]any, 0, len(s.items))
	en := enrichment{rs: b.Anomaly}
	for i, it := range s.items {
		a := en.at(i)
		f := make(map[string]any, 5+enrichedKeys(a))
		f["name"], f["quality"] = it.name, text(quality(it.r))
		if a != nil {
			addEnrichment(f, a)
		}
		v, k := scalar(it.r.Value)
		switch {
		case isBad(it.r):
			f["value"], f["dtype"], f["error"] = nil, DTypeError, text(badCode(it.r))
		case k == kindNull:
			f["value"], f["dtype"], f["error"] = nil, DTypeError, CodeNullValue
		default:
			f["value"], f["dtype"] = v, mlDType(k)
		}
		feats = append(feats, f)
	}
	doc := s.doc("features", feats)
	doc["schema"] = SchemaML
	return doc
}

// snapshot is the common ground of tags, ecp and ml: the batch's readings
// in order, named, with node, group and payload time.
type snapshot struct {
	node, group string
	at          time.Time
	items       []item
}

type item struct {
	name string
	r    adapters.Reading
	at   time.Time
}

func newSnapshot(b batch.Batch, o Options) snapshot {
	ep := o.endpoint(b)
	now := o.now()
	s := snapshot{node: text(Node(b, ep)), group: Group(ep)}
	multi := devices(b) > 1
	for _, m := range b.Messages {
		for _, r := range m.Readings {
			name := r.Metric
			if multi && r.DeviceName != "" {
				name = r.DeviceName + "." + r.Metric
			}
			at := readingTime(r, m, now)
			s.items = append(s.items, item{name: text(name), r: r, at: at})
			if at.After(s.at) {
				s.at = at
			}
		}
	}
	if s.at.IsZero() {
		s.at = now
	}
	return s
}

func (s snapshot) doc(listKey string, list []any) map[string]any {
	return map[string]any{
		"timestamp": s.at.UnixMilli(),
		"node":      s.node,
		"group":     s.group,
		listKey:     list,
	}
}

// devices counts the distinct non-empty device names of b's readings,
// stopping at 2.
func devices(b batch.Batch) int {
	first := ""
	for _, m := range b.Messages {
		for _, r := range m.Readings {
			switch {
			case r.DeviceName == "" || r.DeviceName == first:
			case first == "":
				first = r.DeviceName
			default:
				return 2
			}
		}
	}
	if first == "" {
		return 0
	}
	return 1
}

// Node is the node of the snapshot formats: the device name the protocol
// reported when every reading that names a device names the same one, else
// the endpoint name.
func Node(b batch.Batch, endpoint string) string {
	if devices(b) == 1 {
		for _, m := range b.Messages {
			for _, r := range m.Readings {
				if r.DeviceName != "" {
					return r.DeviceName
				}
			}
		}
	}
	return endpoint
}

// Group derives the group of the snapshot formats from an endpoint name:
// lower-cased, every run of characters other than a-z and 0-9 replaced by
// one "_", leading and trailing "_" trimmed, and "default" when nothing is
// left. Consumers use the group as an identifier (ECP group names, ML
// feature-store keys), where spaces, slashes and dots are not allowed, and
// two spellings of one name ("Line 1", "line-1") should meet.
func Group(endpoint string) string {
	var sb strings.Builder
	sep := false
	for _, c := range strings.ToLower(endpoint) {
		if c >= 'a' && c <= 'z' || c >= '0' && c <= '9' {
			if sep && sb.Len() > 0 {
				sb.WriteByte('_')
			}
			sep = false
			sb.WriteRune(c)
			continue
		}
		sep = true
	}
	if sb.Len() == 0 {
		return "default"
	}
	return sb.String()
}

// readingTime is the reading's own time; one without (an adapter that set
// none) takes its message's receive time, then now.
func readingTime(r adapters.Reading, m batch.Message, now time.Time) time.Time {
	switch {
	case !r.Timestamp.IsZero():
		return r.Timestamp
	case !m.Received.IsZero():
		return m.Received
	}
	return now
}

// isoTime writes t in UTC with as many fractional digits as it has, so an
// original timestamp arrives to the nanosecond.
func isoTime(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func isBad(r adapters.Reading) bool { return r.Quality == adapters.Bad }

func badCode(r adapters.Reading) string {
	if r.QualityCode != "" {
		return r.QualityCode
	}
	return CodeReadError
}

// quality is the reading's quality; an adapter that set none produced a
// value (GOOD) or did not (BAD).
func quality(r adapters.Reading) string {
	switch {
	case r.Quality != "":
		return r.Quality
	case r.Value == nil:
		return adapters.Bad
	}
	return adapters.Good
}

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindInt
	kindFloat
	kindString
	kindOther // composite (object, array, bytes)
)

// normalize turns an adapter's value into one of the types codec.Decode
// returns, so a document decodes to itself in every wire format: integers
// become int64 (uint64 above MaxInt64), float32 becomes the float64 of its
// shortest decimal (0.1f stays 0.1 rather than 0.10000000149011612), NaN
// and infinities, which JSON cannot carry, become null.
func normalize(v any) (any, kind) {
	switch x := v.(type) {
	case nil:
		return nil, kindNull
	case bool:
		return x, kindBool
	case string:
		return text(x), kindString
	case int:
		return int64(x), kindInt
	case int8:
		return int64(x), kindInt
	case int16:
		return int64(x), kindInt
	case int32:
		return int64(x), kindInt
	case int64:
		return x, kindInt
	case uint:
		return uintValue(uint64(x)), kindInt
	case uint8:
		return int64(x), kindInt
	case uint16:
		return int64(x), kindInt
	case uint32:
		return int64(x), kindInt
	case uint64:
		return uintValue(x), kindInt
	case float32:
		f, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
		return floatValue(f)
	case float64:
		return floatValue(x)
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, kindInt
		}
		if f, err := x.Float64(); err == nil {
			return floatValue(f)
		}
		return text(x.String()), kindString
	}
	return v, kindOther
}

func uintValue(u uint64) any {
	if u <= math.MaxInt64 {
		return int64(u)
	}
	return u
}

func floatValue(f float64) (any, kind) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, kindNull
	}
	return f, kindFloat
}

// scalar is normalize for the snapshot formats, whose tags hold scalars
// only: a composite value travels as its JSON text, a string.
func scalar(v any) (any, kind) {
	n, k := normalize(v)
	if k != kindOther {
		return n, k
	}
	b, err := json.Marshal(v)
	if err != nil {
		return text(fmt.Sprint(v)), kindString
	}
	return string(b), kindString
}

// text repairs invalid UTF-8 the way core/codec does, one U+FFFD per
// invalid byte, so that a document holds the strings the receiver will see
// and ecp de-duplicates on names as they arrive.
func text(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	for _, r := range s { // an invalid byte ranges as one utf8.RuneError
		sb.WriteRune(r)
	}
	return sb.String()
}

func ecpType(k kind) int {
	switch k {
	case kindBool:
		return ECPBoolean
	case kindInt:
		return ECPInteger
	case kindFloat:
		return ECPFloat
	}
	return ECPString
}

func mlDType(k kind) string {
	switch k {
	case kindBool:
		return DTypeBool
	case kindInt:
		return DTypeInt
	case kindFloat:
		return DTypeFloat
	}
	return DTypeString
}
