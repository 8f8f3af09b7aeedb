// Package telemetry defines the records that carry readings between the
// roles: the decoded telemetry message that producers append to a tenant's
// ingestion stream (the stream entry contract, docs/stream-contract.md) and
// the reading row the ingestion workers write. Both sides import this one
// definition, so producer and worker cannot drift apart.
package telemetry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// StreamField is the one field of an ingestion stream entry; its value is
// one Message, as JSON or in the compact form (AppendCompactEntry).
const StreamField = "data"

// Message is one decoded telemetry message: one device's readings from one
// agent publish.
type Message struct {
	AgentUUID  string     `json:"agentUuid"`
	DeviceName string     `json:"deviceName"`
	Protocol   string     `json:"protocol,omitempty"`
	Timestamp  *Timestamp `json:"timestamp,omitempty"`
	MsgID      string     `json:"msgId,omitempty"`
	Readings   []Reading  `json:"readings"`
}

// Reading is one value of a device. Value is nil for a failed (BAD) read.
// AnomalyScore is the agent's anomaly score of the value (0..1), present
// once its detector has warmed up (docs/stream-contract.md).
type Reading struct {
	Name         string     `json:"name"`
	Value        *float64   `json:"value"`
	Unit         string     `json:"unit,omitempty"`
	Quality      string     `json:"quality,omitempty"`
	Timestamp    *Timestamp `json:"timestamp,omitempty"`
	AnomalyScore *float64   `json:"anomalyScore,omitempty"`
}

// Timestamp accepts ISO 8601 (RFC 3339) strings and Unix milliseconds, the
// two forms agents send, and marshals as RFC 3339 with milliseconds.
type Timestamp struct{ time.Time }

// UnmarshalJSON implements json.Unmarshaler.
func (t *Timestamp) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	// Fast path for the common unescaped string: a second json.Unmarshal
	// per reading was a tenth of the ingest workers' CPU.
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		parsed, err := time.Parse(time.RFC3339Nano, string(b[1:len(b)-1]))
		if err != nil {
			return fmt.Errorf("timestamp %q is not ISO 8601 (RFC 3339)", truncate(string(b[1:len(b)-1])))
		}
		t.Time = parsed
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("timestamp: %w", err)
		}
		parsed, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return fmt.Errorf("timestamp %q is not ISO 8601 (RFC 3339)", s)
		}
		t.Time = parsed
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsNaN(ms) || math.IsInf(ms, 0) {
		return fmt.Errorf("timestamp %s is neither ISO 8601 nor Unix milliseconds", truncate(string(b)))
	}
	// Years 1970..9999 in ms; anything else is a unit mistake (seconds or
	// microseconds) that would file readings decades away.
	if ms < 0 || ms > 253402300799999 {
		return fmt.Errorf("timestamp %s is out of range for Unix milliseconds", truncate(string(b)))
	}
	t.Time = time.UnixMilli(int64(ms)).Add(time.Duration(math.Mod(ms, 1) * float64(time.Millisecond)))
	return nil
}

// MarshalJSON implements json.Marshaler.
func (t Timestamp) MarshalJSON() ([]byte, error) {
	return t.appendJSON(make([]byte, 0, len(`"2006-01-02T15:04:05.000Z"`))), nil
}

// timestampLayout is how timestamps are written: RFC 3339 in UTC with
// milliseconds.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// TimestampOf wraps t for a Message or Reading.
func TimestampOf(t time.Time) *Timestamp { return &Timestamp{t} }

// ErrInvalid marks a message that can never be written, whatever the retry:
// workers send it to the dead-letter stream at once.
var ErrInvalid = errors.New("invalid telemetry message")

// ParseMessage decodes and checks one stream entry value.
func ParseMessage(data []byte) (Message, error) {
	m, err := DecodeMessage(data)
	if err != nil {
		return Message{}, err
	}
	if err := m.Validate(); err != nil {
		return Message{}, err
	}
	return m, nil
}

// DecodeMessage decodes one stream entry value without Validate, for a
// consumer that checks readings one by one and keeps the valid ones of a
// message that has some invalid ones.
func DecodeMessage(data []byte) (Message, error) {
	var m Message
	if len(data) > MaxMessageBytes {
		return m, fmt.Errorf("%w: %d bytes exceed %d", ErrInvalid, len(data), MaxMessageBytes)
	}
	if err := decodeMessage(data, &m); err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return m, nil
}

// Validate checks the fields the rows are built from.
func (m *Message) Validate() error {
	if _, err := ParseAgentUUID(m.AgentUUID); err != nil {
		return fmt.Errorf("%w: agentUuid: %v", ErrInvalid, err)
	}
	if strings.TrimSpace(m.DeviceName) == "" {
		return fmt.Errorf("%w: deviceName is empty", ErrInvalid)
	}
	if len(m.Readings) == 0 {
		return fmt.Errorf("%w: no readings", ErrInvalid)
	}
	for i, r := range m.Readings {
		if strings.TrimSpace(r.Name) == "" {
			return fmt.Errorf("%w: reading %d has no name", ErrInvalid, i)
		}
		if r.Value != nil && (math.IsNaN(*r.Value) || math.IsInf(*r.Value, 0)) {
			return fmt.Errorf("%w: reading %q is not a finite number", ErrInvalid, r.Name)
		}
		if r.AnomalyScore != nil && (math.IsNaN(*r.AnomalyScore) || math.IsInf(*r.AnomalyScore, 0)) {
			return fmt.Errorf("%w: reading %q has an anomaly score that is not a finite number", ErrInvalid, r.Name)
		}
	}
	return nil
}

// ParseAgentUUID accepts an agent id in either the hyphenated UUID form or
// the 22-character topic form.
func ParseAgentUUID(s string) (codec.UUID, error) { return codec.ParseIDOrUUID(s) }

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}
