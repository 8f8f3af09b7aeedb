package agent

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/mqtt"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
	"github.com/edgeplat/edgeplat/roles/agent/drift"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/simulation"
)

// output is the runner's Output: one batcher per running endpoint, built
// from the endpoint's buffer settings, delivering to the publisher. It
// also keeps each endpoint's counters for its heartbeat.
type output struct {
	log *slog.Logger
	pub *publish.Router
	// drift observes what the endpoints deliver (docs/drift.md): frames
	// of the endpoints that have them, readings of the others.
	drift *drift.Service
	// anomaly scores each batch before it is published; nil scores none.
	anomaly batchObserver

	mu        sync.Mutex
	endpoints map[string]*endpointOut // by endpoint UUID
	// counters outlive an endpoint's restarts (a PATCH, a reconnect):
	// heartbeats count since the agent started.
	counters map[string]*endpointCounters
}

// endpointOut is one running endpoint's batcher and heartbeat counters.
type endpointOut struct {
	ep adapters.Endpoint
	b  *batch.Batcher
	*endpointCounters
}

// endpointCounters are the figures of an endpoint's heartbeat.
type endpointCounters struct {
	framesIn   atomic.Uint64
	bytesIn    atomic.Uint64
	batchesOut atomic.Uint64
	bytesOut   atomic.Uint64
	lastOut    atomic.Int64 // Unix ms of the last batch handed to a destination
}

func newOutput(log *slog.Logger, pub *publish.Router) *output {
	return &output{log: log, pub: pub, endpoints: map[string]*endpointOut{}, counters: map[string]*endpointCounters{}}
}

// batchObserver scores a batch and adds its results to it
// (anomaly.Service), valid until the Scored is released.
type batchObserver interface {
	ObserveBatch(endpoint string, b *batch.Batch) anomaly.Scored
}

// sink delivers one endpoint's batches to the publisher.
type sink struct {
	pub     *publish.Router
	eo      *endpointOut
	anomaly batchObserver
}

// Deliver implements batch.Sink.
func (s sink) Deliver(ctx context.Context, b batch.Batch) {
	if s.anomaly != nil {
		// The publisher encodes b before Deliver returns; nothing keeps
		// its results after that.
		defer s.anomaly.ObserveBatch(s.eo.ep.Name, &b).Release()
	}
	if n := s.pub.Deliver(ctx, s.eo.ep, b); n > 0 {
		s.eo.batchesOut.Add(1)
		s.eo.bytesOut.Add(uint64(b.Bytes))
		s.eo.lastOut.Store(time.Now().UnixMilli())
	}
}

func (o *output) endpoint(ep adapters.Endpoint) *endpointOut {
	o.mu.Lock()
	defer o.mu.Unlock()
	eo := o.endpoints[ep.UUID]
	if eo == nil {
		c := o.counters[ep.UUID]
		if c == nil {
			c = &endpointCounters{}
			o.counters[ep.UUID] = c
		}
		eo = &endpointOut{ep: ep, endpointCounters: c}
		eo.b = batch.New(ep.Name, batch.OptionsFor(ep), sink{pub: o.pub, eo: eo, anomaly: o.anomaly})
		o.endpoints[ep.UUID] = eo
	}
	return eo
}

// Readings implements runner.Output.
func (o *output) Readings(ctx context.Context, ep adapters.Endpoint, rs []adapters.Reading) {
	// MQTT and simulated endpoints hand their frames to Frame instead.
	if ep.Protocol != mqtt.Protocol && ep.Protocol != simulation.Protocol {
		o.drift.Readings(ep.Protocol, rs)
	}
	eo := o.endpoint(ep)
	size := batch.EstimateSize(rs)
	eo.framesIn.Add(1)
	eo.bytesIn.Add(uint64(size))
	if err := eo.b.Add(ctx, batch.Message{Endpoint: ep.Name, Readings: rs, Received: time.Now(), Size: size}); err != nil {
		o.log.Debug("readings after the endpoint's batcher closed", "endpoint", ep.Name, "readings", len(rs), "err", err)
	}
}

// Frame implements runner.FrameOutput.
func (o *output) Frame(ep adapters.Endpoint, frame []byte, _ time.Time) {
	o.drift.Frame(ep.Protocol, frame)
}

// Disconnected implements runner.Output: the partial batch goes out.
func (o *output) Disconnected(ctx context.Context, ep adapters.Endpoint) {
	o.endpoint(ep).b.Flush(ctx, "disconnect")
}

// Stopped implements runner.Output.
func (o *output) Stopped(ep adapters.Endpoint) {
	o.mu.Lock()
	eo := o.endpoints[ep.UUID]
	delete(o.endpoints, ep.UUID)
	o.mu.Unlock()
	if eo != nil {
		_ = eo.b.Close(context.Background())
	}
}

// running returns the endpoints that have produced output and still run.
func (o *output) running() []*endpointOut {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make([]*endpointOut, 0, len(o.endpoints))
	for _, eo := range o.endpoints {
		out = append(out, eo)
	}
	return out
}

func (o *output) closeAll() {
	o.mu.Lock()
	all := o.endpoints
	o.endpoints = map[string]*endpointOut{}
	o.mu.Unlock()
	for _, eo := range all {
		_ = eo.b.Close(context.Background())
	}
}
