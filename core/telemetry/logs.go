package telemetry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// LogBatch is the value of the data field of an agent logs stream entry
// (tenant:{id}:agent:logs): one upload of an agent's log lines.
type LogBatch struct {
	AgentUUID string     `json:"agentUuid"`
	Logs      []LogEntry `json:"logs"`
}

// LogEntry is one agent log line (docs/stream-contract.md, "Agent log
// entries").
// Timestamp is required; fields beyond these are kept in Extra.
type LogEntry struct {
	Level     string          `json:"level"`
	Message   string          `json:"message"`
	Timestamp *Timestamp      `json:"timestamp"`
	Component string          `json:"component,omitempty"`
	Source    string          `json:"source,omitempty"`
	Extra     json.RawMessage `json:"-"`
}

// UnmarshalJSON keeps unknown fields (appId, container, ...) in Extra.
func (l *LogEntry) UnmarshalJSON(b []byte) error {
	type plain LogEntry
	if err := json.Unmarshal(b, (*plain)(l)); err != nil {
		return err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(b, &all); err != nil {
		return err
	}
	for _, k := range []string{"level", "message", "timestamp", "component", "source"} {
		delete(all, k)
	}
	if len(all) > 0 {
		extra, err := json.Marshal(all)
		if err != nil {
			return err
		}
		l.Extra = extra
	}
	return nil
}

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

// ParseLogBatch decodes and checks one logs stream entry value.
func ParseLogBatch(data []byte) (LogBatch, error) {
	var b LogBatch
	if len(data) > MaxLogBatchBytes {
		return b, fmt.Errorf("%w: %d bytes exceed %d", ErrInvalid, len(data), MaxLogBatchBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&b); err != nil {
		return LogBatch{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if dec.More() {
		return LogBatch{}, fmt.Errorf("%w: trailing data after the log batch", ErrInvalid)
	}
	if _, err := ParseAgentUUID(b.AgentUUID); err != nil {
		return LogBatch{}, fmt.Errorf("%w: agentUuid: %v", ErrInvalid, err)
	}
	if len(b.Logs) == 0 {
		return LogBatch{}, fmt.Errorf("%w: no log lines", ErrInvalid)
	}
	for i := range b.Logs {
		l := &b.Logs[i]
		l.Level = strings.ToLower(l.Level)
		if !logLevels[l.Level] {
			return LogBatch{}, fmt.Errorf("%w: log line %d: level %q is not debug, info, warn or error", ErrInvalid, i, l.Level)
		}
		if l.Timestamp == nil {
			return LogBatch{}, fmt.Errorf("%w: log line %d has no timestamp", ErrInvalid, i)
		}
	}
	return b, nil
}
