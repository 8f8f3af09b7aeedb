// Package receipts is the Cloud API's delivery-receipt tracker
// (docs/agent-delivery.md, section Delivery receipts; the wire format is
// core/control's Receipts on the agent's cmd/receipts topic). The
// telemetry pipeline records each agent message it appended to the
// stream, or recognised as a repeat of one the stream holds; the tracker
// gathers their msgId sequences into ranges per agent and key, and hands
// each agent at most one receipt per second to a Sender, which publishes
// it on the agent's command subtree. An agent deletes a reading only once
// a receipt covers it.
package receipts

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/prometheus/client_golang/prometheus"
)

// Sender delivers one receipt document to an agent (the Cloud API's
// command publisher, on control.CmdReceipts). It must not block for long:
// the tracker calls it from its own goroutine, one agent after another.
type Sender interface {
	Send(tenant, agent codec.UUID, payload []byte)
}

// Defaults of Options.
const (
	DefaultEvery     = time.Second
	DefaultTick      = 100 * time.Millisecond
	DefaultMaxAgents = 100000
	// DefaultMaxRanges keeps one receipt within control.MaxCommandBytes:
	// a range is at most 43 bytes of JSON.
	DefaultMaxRanges = 1000
	// DefaultMaxKeys is the decoder's limit of keys per receipt.
	DefaultMaxKeys = 64
)

// Options configure a Tracker.
type Options struct {
	Sender Sender
	Logger *slog.Logger
	// Registerer takes the tracker's metrics; none when nil.
	Registerer prometheus.Registerer
	// Every is the shortest time between two receipts to one agent;
	// DefaultEvery when zero.
	Every time.Duration
	// Tick is how often pending receipts are looked at, which bounds the
	// delay of a receipt to an agent that had none for Every; DefaultTick
	// when zero.
	Tick time.Duration
	// The memory bounds: agents with a receipt pending, ranges per agent
	// (over all its keys) and keys per agent. A sequence past a bound is
	// dropped and counted; the agent sends that message again after its
	// receipt wait, and the repeat is recorded then.
	MaxAgents, MaxRanges, MaxKeys int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// agentKey is an agent by the 22-character ids of its topic.
type agentKey struct{ tenant, agent string }

// pending is what one agent will be told next.
type pending struct {
	keys   []control.KeyReceipt
	ranges int
	// last is when the agent's previous receipt went out.
	last time.Time
}

// Tracker gathers receipts. Record is safe for concurrent use and never
// waits for anything but a short lock.
type Tracker struct {
	o   Options
	log *slog.Logger
	m   *trackerMetrics

	mu     sync.Mutex
	agents map[agentKey]*pending
}

// New checks o and builds a Tracker; Run sends its receipts.
func New(o Options) (*Tracker, error) {
	if o.Sender == nil {
		return nil, fmt.Errorf("receipt tracker: Sender is required")
	}
	if o.Every < 0 || o.Tick < 0 || o.MaxAgents < 0 || o.MaxRanges < 0 || o.MaxKeys < 0 {
		return nil, fmt.Errorf("receipt tracker: options must not be negative: %+v", o)
	}
	if o.MaxKeys > DefaultMaxKeys {
		return nil, fmt.Errorf("receipt tracker: MaxKeys %d is over the receipt's limit of %d keys", o.MaxKeys, DefaultMaxKeys)
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxAgents, DefaultMaxAgents)
	def(&o.MaxRanges, DefaultMaxRanges)
	def(&o.MaxKeys, DefaultMaxKeys)
	if o.Every == 0 {
		o.Every = DefaultEvery
	}
	if o.Tick == 0 {
		o.Tick = DefaultTick
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := newTrackerMetrics()
	if o.Registerer != nil {
		if err := m.register(o.Registerer); err != nil {
			return nil, fmt.Errorf("receipt tracker metrics: %w", err)
		}
	}
	return &Tracker{o: o, log: log.With("component", "api-receipts"), m: m, agents: map[agentKey]*pending{}}, nil
}

// Record notes that the stream holds the message msgID of the agent whose
// topic ids are tenant and agent (as in "i/{tenant}/a/{agent}/..."). A
// msgID that is not a v2 id ("v2_{kid}_{seq}") cannot be receipted and
// is ignored.
func (t *Tracker) Record(tenant, agent, msgID string) {
	kid, seq, err := codec.ParseMsgID(msgID)
	if err != nil {
		return
	}
	k := agentKey{tenant, agent}
	t.mu.Lock()
	p := t.agents[k]
	if p == nil {
		if len(t.agents) >= t.o.MaxAgents {
			t.mu.Unlock()
			t.m.dropped.WithLabelValues("agents").Inc()
			return
		}
		p = &pending{}
		t.agents[k] = p
	}
	reason := p.add(kid, seq, t.o.MaxKeys, t.o.MaxRanges)
	t.mu.Unlock()
	if reason != "" {
		t.m.dropped.WithLabelValues(reason).Inc()
	}
}

// add merges seq into p, and names the bound that refused it, if one did.
func (p *pending) add(kid string, seq uint64, maxKeys, maxRanges int) string {
	i := 0
	for i < len(p.keys) && p.keys[i].KID != kid {
		i++
	}
	if i == len(p.keys) {
		if len(p.keys) >= maxKeys {
			return "keys"
		}
		if p.ranges >= maxRanges {
			return "ranges"
		}
		p.keys = append(p.keys, control.KeyReceipt{KID: kid})
	}
	k := &p.keys[i]
	if k.Contains(seq) {
		return ""
	}
	before := len(k.Ranges)
	if p.ranges >= maxRanges {
		// Only a sequence that extends or joins ranges fits.
		probe := control.AddSeq(append([]control.Range(nil), k.Ranges...), seq)
		if len(probe) > before {
			return "ranges"
		}
		k.Ranges = probe
	} else {
		k.Ranges = control.AddSeq(k.Ranges, seq)
	}
	p.ranges += len(k.Ranges) - before
	return ""
}

// Name is the lifecycle name.
func (t *Tracker) Name() string { return "api-receipts" }

// Start does nothing: the tracker holds no resources.
func (t *Tracker) Start(context.Context) error { return nil }

// Stop does nothing; receipts still pending are not sent, and their
// agents send those messages again after their receipt wait.
func (t *Tracker) Stop(context.Context) error { return nil }

// Run sends due receipts every Tick until ctx ends.
func (t *Tracker) Run(ctx context.Context) error {
	tick := time.NewTicker(t.o.Tick)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			t.flush(t.o.Now())
		}
	}
}

