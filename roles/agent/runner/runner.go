// Package runner runs the agent's protocol endpoints: one goroutine per
// enabled endpoint that connects through the endpoint's adapter, polls it
// every poll_interval (or lets a listening adapter push), turns a lost
// connection into BAD readings, reconnects with jittered backoff and keeps
// the live health, last values and read statistics the API reports. What
// is the same for every protocol lives here, so an adapter only speaks its
// wire protocol.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/prometheus/client_golang/prometheus"
)

// Output receives what the endpoints produce. Calls for one endpoint come
// from one goroutine, in order.
type Output interface {
	// Readings delivers the readings of one poll or one pushed frame.
	Readings(ctx context.Context, ep adapters.Endpoint, readings []adapters.Reading)
	// Disconnected says the endpoint lost its connection, so a partial
	// batch can be flushed.
	Disconnected(ctx context.Context, ep adapters.Endpoint)
	// Stopped says the endpoint no longer runs (deleted, disabled,
	// replaced or the runner stopped).
	Stopped(ep adapters.Endpoint)
}

// FrameOutput is an Output that also sees the raw frames of the
// endpoints whose adapters frame a byte stream (adapters.Env.Frame).
type FrameOutput interface {
	Frame(ep adapters.Endpoint, frame []byte, received time.Time)
}

// ErrUnknownProtocol is wrapped when no driver serves an endpoint's protocol.
var ErrUnknownProtocol = errors.New("unknown protocol")

// ErrNotRunning is returned for an endpoint or device that does not run.
var ErrNotRunning = errors.New("not running")

// ErrUnsupported is returned when an adapter lacks an operation.
var ErrUnsupported = errors.New("not supported by the adapter")

// Runner owns the running endpoints. It is safe for concurrent use.
type Runner struct {
	drivers map[string]adapters.Driver
	out     Output
	log     *slog.Logger
	m       *metrics

	// applyMu serialises Apply, Remove and StopAll, which wait for
	// goroutines, so mu is never held while waiting.
	applyMu sync.Mutex
	mu      sync.Mutex
	base    context.Context
	running map[string]*endpointRun // by UUID
}

// New builds a runner for the given drivers. reg may be nil.
func New(drivers []adapters.Driver, out Output, log *slog.Logger, reg prometheus.Registerer) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ds := make(map[string]adapters.Driver, len(drivers))
	for _, d := range drivers {
		if _, dup := ds[d.Protocol()]; dup {
			panic("BUG: two drivers for protocol " + d.Protocol())
		}
		ds[d.Protocol()] = d
	}
	return &Runner{drivers: ds, out: out, log: log, m: newMetrics(reg), running: map[string]*endpointRun{}}
}

// Protocols lists the protocols the runner has drivers for.
func (r *Runner) Protocols() []string {
	ps := make([]string, 0, len(r.drivers))
	for p := range r.drivers {
		ps = append(ps, p)
	}
	sort.Strings(ps)
	return ps
}

// Validate checks an endpoint with its protocol's driver, without I/O.
func (r *Runner) Validate(ep adapters.Endpoint) error {
	d, ok := r.drivers[ep.Protocol]
	if !ok {
		return &adapters.FieldError{Field: "protocol", Msg: fmt.Sprintf("unknown protocol %q (supported: %v)", ep.Protocol, r.Protocols())}
	}
	return d.Validate(ep)
}

// Start sets the context every endpoint goroutine derives from; endpoints
// applied before Start wait for it.
func (r *Runner) Start(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.base = ctx
}

