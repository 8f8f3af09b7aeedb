// Package commands dispatches the commands the cloud publishes on the
// agent's command subtree i/{tenant}/a/{agent}/cmd/...
// (docs/control-channel.md) to the services that registered for them. The
// platform destination's MQTT connection subscribes to the subtree and
// hands every message to Deliver; a service registers with Handle while
// the agent is composed.
package commands

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
)

// Handler handles the payload of one command. It runs on the MQTT
// connection's message goroutine: it must return quickly, handing longer
// work to its own service. ctx ends with the connection.
type Handler func(ctx context.Context, payload []byte)

// unknown is the metric label of commands no handler is registered for;
// names from the wire never become labels.
const unknown = "unknown"

// Dispatcher routes commands by name. Build it with New.
type Dispatcher struct {
	log    *slog.Logger
	prefix func() string

	mu       sync.RWMutex
	handlers map[string]Handler

	received *prometheus.CounterVec
	refused  *prometheus.CounterVec
}

// New builds a dispatcher. prefix returns the agent's own topic prefix
// "i/{tenant}/a/{agent}", "" while it is not provisioned: commands on any
// other prefix are refused. reg may be nil.
func New(log *slog.Logger, reg prometheus.Registerer, prefix func() string) *Dispatcher {
	d := &Dispatcher{
		log: log, prefix: prefix, handlers: map[string]Handler{},
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_commands_received_total",
			Help: `Commands received from the cloud, by command name ("unknown" for names no handler is registered for).`,
		}, []string{"command"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_agent_commands_refused_total",
			Help: "Command messages refused before dispatch: another agent's topic, a malformed topic or an oversized payload.",
		}, []string{"reason"}),
	}
	d.received.WithLabelValues(unknown)
	for _, r := range []string{reasonForeign, reasonTopic, reasonSize} {
		d.refused.WithLabelValues(r)
	}
	if reg != nil {
		reg.MustRegister(d.received, d.refused)
	}
	return d
}

// Reasons a message is refused, the label of the refused counter.
const (
	reasonForeign = "foreign_topic"
	reasonTopic   = "malformed_topic"
	reasonSize    = "oversized"
)

// Handle registers fn for the command name (control.CmdTargetState, say).
// Register every handler while composing the agent; a second handler for
// one name is a bug.
func (d *Dispatcher) Handle(name string, fn func(ctx context.Context, payload []byte)) {
	if name == "" || fn == nil {
		panic("BUG: commands: Handle needs a name and a function")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.handlers[name]; ok {
		panic(fmt.Sprintf("BUG: commands: a second handler for %q", name))
	}
	d.handlers[name] = fn
	d.received.WithLabelValues(name)
}

// Deliver dispatches the message received on topic. A topic outside the
// agent's own command subtree is refused and logged: the broker's ACL
// should never let one through. A command without a handler is logged
// at debug and counted: a newer cloud may send commands this agent does
// not know.
func (d *Dispatcher) Deliver(ctx context.Context, topic string, payload []byte) {
	prefix, name, err := control.ParseCommandTopic(topic)
	if err != nil {
		d.refused.WithLabelValues(reasonTopic).Inc()
		d.log.Warn("command refused: malformed topic", "err", err)
		return
	}
	if own := d.prefix(); own == "" || prefix != own {
		d.refused.WithLabelValues(reasonForeign).Inc()
		d.log.Warn("command refused: another agent's topic", "topic", topic)
		return
	}
	if len(payload) > control.MaxCommandBytes {
		d.refused.WithLabelValues(reasonSize).Inc()
		d.log.Warn("command refused: payload too large", "command", name, "bytes", len(payload), "limit", control.MaxCommandBytes)
		return
	}
	d.mu.RLock()
	fn, ok := d.handlers[name]
	d.mu.RUnlock()
	if !ok {
		d.received.WithLabelValues(unknown).Inc()
		d.log.Debug("command ignored: no handler", "command", name)
		return
	}
	d.received.WithLabelValues(name).Inc()
	fn(ctx, payload)
}
