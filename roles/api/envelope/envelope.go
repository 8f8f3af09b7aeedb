// Package envelope turns what agents publish into what the Cloud API
// appends: it parses telemetry topics (i/{tenant}/a/{agent}/...) and maps
// the agent's custom payload format into one decoded telemetry message per
// device, the stream entry contract of docs/stream-contract.md. It is pure
// (no I/O), so the subscriber's hot path and its tests share it.
package envelope

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// Kind is what a topic carries.
type Kind int

// Topic kinds, agent to cloud (docs/broker-auth.md, section The rules).
const (
	Telemetry Kind = iota + 1 // i/{tenant}/a/{agent}/endpoints/{topic...}
	State                     // i/{tenant}/a/{agent}/state
	Metrics                   // i/{tenant}/a/{agent}/metrics
	Events                    // i/{tenant}/a/{agent}/events
)

// Topic is a parsed agent topic.
type Topic struct {
	Kind Kind
	// Tenant and Agent are the 22-character ids as they appear in the topic.
	Tenant, Agent string
	// AgentUUID is Agent in the hyphenated form the stream contract uses.
	AgentUUID string
	// Endpoint is what follows endpoints/ (may contain slashes).
	Endpoint string
}

// ErrTopic marks a topic that is not an agent topic; such messages are
// counted and dropped.
var ErrTopic = errors.New("not an agent topic")

// ParseTopic parses an agent topic, checking both ids are the 22-character
// URL-safe Base64 form of a UUID.
func ParseTopic(topic string) (Topic, error) {
	parts := strings.SplitN(topic, "/", 6)
	if len(parts) < 5 || parts[0] != "i" || parts[2] != "a" {
		return Topic{}, fmt.Errorf("%w: %q", ErrTopic, truncate(topic))
	}
	t := Topic{Tenant: parts[1], Agent: parts[3]}
	if _, err := codec.DecodeID(t.Tenant); err != nil {
		return Topic{}, fmt.Errorf("%w: tenant: %v", ErrTopic, err)
	}
	agent, err := codec.DecodeID(t.Agent)
	if err != nil {
		return Topic{}, fmt.Errorf("%w: agent: %v", ErrTopic, err)
	}
	t.AgentUUID = agent.String()
	switch {
	case parts[4] == "endpoints" && len(parts) == 6 && parts[5] != "":
		t.Kind, t.Endpoint = Telemetry, parts[5]
	case parts[4] == "state" && len(parts) == 5:
		t.Kind = State
	case parts[4] == "metrics" && len(parts) == 5:
		t.Kind = Metrics
	case parts[4] == "events" && len(parts) == 5:
		t.Kind = Events
	default:
		return Topic{}, fmt.Errorf("%w: unknown kind in %q", ErrTopic, truncate(topic))
	}
	return t, nil
}

// ErrPayload marks a decoded payload that is not a valid custom envelope.
var ErrPayload = errors.New("invalid telemetry envelope")

// Batch is one publish mapped to the stream contract.
type Batch struct {
	// MsgID is the envelope's msgId, "" when it carries none.
	MsgID    string
	Messages []telemetry.Message
	// Skipped counts readings whose value is text that is not a number
	// (an OPC-UA string node, an MQTT text field): the readings table
	// holds numbers, so they are left out, and the envelope's other
	// readings still count.
	Skipped int
}

// errTextValue marks a reading whose value is text that is not a number.
var errTextValue = errors.New("text value")

// Map turns a decoded custom envelope ({timestamp, protocol, msgId,
// messages[].readings[]}) into one message per device, in the order devices
// first appear. Readings keep their own timestamps; the envelope's is the
// default. A reading's value may be a number, a boolean (1 or 0), or null
// for a failed read. The protocol is the envelope's, else the first segment
// of the endpoint topic.
func Map(t Topic, v any) (Batch, error) {
	env, ok := v.(map[string]any)
	if !ok {
		return Batch{}, fmt.Errorf("%w: top level is %s, want an object", ErrPayload, typeName(v))
	}
	var b Batch
	if id, ok := env["msgId"]; ok {
		s, ok := id.(string)
		if !ok {
			return Batch{}, fmt.Errorf("%w: msgId is %s, want a string", ErrPayload, typeName(id))
		}
		if _, _, err := codec.ParseMsgID(s); err != nil {
			return Batch{}, fmt.Errorf("%w: %v", ErrPayload, err)
		}
		b.MsgID = s
	}
	protocol, _ := env["protocol"].(string)
	if protocol == "" {
		protocol, _, _ = strings.Cut(t.Endpoint, "/")
	}
	var envTS *telemetry.Timestamp
	if raw, ok := env["timestamp"]; ok {
		ts, err := timestamp(raw)
		if err != nil {
			return Batch{}, fmt.Errorf("%w: timestamp: %v", ErrPayload, err)
		}
		envTS = ts
	}
	msgs, ok := env["messages"].([]any)
	if !ok {
		return Batch{}, fmt.Errorf("%w: messages is %s, want an array", ErrPayload, typeName(env["messages"]))
	}
	g := grouper{agent: t.AgentUUID}
	var mr readingMapper
	for i, m := range msgs {
		mo, ok := m.(map[string]any)
		if !ok {
			return Batch{}, fmt.Errorf("%w: messages[%d] is %s, want an object", ErrPayload, i, typeName(m))
		}
		readings, ok := mo["readings"].([]any)
		if !ok {
			return Batch{}, fmt.Errorf("%w: messages[%d].readings is %s, want an array", ErrPayload, i, typeName(mo["readings"]))
		}
		if g.hint == 0 {
			g.hint = len(readings)
		}
		for j, r := range readings {
			ro, ok := r.(map[string]any)
			if !ok {
				return Batch{}, fmt.Errorf("%w: messages[%d].readings[%d] is %s, want an object", ErrPayload, i, j, typeName(r))
			}
			f := fieldsOf(ro)
			dev, reading, err := mr.build(&f)
			if errors.Is(err, errTextValue) {
				b.Skipped++
				continue
			}
			if err != nil {
				return Batch{}, fmt.Errorf("%w: messages[%d].readings[%d]: %v", ErrPayload, i, j, err)
			}
			g.add(dev, reading)
		}
	}
	b.Messages = g.finish(protocol, envTS, b.MsgID)
	if len(b.Messages) == 0 {
		if b.Skipped > 0 {
			return Batch{}, fmt.Errorf("%w: no numeric readings (%d text values)", ErrPayload, b.Skipped)
		}
		return Batch{}, fmt.Errorf("%w: no readings", ErrPayload)
	}
	return b, nil
}

