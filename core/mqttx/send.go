package mqttx

import (
	"context"
	"errors"
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// ErrNotDelivered is wrapped by the errors of Send for a message the broker
// did not acknowledge: the connection ended, the acknowledgement did not come
// within AckTimeout, or ctx ended first. The broker may still have it.
var ErrNotDelivered = errors.New("mqtt: message not acknowledged by the broker")

// Outgoing is one message for Send.
type Outgoing struct {
	Topic    string
	QoS      byte
	Retained bool
	Payload  []byte
}

// Send publishes msgs on the current connection only. It bypasses the
// pending publish queue: it is for callers that keep their own durable
// queue and may delete a message only once the broker acknowledged that
// exact packet, so nothing here is kept for a later connection.
//
// Every message is written, in order, before the first acknowledgement is
// awaited. errs[i] is nil only when msgs[i] was acknowledged (PUBACK for QoS
// 1, PUBCOMP for QoS 2, written for QoS 0) while its connection was still
// up: a paho token can also complete when its connection is torn down, and
// that is not a delivery. Otherwise errs[i] wraps ErrNotConnected (there was
// no connection: nothing was written), ErrStopped, a validation error, or
// ErrNotDelivered. A missing acknowledgement after AckTimeout fails the
// connection, as it does for queued publishes, so the client reconnects.
func (c *Client) Send(ctx context.Context, msgs []Outgoing) []error {
	errs := make([]error, len(msgs))
	c.mu.Lock()
	cn, stopped := c.cur, c.stopped
	connected := c.mach.state == StateConnected && cn != nil
	c.mu.Unlock()
	if stopped || !connected {
		e := ErrStopped
		if !stopped {
			e = ErrNotConnected
		}
		for i := range errs {
			errs[i] = e
		}
		return errs
	}

	toks := make([]paho.Token, len(msgs))
	for i, m := range msgs {
		if err := validTopic(m.Topic); err != nil {
			errs[i] = fmt.Errorf("send %q: %w", m.Topic, err)
			continue
		}
		if m.QoS > 2 {
			errs[i] = fmt.Errorf("send %s: qos must be 0..2, got %d", m.Topic, m.QoS)
			continue
		}
		toks[i] = cn.pc.Publish(m.Topic, m.QoS, m.Retained, m.Payload)
	}

	timer := time.NewTimer(c.opts.AckTimeout)
	defer timer.Stop()
	for i, tok := range toks {
		if tok == nil {
			continue
		}
		select {
		case <-tok.Done():
			if err := tok.Error(); err != nil {
				c.m.publishFailed.Inc()
				errs[i] = fmt.Errorf("send %s: %w: %w", msgs[i].Topic, ErrNotDelivered, err)
				continue
			}
			select {
			case <-cn.ended:
				c.m.publishFailed.Inc()
				errs[i] = fmt.Errorf("send %s: %w: connection ended: %w", msgs[i].Topic, ErrNotDelivered, cn.err())
			default:
				c.m.publishes.Inc()
			}
		case <-cn.ended:
			c.m.publishFailed.Inc()
			errs[i] = fmt.Errorf("send %s: %w: connection ended: %w", msgs[i].Topic, ErrNotDelivered, cn.err())
		case <-timer.C:
			err := fmt.Errorf("no acknowledgement within %s", c.opts.AckTimeout)
			cn.fail(err)
			c.m.publishFailed.Inc()
			errs[i] = fmt.Errorf("send %s: %w: %w", msgs[i].Topic, ErrNotDelivered, err)
		case <-ctx.Done():
			c.m.publishFailed.Inc()
			errs[i] = fmt.Errorf("send %s: %w: %w", msgs[i].Topic, ErrNotDelivered, ctx.Err())
		}
	}
	return errs
}
