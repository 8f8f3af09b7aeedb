package payload

import (
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Heartbeat states: an endpoint's connection state.
const (
	StateConnected    = "CONNECTED"
	StateDisconnected = "DISCONNECTED"
	StateConnecting   = "CONNECTING"
	StateError        = "ERROR"
)

// HeartbeatStats are the counters of a heartbeat message. Zero times are
// sent as null (never happened yet).
type HeartbeatStats struct {
	// MessagesReceived counts the frames received since the agent started.
	MessagesReceived uint64
	// MessagesPublished counts the batches published since the start.
	MessagesPublished uint64
	BytesReceived     uint64
	BytesPublished    uint64
	ReconnectAttempts uint64
	LastPublishTime   time.Time
	LastHeartbeatTime time.Time
	LastConnectedTime time.Time
}

// Heartbeat is an endpoint's heartbeat message.
type Heartbeat struct {
	Endpoint  string
	Timestamp time.Time
	State     string
	Stats     HeartbeatStats
}

// Document returns the heartbeat as a document: endpoint, timestamp (ISO
// 8601), state and stats.
func (h Heartbeat) Document() (map[string]any, error) {
	switch h.State {
	case StateConnected, StateDisconnected, StateConnecting, StateError:
	default:
		return nil, fmt.Errorf("payload: heartbeat state %q (valid: %s, %s, %s, %s)",
			h.State, StateConnected, StateDisconnected, StateConnecting, StateError)
	}
	st := h.Stats
	return map[string]any{
		"endpoint":  text(h.Endpoint),
		"timestamp": isoTime(h.Timestamp),
		"state":     h.State,
		"stats": map[string]any{
			"messagesReceived":  uintValue(st.MessagesReceived),
			"messagesPublished": uintValue(st.MessagesPublished),
			"bytesReceived":     uintValue(st.BytesReceived),
			"bytesPublished":    uintValue(st.BytesPublished),
			"reconnectAttempts": uintValue(st.ReconnectAttempts),
			"lastPublishTime":   optTime(st.LastPublishTime),
			"lastHeartbeatTime": optTime(st.LastHeartbeatTime),
			"lastConnectedTime": optTime(st.LastConnectedTime),
		},
	}, nil
}

// EncodeHeartbeat encodes a heartbeat message. It is always plain JSON:
// heartbeats stay out of any subscription's compression, so a monitor can
// read them without the codec.
func EncodeHeartbeat(h Heartbeat) ([]byte, error) {
	doc, err := h.Document()
	if err != nil {
		return nil, err
	}
	b, err := codec.Encode(doc, codec.EncodeOptions{Format: codec.FormatJSON})
	if err != nil {
		return nil, fmt.Errorf("payload: encode heartbeat: %w", err)
	}
	return b, nil
}

func optTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return isoTime(t)
}
