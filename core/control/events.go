package control

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ReportEvents is the report name of the agent's events: anomaly alerts
// and schema-drift events, published on {prefix}/events. Unlike the state
// and metrics reports, which the next one replaces, every event counts:
// the agent queues them as critical records that outlive an outage and
// are evicted only after every ordinary reading (docs/control-channel.md,
// section Events).
const ReportEvents = "events"

// Event kinds.
const (
	// EventAnomalyAlert is an alert of the agent's anomaly detector; its
	// data is the alert object of GET /v1/anomaly/alerts (docs/anomaly.md).
	EventAnomalyAlert = "anomaly_alert"
	// EventDrift is a schema-drift event; its data is the event object of
	// GET /v1/drift/events (docs/drift.md).
	EventDrift = "drift"
)

// Event severities.
const (
	SeverityCritical = "critical"
	SeverityWarning  = "warning"
	SeverityInfo     = "info"
)

// MaxEventDataBytes bounds an event's data: an alert or a drift event is
// a few hundred bytes.
const MaxEventDataBytes = 16 << 10

// Event is one message on ReportEvents.
type Event struct {
	// ID is unique per agent and kind, so the cloud stores a redelivered
	// event once.
	ID   string `json:"id"`
	Kind string `json:"kind"`
	// Severity is SeverityCritical, SeverityWarning or SeverityInfo.
	Severity string `json:"severity"`
	// Timestamp is when the event happened, Unix ms.
	Timestamp int64 `json:"timestamp"`
	// Data is the kind's own object.
	Data json.RawMessage `json:"data"`
}

// DecodeEvent decodes and checks an event. An unknown kind is not an
// error, so an older cloud stores what a newer agent raises.
func DecodeEvent(b []byte) (Event, error) {
	var e Event
	if err := decodeBounded(b, &e); err != nil {
		return e, fmt.Errorf("event: %w", err)
	}
	if err := e.Validate(); err != nil {
		return e, err
	}
	return e, nil
}

// Validate checks the fields of an event, naming the first bad one.
func (e Event) Validate() error {
	if !printable(e.ID, 128) {
		return fmt.Errorf("event: id must be 1..128 printable characters, got %q", clip(e.ID))
	}
	if !printable(e.Kind, 64) {
		return fmt.Errorf("event: kind must be 1..64 printable characters, got %q", clip(e.Kind))
	}
	switch e.Severity {
	case SeverityCritical, SeverityWarning, SeverityInfo:
	default:
		return fmt.Errorf("event: severity must be critical, warning or info, got %q", clip(e.Severity))
	}
	if e.Timestamp <= 0 {
		return fmt.Errorf("event: timestamp must be a positive Unix ms time, got %d", e.Timestamp)
	}
	if len(e.Data) > MaxEventDataBytes {
		return fmt.Errorf("event: data of %d bytes is over %d", len(e.Data), MaxEventDataBytes)
	}
	if !isObject(e.Data) {
		return fmt.Errorf("event: data must be an object")
	}
	return nil
}

// printable reports whether s has 1..n characters, all printable ASCII
// without spaces: ids and kinds travel into topics, logs and URLs.
func printable(s string, n int) bool {
	return s != "" && len(s) <= n && !strings.ContainsFunc(s, func(r rune) bool { return r < 0x21 || r > 0x7e })
}