// due is one receipt to send.
type due struct {
	k    agentKey
	keys []control.KeyReceipt
	n    int // ranges
}

// flush sends the receipt of every agent with something pending whose
// previous receipt is at least Every old, and forgets agents with nothing
// pending once the rate limit no longer needs their last time.
func (t *Tracker) flush(now time.Time) {
	var out []due
	t.mu.Lock()
	for k, p := range t.agents {
		if now.Sub(p.last) < t.o.Every {
			continue
		}
		if len(p.keys) == 0 {
			delete(t.agents, k)
			continue
		}
		out = append(out, due{k: k, keys: p.keys, n: p.ranges})
		p.keys, p.ranges, p.last = nil, 0, now
	}
	pendingAgents := len(t.agents)
	t.mu.Unlock()
	t.m.pending.Set(float64(pendingAgents))
	for _, d := range out {
		t.send(now, d)
	}
}

func (t *Tracker) send(now time.Time, d due) {
	tenant, err := codec.DecodeID(d.k.tenant)
	if err != nil {
		t.log.Warn("receipt for a malformed tenant id dropped", "tenant", d.k.tenant, "err", err)
		return
	}
	agent, err := codec.DecodeID(d.k.agent)
	if err != nil {
		t.log.Warn("receipt for a malformed agent id dropped", "agent", d.k.agent, "err", err)
		return
	}
	payload, err := json.Marshal(control.Receipts{At: now.UnixMilli(), Keys: d.keys})
	if err != nil {
		t.log.Error("encode receipt", "err", err)
		return
	}
	t.o.Sender.Send(tenant, agent, payload)
	t.m.sent.Inc()
	t.m.ranges.Add(float64(d.n))
}

var _ lifecycle.Service = (*Tracker)(nil)
