package mqttx

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Message is one message delivered to a Handler.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte
	// Retained is set for a retained message sent on subscribing.
	Retained bool
	// Duplicate is set when the broker redelivers a message it sent before
	// (for example after a handler failed and the session resumed).
	Duplicate bool
	// MessageID is the packet id; 0 for QoS 0.
	MessageID uint16
}

// Handler processes one message. Returning nil acknowledges it (PUBACK);
// returning an error leaves it unacknowledged, so the broker redelivers it
// when the session resumes. Return an error only for failures worth
// retrying: a message that can never succeed (undecodable, invalid) should
// be counted and acknowledged by returning nil, or it comes back forever.
// ctx ends when the connection the message came on is torn down or the
// client stops; a handler must honour it.
type Handler func(ctx context.Context, m Message) error

// BatchHandler processes several messages of one subscription at once, in
// arrival order, and returns one error per message with the meaning of
// Handler's: nil acknowledges that message. It lets a handler whose cost is
// a round trip to a backend pay one round trip for many messages. Messages
// of one topic keep their order within and across batches.
type BatchHandler func(ctx context.Context, ms []Message) []error

type subscription struct {
	filter string // as given, used for routing
	qos    byte
	h      Handler
	bh     BatchHandler // instead of h
	// optional: a broker that refuses it is logged, not a failed
	// connection (see SubscribeOptional).
	optional bool
}

// Subscribe registers handler for messages matching filter. It may be called
// before Start (preferred: a persistent session can deliver queued messages
// right after connecting, and a message no registered filter matches is
// acknowledged and counted as unrouted) or at any time after; the
// subscription is (re)made on every connection. With SharedGroup set it is
// made as $share/<group>/<filter>.
func (c *Client) Subscribe(filter string, qos byte, handler Handler) error {
	if handler == nil {
		return fmt.Errorf("subscribe %q: nil handler", filter)
	}
	return c.register(&subscription{filter: filter, qos: qos, h: handler})
}

// SubscribeOptional is Subscribe for a filter some brokers refuse, such as
// Mosquitto's $SYS statistics, which another broker or an ACL may not
// offer: a refusal is logged once per connection and the connection goes
// on without it, where a refused Subscribe fails the connection.
func (c *Client) SubscribeOptional(filter string, qos byte, handler Handler) error {
	if handler == nil {
		return fmt.Errorf("subscribe %q: nil handler", filter)
	}
	return c.register(&subscription{filter: filter, qos: qos, h: handler, optional: true})
}

// SubscribeBatch is Subscribe for a BatchHandler: a worker hands it the
// messages of this subscription that are waiting in its buffer, up to
// Options.HandlerBatch at once. A message that another subscription also
// matches is handled on its own, so every handler sees it exactly once.
func (c *Client) SubscribeBatch(filter string, qos byte, handler BatchHandler) error {
	if handler == nil {
		return fmt.Errorf("subscribe %q: nil handler", filter)
	}
	return c.register(&subscription{filter: filter, qos: qos, bh: handler})
}

func (c *Client) register(sub *subscription) error {
	filter, qos := sub.filter, sub.qos
	if err := validFilter(filter); err != nil {
		return fmt.Errorf("subscribe %q: %w", filter, err)
	}
	if qos > 2 {
		return fmt.Errorf("subscribe %q: qos must be 0..2, got %d", filter, qos)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return ErrStopped
	}
	old := c.subscriptions()
	for _, s := range old {
		if s.filter == filter {
			return fmt.Errorf("subscribe %q: already subscribed", filter)
		}
	}
	// Copy on write: the dispatch path reads the list without a lock.
	subs := append(old[:len(old):len(old)], sub)
	c.subs.Store(&subs)
	signal(c.subsChanged)
	return nil
}

// brokerFilter is the filter sent to the broker.
func (c *Client) brokerFilter(filter string) string {
	if c.opts.SharedGroup == "" {
		return filter
	}
	return "$share/" + c.opts.SharedGroup + "/" + filter
}

// subscriptions returns the registered subscriptions; do not modify.
func (c *Client) subscriptions() []*subscription {
	if p := c.subs.Load(); p != nil {
		return *p
	}
	return nil
}

// subscriptionsFor returns every subscription matching topic.
func (c *Client) subscriptionsFor(topic string) []*subscription {
	var subs []*subscription
	for _, s := range c.subscriptions() {
		if matchTopic(s.filter, topic) {
			subs = append(subs, s)
		}
	}
	return subs
}

// batchOf returns the batch subscription that alone matches topic, or nil.
func (c *Client) batchOf(topic string) *subscription {
	var found *subscription
	for _, s := range c.subscriptions() {
		if !matchTopic(s.filter, topic) {
			continue
		}
		if s.bh == nil || found != nil {
			return nil
		}
		found = s
	}
	return found
}

// validTopic checks a topic name for publishing (MQTT 3.1.1 section 4.7).
func validTopic(topic string) error {
	switch {
	case topic == "":
		return errors.New("empty topic")
	case len(topic) > 65535:
		return errors.New("topic longer than 65535 bytes")
	case strings.ContainsAny(topic, "+#"):
		return errors.New("wildcards are not allowed in a topic name")
	case strings.ContainsRune(topic, 0):
		return errors.New("NUL in topic")
	}
	return nil
}

// validFilter checks a topic filter (MQTT 3.1.1 section 4.7.1). $share/ prefixes
// are refused: sharing is the SharedGroup option, so routing can match the
// plain filter.
func validFilter(filter string) error {
	switch {
	case filter == "":
		return errors.New("empty filter")
	case len(filter) > 65535:
		return errors.New("filter longer than 65535 bytes")
	case strings.ContainsRune(filter, 0):
		return errors.New("NUL in filter")
	case strings.HasPrefix(filter, "$share/"):
		return errors.New("use Options.SharedGroup instead of a $share/ prefix")
	}
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return errors.New("'#' must be a whole last level")
		}
		if strings.Contains(l, "+") && l != "+" {
			return errors.New("'+' must be a whole level")
		}
	}
	return nil
}

// matchTopic reports whether topic matches filter. Wildcards at the first
// level do not match topics starting with '$' (MQTT 3.1.1 section 4.7.2).
func matchTopic(filter, topic string) bool {
	if strings.HasPrefix(topic, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	for {
		fl, frest, fmore := strings.Cut(filter, "/")
		if fl == "#" {
			return true
		}
		tl, trest, tmore := strings.Cut(topic, "/")
		if fl != "+" && fl != tl {
			return false
		}
		switch {
		case !fmore && !tmore:
			return true
		case !tmore:
			// "a/#" matches "a": the rest of the filter must be just "#".
			return frest == "#"
		case !fmore:
			return false
		}
		filter, topic = frest, trest
	}
}

// MatchTopic reports whether topic matches the MQTT topic filter (with the
// + and # wildcards), by the rules the broker applies.
func MatchTopic(filter, topic string) bool { return matchTopic(filter, topic) }
