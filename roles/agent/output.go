package agent

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// output is the runner's Output: one batcher per running endpoint, built
// from the endpoint's buffer settings, delivering to the publishing sink.
// Until the publishing layer lands, batches go to a debug log.
type output struct {
	log  *slog.Logger
	sink batch.Sink

	mu       sync.Mutex
	batchers map[string]*batch.Batcher // by endpoint UUID
}

func newOutput(log *slog.Logger) *output {
	return &output{log: log, sink: batch.LogSink{Logger: log.With("component", "batch")}, batchers: map[string]*batch.Batcher{}}
}

func (o *output) batcher(ep adapters.Endpoint) *batch.Batcher {
	o.mu.Lock()
	defer o.mu.Unlock()
	b := o.batchers[ep.UUID]
	if b == nil {
		b = batch.New(ep.Name, batch.OptionsFor(ep), o.sink)
		o.batchers[ep.UUID] = b
	}
	return b
}

// Readings implements runner.Output.
func (o *output) Readings(ctx context.Context, ep adapters.Endpoint, rs []adapters.Reading) {
	if err := o.batcher(ep).Add(ctx, batch.Message{Endpoint: ep.Name, Readings: rs, Received: time.Now()}); err != nil {
		o.log.Debug("readings after the endpoint's batcher closed", "endpoint", ep.Name, "readings", len(rs), "err", err)
	}
}

// Disconnected implements runner.Output: the partial batch goes out.
func (o *output) Disconnected(ctx context.Context, ep adapters.Endpoint) {
	o.batcher(ep).Flush(ctx, "disconnect")
}

// Stopped implements runner.Output.
func (o *output) Stopped(ep adapters.Endpoint) {
	o.mu.Lock()
	b := o.batchers[ep.UUID]
	delete(o.batchers, ep.UUID)
	o.mu.Unlock()
	if b != nil {
		_ = b.Close(context.Background())
	}
}

func (o *output) closeAll() {
	o.mu.Lock()
	all := o.batchers
	o.batchers = map[string]*batch.Batcher{}
	o.mu.Unlock()
	for _, b := range all {
		_ = b.Close(context.Background())
	}
}
