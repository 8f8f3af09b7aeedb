// Package command publishes commands from the Cloud API to its agents, on
// each agent's command subtree i/{tenant}/a/{agent}/cmd/...
// (docs/control-channel.md). A request that changes what an agent must
// know hands its command to the Publisher and goes on: the Publisher keeps
// an ordered, bounded pending queue, so a broker that is away never holds
// up a request, and what waited is sent in order, before anything newer,
// once the broker is back.
//
// The queue is in memory: commands pending when the process stops are
// lost. Nothing depends on them alone: an agent still polls its target
// state, and receipts are sent again with the next batch.
package command

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
	"github.com/edgeplat/edgeplat/core/mqttx"
)

// DefaultCapacity bounds the pending queue in messages.
const DefaultCapacity = 1000

// publishTimeout bounds the wait for one broker acknowledgement. Past it
// the message stays in the MQTT client's own ordered queue, which sends it
// again after a reconnect, so the publisher moves on.
const publishTimeout = 10 * time.Second

// Client is the MQTT client the publisher sends through: core/mqttx's.
type Client interface {
	Publish(ctx context.Context, topic string, qos byte, retained bool, payload []byte) error
	State() mqttx.State
}

// Options configure a Publisher.
type Options struct {
	// QoS of every command (mqtt.qos).
	QoS byte
	// Capacity of the pending queue; 0 is DefaultCapacity.
	Capacity   int
	Logger     *slog.Logger
	Registerer prometheus.Registerer
}

// message is one pending command.
type message struct {
	topic   string
	payload []byte
}

// Publisher sends commands to agents; it is a lifecycle.Service whose Run
// drains the pending queue while the client is connected. Build it with
// New and tell it of the client's state changes with StateChanged.
type Publisher struct {
	client Client
	qos    byte
	cap    int
	log    *slog.Logger
	m      *metrics
	wake   chan struct{} // cap 1: there is work, or the connection came back

	// dropLog limits the overflow warning to one per 10 s.
	dropLog *logging.Limiter

	mu      sync.Mutex
	pending list.List // of message, oldest first
}

// New builds a publisher on client. It does no I/O.
func New(client Client, opts Options) (*Publisher, error) {
	if client == nil {
		return nil, errors.New("command publisher: nil client")
	}
	if opts.QoS > 2 {
		return nil, fmt.Errorf("command publisher: qos must be 0..2, got %d", opts.QoS)
	}
	if opts.Capacity < 0 {
		return nil, fmt.Errorf("command publisher: capacity must be >= 0, got %d", opts.Capacity)
	}
	if opts.Capacity == 0 {
		opts.Capacity = DefaultCapacity
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Publisher{client: client, qos: opts.QoS, cap: opts.Capacity, log: log, m: m, wake: make(chan struct{}, 1),
		dropLog: logging.NewLimiter(10*time.Second, nil)}, nil
}

// Publish queues payload as command name (control.CmdTargetState, say,
// or "jobs/42") for the agent agent of tenant and returns at once. The
// command is sent in order with every other one; an error means the
// command itself is invalid, never that the broker is away.
func (p *Publisher) Publish(tenant, agent codec.UUID, name string, payload []byte) error {
	if err := checkName(name); err != nil {
		return fmt.Errorf("publish command %q: %w", name, err)
	}
	if len(payload) > control.MaxCommandBytes {
		return fmt.Errorf("publish command %s: payload of %d bytes is over %d", name, len(payload), control.MaxCommandBytes)
	}
	topic := control.CommandTopic(control.Prefix(tenant, agent), name)
	msg := message{topic: topic, payload: append([]byte(nil), payload...)}
	p.mu.Lock()
	p.pending.PushBack(msg)
	dropped := 0
	for p.pending.Len() > p.cap {
		p.pending.Remove(p.pending.Front())
		dropped++
	}
	n := p.pending.Len()
	p.mu.Unlock()

	p.m.pending.Set(float64(n))
	if dropped > 0 {
		p.m.dropped.Add(float64(dropped))
		if warn, held := p.dropLog.AllowN("", dropped); warn {
			p.log.Warn("command queue full while the broker is away; oldest commands dropped",
				"dropped", dropped, "dropped_since_last_warning", dropped+held, "capacity", p.cap)
		}
	}
	signal(p.wake)
	return nil
}

// PublishJSON is Publish with v encoded as JSON.
func (p *Publisher) PublishJSON(tenant, agent codec.UUID, name string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode command %s: %w", name, err)
	}
	return p.Publish(tenant, agent, name, b)
}

// checkName refuses names that are no topic levels of the command
// subtree: empty levels and MQTT wildcards.
func checkName(name string) error {
	if name == "" {
		return errors.New("empty name")
	}
	for _, l := range strings.Split(name, "/") {
		if l == "" || strings.ContainsAny(l, "+#\x00") {
			return errors.New("the name must be topic levels without wildcards or empty levels")
		}
	}
	return nil
}

// StateChanged is the MQTT client's OnStateChange: a connection that
// comes back wakes the queue.
func (p *Publisher) StateChanged(_, to mqttx.State) {
	if to == mqttx.StateConnected {
		signal(p.wake)
	}
}

// Pending is how many commands wait for the broker.
func (p *Publisher) Pending() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending.Len()
}

// Name implements lifecycle.Service.
func (p *Publisher) Name() string { return "api-commands" }

// Start implements lifecycle.Service.
func (p *Publisher) Start(context.Context) error { return nil }

// Run implements lifecycle.Service: it sends pending commands, oldest
// first and one at a time, while the client is connected.
func (p *Publisher) Run(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		}
		if err := p.drain(ctx); err != nil {
			return err
		}
	}
}

// drain sends until the queue is empty, the connection is gone or ctx
// ends. A message is taken off the queue when it is handed to the client:
// the client's own queue keeps it, in order, when the connection drops
// under it, so nothing newer can overtake it.
func (p *Publisher) drain(ctx context.Context) error {
	for ctx.Err() == nil && p.client.State() == mqttx.StateConnected {
		msg, ok := p.pop()
		if !ok {
			return nil
		}
		pctx, cancel := context.WithTimeout(ctx, publishTimeout)
		err := p.client.Publish(pctx, msg.topic, p.qos, false, msg.payload)
		cancel()
		switch {
		case err == nil:
			p.m.published.Inc()
		case errors.Is(err, mqttx.ErrQueued):
			// In the client's queue now, sent after the reconnect.
			p.m.handedOver.Inc()
		case errors.Is(err, mqttx.ErrDropped):
			p.m.dropped.Inc()
			p.log.Warn("command dropped from the mqtt client's full queue", "topic", msg.topic)
		case errors.Is(err, mqttx.ErrStopped):
			return nil
		default:
			p.m.failed.Inc()
			p.log.Error("command not published", "topic", msg.topic, "err", err)
		}
	}
	return nil
}

func (p *Publisher) pop() (message, bool) {
	p.mu.Lock()
	e := p.pending.Front()
	if e == nil {
		p.mu.Unlock()
		return message{}, false
	}
	msg := p.pending.Remove(e).(message)
	n := p.pending.Len()
	p.mu.Unlock()
	p.m.pending.Set(float64(n))
	return msg, true
}

// Stop implements lifecycle.Service. Commands still pending are lost
// with the process; the log says how many.
func (p *Publisher) Stop(context.Context) error {
	if n := p.Pending(); n > 0 {
		p.log.Warn("stopping with commands not sent", "pending", n)
	}
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

var _ lifecycle.Service = (*Publisher)(nil)