// grouper collects readings into one message per device, in the order
// devices first appear. Both mapping paths use it, so they group alike.
type grouper struct {
	agent string
	// hint is the readings the first device's slice is sized for: most
	// envelopes are one device's poll.
	hint     int
	byDevice map[string]int
	msgs     []telemetry.Message
}

func (g *grouper) add(dev string, r telemetry.Reading) {
	// Most envelopes carry one device, so the last one is checked before
	// the map is needed.
	if n := len(g.msgs); n > 0 && g.msgs[n-1].DeviceName == dev {
		g.msgs[n-1].Readings = append(g.msgs[n-1].Readings, r)
		return
	}
	if g.byDevice == nil {
		g.byDevice = make(map[string]int, 4)
		for k := range g.msgs {
			g.byDevice[g.msgs[k].DeviceName] = k
		}
	}
	k, seen := g.byDevice[dev]
	if !seen {
		k = len(g.msgs)
		g.byDevice[dev] = k
		g.msgs = append(g.msgs, telemetry.Message{AgentUUID: g.agent, DeviceName: dev})
		if k == 0 && g.hint > 0 {
			// Capped: the hint is a claimed length, and a hostile one must
			// not size an allocation.
			g.msgs[0].Readings = make([]telemetry.Reading, 0, min(g.hint, 1024))
		}
	}
	g.msgs[k].Readings = append(g.msgs[k].Readings, r)
}

// finish sets what every message of the envelope shares; they are only
// known once the whole envelope has been read.
func (g *grouper) finish(protocol string, ts *telemetry.Timestamp, msgID string) []telemetry.Message {
	for k := range g.msgs {
		g.msgs[k].Protocol, g.msgs[k].Timestamp, g.msgs[k].MsgID = protocol, ts, msgID
	}
	return g.msgs
}

// valueKind is what a reading's value turned out to be.
type valueKind uint8

const (
	valueNone    valueKind = iota // absent, null, or a number JSON cannot carry
	valueNumber                   // in fields.num
	valueString                   // in fields.str, parsed as a number
	valueInvalid                  // in fields.other; not a reading value
)

// fields are what a reading is mapped from. The generic path takes them
// from a decoded map (fieldsOf), the MessagePack path straight from the
// bytes; build is shared, so the two map alike. A field that is absent or
// of another type is "", which is what Map's type assertions made of it.
type fields struct {
	deviceName, deviceID, metric, unit, quality string

	value valueKind
	num   float64
	str   string
	other any

	// hasTS is a timestamp that is present and not null: tsText when it is
	// a string, else tsRaw, which timestamp parses or refuses.
	hasTS  bool
	tsText string
	tsRaw  any

	// hasScore is an anomaly_score that is a number (the enrichment of
	// docs/agent-payloads.md); a score of another type is left out, not
	// an error, as the reading stands without it.
	hasScore bool
	score    float64
}

