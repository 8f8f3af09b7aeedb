package mqttx

import (
	"context"
	"fmt"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// item is one message in the pending publish queue.
type item struct {
	topic    string
	qos      byte
	retained bool
	payload  []byte
	// done receives the first outcome (nil, ErrQueued, ErrDropped,
	// ErrStopped); later ones are discarded: the waiter, if any, is gone.
	done chan error
}

func (it *item) notify(err error) {
	select {
	case it.done <- err:
	default:
	}
}

// Publish sends payload to topic. Every message goes through one ordered
// queue, so messages queued during an outage are sent, in order, before any
// published after the reconnect.
//
// Publish returns nil once the broker acknowledged the message (PUBACK for
// QoS 1, PUBCOMP for QoS 2, written for QoS 0). While the client is not
// connected it queues the message and returns ErrQueued at once; if the
// connection drops while the message waits or is in flight, it also returns
// ErrQueued, and the message is sent again after the reconnect (at least
// once: the broker may already have it). When ctx ends first the error wraps
// both ErrQueued and ctx's error: the message stays queued. A full queue
// drops its oldest message, whose Publish (if still waiting) returns
// ErrDropped. payload is copied.
//
// A Handler that publishes and waits must pass a ctx with a deadline: while
// it runs, the messages behind it are not read, and with them the PUBACK it
// waits for may be held up once the handler buffer is full.
func (c *Client) Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error {
	if err := validTopic(topic); err != nil {
		return fmt.Errorf("publish %q: %w", topic, err)
	}
	if qos > 2 {
		return fmt.Errorf("publish %s: qos must be 0..2, got %d", topic, qos)
	}
	it := &item{topic: topic, qos: qos, retained: retained, payload: append([]byte(nil), payload...), done: make(chan error, 1)}

	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return ErrStopped
	}
	c.queue.PushBack(it)
	c.queueBytes += len(it.payload)
	dropped := c.trimLocked()
	n := c.queue.Len()
	connected := c.mach.state == StateConnected && c.cur != nil
	c.mu.Unlock()

	c.m.queueLength.Set(float64(n))
	c.reportDropped(dropped)
	signal(c.wake)
	if !connected {
		return ErrQueued
	}
	select {
	case err := <-it.done:
		if err != nil {
			return fmt.Errorf("publish %s: %w", topic, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("publish %s: %w: %w", topic, ErrQueued, ctx.Err())
	}
}

// trimLocked drops the oldest messages while the queue is over capacity and
// returns how many it dropped. Caller holds mu.
func (c *Client) trimLocked() int {
	n := 0
	for c.queue.Len() > c.opts.QueueCapacity || (c.queueBytes > c.opts.QueueMaxBytes && c.queue.Len() > 1) {
		it := c.queue.Remove(c.queue.Front()).(*item)
		c.queueBytes -= len(it.payload)
		it.notify(ErrDropped)
		n++
	}
	c.dropped += uint64(n)
	return n
}

// reportDropped counts drops and logs them, at most once per 10 s.
func (c *Client) reportDropped(n int) {
	if n == 0 {
		return
	}
	c.m.queueDropped.Add(float64(n))
	if ok, held := c.dropLog.Allow(""); ok {
		c.log.Warn("mqtt publish queue full; oldest messages dropped",
			"dropped", n, "dropped_since_last_warning", n+held, "capacity", c.opts.QueueCapacity)
	}
}

// pop takes the oldest queued message; nil when the queue is empty.
func (c *Client) pop() *item {
	c.mu.Lock()
	e := c.queue.Front()
	if e == nil {
		c.mu.Unlock()
		return nil
	}
	it := c.queue.Remove(e).(*item)
	c.queueBytes -= len(it.payload)
	n := c.queue.Len()
	c.mu.Unlock()
	c.m.queueLength.Set(float64(n))
	return it
}

// requeue puts messages that were in flight back at the front of the queue,
// in their order, and tells their waiters ErrQueued.
func (c *Client) requeue(its []*item) {
	if len(its) == 0 {
		return
	}
	c.mu.Lock()
	for i := len(its) - 1; i >= 0; i-- {
		c.queue.PushFront(its[i])
		c.queueBytes += len(its[i].payload)
	}
	dropped := c.trimLocked()
	n := c.queue.Len()
	c.mu.Unlock()
	for _, it := range its {
		it.notify(ErrQueued)
	}
	c.m.queueLength.Set(float64(n))
	c.reportDropped(dropped)
}

// markQueued tells every waiting Publish that its message waits for the
// next connection.
func (c *Client) markQueued() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.queue.Front(); e != nil; e = e.Next() {
		e.Value.(*item).notify(ErrQueued)
	}
}

// startFlusher runs the flusher of cn until halt.
func (cn *conn) startFlusher() {
	cn.wg.Add(1)
	go func() {
		defer cn.wg.Done()
		if err := cn.c.flush(cn.ctx, cn, false); err != nil {
			cn.fail(err)
		}
	}()
	signal(cn.c.wake) // flush what queued up while disconnected
}

type sent struct {
	it  *item
	tok paho.Token
	at  time.Time
}

// flush sends the queue in order on cn: up to MaxInflight messages are
// written before their acknowledgements arrive, always from the front of the
// queue, and completed in order. It returns nil when ctx ends or cn ends,
// and, with drain, when the queue is empty; it returns an error when a
// publish fails or is not acknowledged within AckTimeout, which the caller
// treats as a failed connection. Whatever was in flight goes back to the
// front of the queue.
func (c *Client) flush(ctx context.Context, cn *conn, drain bool) error {
	var inflight []sent
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		for len(inflight) < c.opts.MaxInflight {
			it := c.pop()
			if it == nil {
				break
			}
			inflight = append(inflight, sent{it: it, tok: cn.pc.Publish(it.topic, it.qos, it.retained, it.payload), at: time.Now()})
		}
		if len(inflight) == 0 {
			if drain {
				return nil
			}
			select {
			case <-c.wake:
				continue
			case <-ctx.Done():
				return nil
			case <-cn.ended:
				return nil
			}
		}
		head := inflight[0]
		timer.Reset(time.Until(head.at.Add(c.opts.AckTimeout)))
		select {
		case <-head.tok.Done():
			if err := head.tok.Error(); err != nil {
				c.m.publishFailed.Inc()
				c.requeue(items(inflight))
				return fmt.Errorf("publish %s: %w", head.it.topic, err)
			}
			head.it.notify(nil)
			c.m.publishes.Inc()
			inflight[0] = sent{}
			inflight = inflight[1:]
		case <-c.wake:
			// New messages may fit in the window.
		case <-timer.C:
			c.m.publishFailed.Inc()
			c.requeue(items(inflight))
			return fmt.Errorf("publish %s: no acknowledgement within %s", head.it.topic, c.opts.AckTimeout)
		case <-ctx.Done():
			c.requeue(items(inflight))
			return nil
		case <-cn.ended:
			c.requeue(items(inflight))
			return nil
		}
	}
}

func items(s []sent) []*item {
	its := make([]*item, len(s))
	for i := range s {
		its[i] = s[i].it
	}
	return its
}
