package mqtt

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/framing"
)

// maxPendingTopics bounds the topics that may hold a partial frame at
// once; with wildcards a broker can deliver from any number of topics.
const maxPendingTopics = 1024

// topicBuffers keeps one frame buffer per topic, so two devices streaming
// on two topics never mix their partial frames. A buffer exists only
// while its topic has a partial frame: most messages carry whole frames
// and cost no map entry.
type topicBuffers struct {
	delim    []byte
	capacity int
	m        map[string]*framing.Buffer
}

func newTopicBuffers(delim []byte, capacity int) *topicBuffers {
	return &topicBuffers{delim: delim, capacity: capacity, m: map[string]*framing.Buffer{}}
}

// write frames payload for topic and returns the number of frames it
// discarded: over the capacity, or the partial frame of a topic beyond
// maxPendingTopics.
func (t *topicBuffers) write(topic string, payload []byte, emit func([]byte)) int {
	b, ok := t.m[topic]
	if !ok {
		b = framing.New(t.delim, t.capacity)
	}
	before := b.Overflows()
	err := b.Write(payload, emit)
	discarded := int(b.Overflows() - before)
	if err != nil && !errors.Is(err, framing.ErrOverflow) {
		discarded++ // framing returns no other error today
	}
	idle := b.Len() == 0 && !b.Discarding()
	switch {
	case idle && ok:
		delete(t.m, topic)
	case !idle && !ok && len(t.m) >= maxPendingTopics:
		discarded++
	case !idle && !ok:
		t.m[topic] = b
	}
	return discarded
}

func (t *topicBuffers) pending() int { return len(t.m) }

// counters are updated by Listen and read by Stats from any goroutine.
type counters struct {
	connects      atomic.Uint64
	messages      atomic.Uint64
	bytes         atomic.Uint64
	frames        atomic.Uint64
	invalidFrames atomic.Uint64
	overflows     atomic.Uint64
	readings      atomic.Uint64
	pendingTopics atomic.Int64
	lastMessage   atomic.Int64 // Unix ns, 0 before the first
}

// Stats are the adapter's totals since it was built.
type Stats struct {
	Connected bool   `json:"connected"`
	Connects  uint64 `json:"connects"`
	// Messages and Bytes count MQTT messages and their payload bytes.
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	// Frames counts delimited frames, InvalidFrames those (or the array
	// elements) that were not JSON objects, Overflows the frames
	// discarded for exceeding bufferCapacity.
	Frames        uint64 `json:"frames"`
	InvalidFrames uint64 `json:"invalidFrames"`
	Overflows     uint64 `json:"overflows"`
	Readings      uint64 `json:"readings"`
	// PendingTopics is the number of topics holding a partial frame.
	PendingTopics int        `json:"pendingTopics"`
	LastMessage   *time.Time `json:"lastMessage,omitempty"`
}

// Stats returns the adapter's counters. It is safe for concurrent use.
func (a *Adapter) Stats() Stats {
	a.mu.Lock()
	connected := a.conn != nil && a.conn.client.IsConnectionOpen()
	a.mu.Unlock()
	s := Stats{
		Connected:     connected,
		Connects:      a.stats.connects.Load(),
		Messages:      a.stats.messages.Load(),
		Bytes:         a.stats.bytes.Load(),
		Frames:        a.stats.frames.Load(),
		InvalidFrames: a.stats.invalidFrames.Load(),
		Overflows:     a.stats.overflows.Load(),
		Readings:      a.stats.readings.Load(),
		PendingTopics: int(a.stats.pendingTopics.Load()),
	}
	if ns := a.stats.lastMessage.Load(); ns != 0 {
		t := time.Unix(0, ns).UTC()
		s.LastMessage = &t
	}
	return s
}

// Diagnostics is the adapter's protocol detail for the devices API.
type Diagnostics struct {
	Broker         string   `json:"broker"` // password removed
	ClientID       string   `json:"clientId"`
	Topics         []string `json:"topics"`
	QoS            int      `json:"qos"`
	Delimiter      string   `json:"delimiter"`
	BufferCapacity int      `json:"bufferCapacity"`
	CleanSession   bool     `json:"cleanSession"`
	Stats          Stats    `json:"stats"`
}

// Diagnostics implements adapters.Diagnoser; safe for concurrent use.
func (a *Adapter) Diagnostics() any {
	return Diagnostics{
		Broker:         a.cfg.redactedBroker(),
		ClientID:       a.cfg.ClientID,
		Topics:         append([]string(nil), a.cfg.Topics...),
		QoS:            *a.cfg.QoS,
		Delimiter:      *a.cfg.Delimiter,
		BufferCapacity: a.cfg.BufferCapacity,
		CleanSession:   *a.cfg.CleanSession,
		Stats:          a.Stats(),
	}
}