func fieldsOf(r map[string]any) fields {
	var f fields
	f.deviceName, _ = r["deviceName"].(string)
	f.deviceID, _ = r["deviceId"].(string)
	f.metric, _ = r["metric"].(string)
	f.unit, _ = r["unit"].(string)
	f.quality, _ = r["quality"].(string)
	switch v := r["value"].(type) {
	case nil:
	case float64:
		f.value, f.num = valueNumber, v
	case int64:
		f.value, f.num = valueNumber, float64(v)
	case int:
		f.value, f.num = valueNumber, float64(v)
	case uint64:
		f.value, f.num = valueNumber, float64(v)
	case bool:
		f.value = valueNumber
		if v {
			f.num = 1
		}
	case string:
		f.value, f.str = valueString, v
	default:
		f.value, f.other = valueInvalid, v
	}
	switch v := r["anomaly_score"].(type) {
	case float64:
		f.hasScore, f.score = true, v
	case int64:
		f.hasScore, f.score = true, float64(v)
	case int:
		f.hasScore, f.score = true, float64(v)
	case uint64:
		f.hasScore, f.score = true, float64(v)
	}
	if raw, ok := r["timestamp"]; ok && raw != nil {
		f.hasTS = true
		if s, ok := raw.(string); ok {
			f.tsText = s
		} else {
			f.tsRaw = raw
		}
	}
	return f
}

// readingMapper maps the readings of one envelope. Readings of one poll
// usually carry the same timestamp text, so the last one parsed is kept and
// shared (timestamps are never modified once mapped), and values come from
// slabs instead of one allocation each.
type readingMapper struct {
	lastTS     string
	lastParsed *telemetry.Timestamp
	// lastRaw is the last numeric timestamp (Unix milliseconds), parsed
	// as lastRawParsed: numbers cost a formatting and a parse each.
	lastRaw       any
	lastRawParsed *telemetry.Timestamp
	values        []float64
}

// value returns a pointer to f that stays valid for the envelope's life.
func (m *readingMapper) value(f float64) *float64 {
	if len(m.values) == cap(m.values) {
		m.values = make([]float64, 0, 64)
	}
	m.values = append(m.values, f)
	return &m.values[len(m.values)-1]
}

func (m *readingMapper) timestamp(f *fields) (*telemetry.Timestamp, error) {
	if f.tsRaw != nil {
		if m.lastRawParsed != nil && f.tsRaw == m.lastRaw {
			return m.lastRawParsed, nil
		}
		ts, err := timestamp(f.tsRaw)
		if err != nil {
			return nil, err
		}
		m.lastRaw, m.lastRawParsed = f.tsRaw, ts
		return ts, nil
	}
	if m.lastParsed != nil && f.tsText == m.lastTS {
		return m.lastParsed, nil
	}
	ts, err := timestamp(f.tsText)
	if err != nil {
		return nil, err
	}
	m.lastTS, m.lastParsed = f.tsText, ts
	return ts, nil
}

func (m *readingMapper) build(f *fields) (string, telemetry.Reading, error) {
	dev := f.deviceName
	if strings.TrimSpace(dev) == "" {
		dev = f.deviceID
	}
	if strings.TrimSpace(dev) == "" {
		return "", telemetry.Reading{}, errors.New("no deviceName")
	}
	name := f.metric
	if strings.TrimSpace(name) == "" {
		return "", telemetry.Reading{}, errors.New("no metric")
	}
	out := telemetry.Reading{Name: name, Unit: f.unit, Quality: f.quality}
	switch f.value {
	case valueNumber:
		if isFinite(f.num) {
			out.Value = m.value(f.num)
		}
	case valueString:
		// Agents send numbers; a numeric string is accepted, anything else
		// is not a reading the readings table can hold.
		v, err := strconv.ParseFloat(strings.TrimSpace(f.str), 64)
		if err != nil {
			return "", telemetry.Reading{}, fmt.Errorf("value %q of %s: %w", truncate(f.str), name, errTextValue)
		}
		if isFinite(v) {
			out.Value = m.value(v)
		}
	case valueInvalid:
		return "", telemetry.Reading{}, fmt.Errorf("value of %s is %s, want a number", name, typeName(f.other))
	}
	if out.Value == nil && out.Quality == "" {
		out.Quality = "BAD"
	}
	if f.hasScore && isFinite(f.score) {
		out.AnomalyScore = m.value(f.score)
	}
	if f.hasTS {
		ts, err := m.timestamp(f)
		if err != nil {
			return "", telemetry.Reading{}, fmt.Errorf("timestamp of %s: %v", name, err)
		}
		out.Timestamp = ts
	}
	return dev, out, nil
}

// isFinite tells values the table can hold: NaN and infinities (which JSON
// cannot carry anyway) are stored as nulls.
func isFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// timestamp accepts ISO 8601 strings and Unix milliseconds.
func timestamp(v any) (*telemetry.Timestamp, error) {
	switch x := v.(type) {
	case string:
		t, err := time.Parse(time.RFC3339Nano, x)
		if err != nil {
			return nil, fmt.Errorf("%q is not ISO 8601", truncate(x))
		}
		return telemetry.TimestampOf(t), nil
	case float64, int64, uint64, int:
		var ts telemetry.Timestamp
		if err := ts.UnmarshalJSON([]byte(fmt.Sprint(x))); err != nil {
			return nil, err
		}
		return &ts, nil
	}
	return nil, fmt.Errorf("is %s, want a string or Unix milliseconds", typeName(v))
}

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "missing or null"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case float64, int64, uint64, int:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

func truncate(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
