package brokermon

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// SysFilter is the subscription that feeds an external broker's figures.
const SysFilter = "$SYS/#"

// Default bounds of the schema samples (docs/broker-monitoring.md,
// section Bounds).
const (
	DefaultMaxSchemaTopics = 1000
	DefaultSampleEvery     = time.Second
)

// Options configures a Monitor; zero fields take the defaults.
type Options struct {
	// Source, when set, is the in-process broker whose counters are read
	// (all-in-one); otherwise the figures come from $SYS messages handed
	// to HandleSys.
	Source Source
	// Connected reports whether the API's MQTT client is connected to the
	// broker; nil reports true.
	Connected func() bool
	// MaxNodes and MaxNodesPerTenant bound the topic tree.
	MaxNodes, MaxNodesPerTenant int
	// MaxSchemaTopics bounds the topics with a schema.
	MaxSchemaTopics int
	// SampleEvery is the least time between two schema samples of one
	// topic; negative samples every message (tests).
	SampleEvery time.Duration
	// PollEvery is how often Source is read; a second by default.
	PollEvery time.Duration
	Logger    *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Monitor is the broker monitor: the topic tree and schema samples the
// pipeline feeds, and the broker's figures. It is a lifecycle.Service, which
// polls Source when there is one.
type Monitor struct {
	opts    Options
	tree    *tree
	sys     *sysCollector
	poll    *poller
	started time.Time

	schemaMu      sync.Mutex
	schemas       map[string]*Schema
	schemaRefused atomic.Int64
}

// New builds a Monitor; it does no I/O.
func New(opts Options) (*Monitor, error) {
	if opts.MaxNodes == 0 {
		opts.MaxNodes = DefaultMaxNodes
	}
	if opts.MaxNodesPerTenant == 0 {
		opts.MaxNodesPerTenant = DefaultMaxNodesPerTenant
	}
	if opts.MaxSchemaTopics == 0 {
		opts.MaxSchemaTopics = DefaultMaxSchemaTopics
	}
	switch {
	case opts.SampleEvery == 0:
		opts.SampleEvery = DefaultSampleEvery
	case opts.SampleEvery < 0:
		opts.SampleEvery = 0
	}
	if opts.PollEvery == 0 {
		opts.PollEvery = time.Second
	}
	if opts.MaxNodes < 1 || opts.MaxNodesPerTenant < 1 || opts.MaxSchemaTopics < 1 || opts.PollEvery < 0 {
		return nil, fmt.Errorf("broker monitor bounds must be positive: nodes %d, per tenant %d, schema topics %d, poll %s",
			opts.MaxNodes, opts.MaxNodesPerTenant, opts.MaxSchemaTopics, opts.PollEvery)
	}
	if opts.Connected == nil {
		opts.Connected = func() bool { return true }
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Monitor{opts: opts, tree: newTree(opts.MaxNodes, opts.MaxNodesPerTenant, opts.SampleEvery),
		schemas: map[string]*Schema{}, started: opts.Now()}
	platform := m.tree.messages.Load
	if opts.Source != nil {
		m.poll = &poller{src: opts.Source, platform: platform}
	} else {
		m.sys = newSysCollector(opts.Now, platform)
	}
	return m, nil
}

// Observe counts one message the API received on an agent topic of
// tenant (the topic's 22-character id). It allocates nothing for a topic
// seen before and never blocks on I/O, so the subscriber calls it for
// every message. True means a schema sample of the message is due: hand
// its decoded content to Sample or SampleMessages.
func (m *Monitor) Observe(tenant, topic string, size int) bool {
	return m.tree.observe(tenant, topic, size, m.opts.Now())
}

// SampleMessages folds the decoded telemetry messages of one payload into
// the topic's schema, one sample per device message (sampleOf).
func (m *Monitor) SampleMessages(topic string, msgs []telemetry.Message) {
	if len(msgs) == 0 {
		return
	}
	samples := make([]any, len(msgs))
	for i := range msgs {
		samples[i] = sampleOf(&msgs[i])
	}
	m.Sample(topic, samples...)
}

// Sample folds decoded payloads (JSON values) into the topic's schema.
func (m *Monitor) Sample(topic string, samples ...any) {
	m.schemaMu.Lock()
	defer m.schemaMu.Unlock()
	s := m.schemas[topic]
	if s == nil {
		if len(m.schemas) >= m.opts.MaxSchemaTopics {
			m.schemaRefused.Add(1)
			return
		}
		s = &Schema{}
		m.schemas[topic] = s
	}
	for _, v := range samples {
		s.Add(v)
	}
}

// schema returns the JSON Schema of topic, false when it has no sample.
func (m *Monitor) schema(topic string) (map[string]any, bool) {
	m.schemaMu.Lock()
	defer m.schemaMu.Unlock()
	s := m.schemas[topic]
	if s == nil {
		return nil, false
	}
	return s.JSONSchema(), true
}

// sampleOf is the schema sample of one decoded telemetry message: the
// device's identity and its readings as fields named by the readings, so a
// topic's schema lists which readings always come and their ranges.
func sampleOf(msg *telemetry.Message) map[string]any {
	readings := make(map[string]any, len(msg.Readings))
	for _, r := range msg.Readings {
		if r.Value == nil {
			readings[r.Name] = nil // a failed read
			continue
		}
		readings[r.Name] = *r.Value
	}
	s := map[string]any{"deviceName": msg.DeviceName, "readings": readings}
	if msg.Protocol != "" {
		s["protocol"] = msg.Protocol
	}
	if msg.Timestamp != nil {
		s["timestamp"] = msg.Timestamp.Format(time.RFC3339Nano)
	}
	return s
}

// HandleSys takes one message of the SysFilter subscription.
func (m *Monitor) HandleSys(topic string, payload []byte) {
	if m.sys != nil {
		m.sys.handle(topic, payload)
	}
}

// view is the broker's figures now.
func (m *Monitor) view() sysView {
	if m.poll != nil {
		return m.poll.view()
	}
	return m.sys.view()
}

// source names where the figures come from.
func (m *Monitor) source() string {
	if m.poll != nil {
		return "embedded"
	}
	return "sys-topics"
}

// Name implements lifecycle.Service.
func (m *Monitor) Name() string { return "api-broker-monitor" }

// Start implements lifecycle.Service.
func (m *Monitor) Start(context.Context) error { return nil }

// Run reads the in-process broker's counters every PollEvery; with $SYS
// topics as the source it has nothing to do.
func (m *Monitor) Run(ctx context.Context) error {
	if m.poll == nil {
		<-ctx.Done()
		return nil
	}
	t := time.NewTicker(m.opts.PollEvery)
	defer t.Stop()
	m.poll.poll(m.opts.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			m.poll.poll(m.opts.Now())
		}
	}
}

// Stop implements lifecycle.Service.
func (m *Monitor) Stop(context.Context) error { return nil }

var _ lifecycle.Service = (*Monitor)(nil)