// Apply makes the running state match ep: a disabled endpoint is stopped,
// an enabled one is (re)started with its new configuration.
func (r *Runner) Apply(ep adapters.Endpoint) error {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.remove(ep.UUID)
	if !ep.Enabled {
		return nil
	}
	d, ok := r.drivers[ep.Protocol]
	if !ok {
		return fmt.Errorf("endpoint %s: %w %q", ep.Name, ErrUnknownProtocol, ep.Protocol)
	}
	env := adapters.Env{Logger: r.log.With("endpoint", ep.Name, "protocol", ep.Protocol)}
	if fo, ok := r.out.(FrameOutput); ok {
		env.Frame = func(frame []byte, received time.Time) { fo.Frame(ep, frame, received) }
	}
	a, err := d.New(ep, env)
	if err != nil {
		return fmt.Errorf("endpoint %s: %w", ep.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.base == nil {
		return errors.New("BUG: runner.Apply before Start")
	}
	e := newEndpointRun(ep, a, r.out, r.m, r.log.With("endpoint", ep.Name))
	r.running[ep.UUID] = e
	e.start(r.base)
	return nil
}

// Remove stops an endpoint at once and waits for its goroutine to end.
func (r *Runner) Remove(uuid string) {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.remove(uuid)
}

func (r *Runner) remove(uuid string) {
	r.mu.Lock()
	e := r.running[uuid]
	delete(r.running, uuid)
	r.mu.Unlock()
	if e != nil {
		e.stop()
	}
}

// StopAll stops every endpoint and waits for them.
func (r *Runner) StopAll() {
	r.applyMu.Lock()
	defer r.applyMu.Unlock()
	r.mu.Lock()
	all := r.running
	r.running = map[string]*endpointRun{}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, e := range all {
		wg.Go(e.stop)
	}
	wg.Wait()
}

// Health returns the live health of a running endpoint.
func (r *Runner) Health(uuid string) (Health, bool) {
	r.mu.Lock()
	e := r.running[uuid]
	r.mu.Unlock()
	if e == nil {
		return Health{}, false
	}
	return e.health(), true
}

// Connection is an endpoint's connection state and counters, for its
// heartbeat.
type Connection struct {
	State string
	// ReconnectAttempts counts connection attempts that followed a failed
	// attempt or a lost connection since the endpoint started.
	ReconnectAttempts uint64
	LastConnected     time.Time
}

// Connection returns the connection state of a running endpoint.
func (r *Runner) Connection(uuid string) (Connection, bool) {
	r.mu.Lock()
	e := r.running[uuid]
	r.mu.Unlock()
	if e == nil {
		return Connection{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return Connection{State: e.state, ReconnectAttempts: uint64(e.connectTotal + e.losses), LastConnected: e.connectedAt}, true
}

func (r *Runner) byProtocol(protocol string) []*endpointRun {
	r.mu.Lock()
	defer r.mu.Unlock()
	var es []*endpointRun
	for _, e := range r.running {
		if protocol == "" || e.ep.Protocol == protocol {
			es = append(es, e)
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].ep.Name < es[j].ep.Name })
	return es
}

// HasProtocol reports whether a driver serves protocol.
func (r *Runner) HasProtocol(protocol string) bool {
	_, ok := r.drivers[protocol]
	return ok
}

// Devices summarises the running endpoints of a protocol, all when
// protocol is empty. One endpoint is one device.
func (r *Runner) Devices(protocol string) []DeviceSummary {
	out := []DeviceSummary{}
	for _, e := range r.byProtocol(protocol) {
		out = append(out, e.summary())
	}
	return out
}

func (r *Runner) device(protocol, name string) (*endpointRun, error) {
	for _, e := range r.byProtocol(protocol) {
		if e.ep.Name == name {
			return e, nil
		}
	}
	return nil, fmt.Errorf("no running %s device %q: %w", protocol, name, ErrNotRunning)
}

// Device returns the detail of one running device.
func (r *Runner) Device(protocol, name string) (DeviceDetail, error) {
	e, err := r.device(protocol, name)
	if err != nil {
		return DeviceDetail{}, err
	}
	return e.detail(), nil
}

// DeviceMetrics returns the read statistics of one device; ErrUnsupported
// when its adapter is not polled (its values are pushed, so there is no
// poll latency or read rate to report).
func (r *Runner) DeviceMetrics(protocol, name string) (Metrics, error) {
	e, err := r.device(protocol, name)
	if err != nil {
		return Metrics{}, err
	}
	m, ok := e.metrics()
	if !ok {
		return Metrics{}, fmt.Errorf("metrics of %s device %q: %w", protocol, name, ErrUnsupported)
	}
	return m, nil
}

// ProtocolMetrics returns the metrics of every polled device of a
// protocol; ErrUnsupported when none is polled.
func (r *Runner) ProtocolMetrics(protocol string) ([]Metrics, error) {
	out := []Metrics{}
	es := r.byProtocol(protocol)
	for _, e := range es {
		if m, ok := e.metrics(); ok {
			out = append(out, m)
		}
	}
	if len(out) == 0 && len(es) > 0 {
		return nil, fmt.Errorf("metrics of %s: %w", protocol, ErrUnsupported)
	}
	return out, nil
}

// Write writes a value to a running device whose adapter can write.
func (r *Runner) Write(ctx context.Context, protocol, name, register string, value any) (any, error) {
	e, err := r.device(protocol, name)
	if err != nil {
		return nil, err
	}
	w, ok := e.adapter.(adapters.Writer)
	if !ok {
		return nil, fmt.Errorf("write to %s device %q: %w", protocol, name, ErrUnsupported)
	}
	return w.Write(ctx, register, value)
}
