// Package simulation is the agent's simulation mode (docs/simulation.md):
// a protocol driver, "simulated", whose devices generate named scenarios
// (steady, drift, fault, outage, schema-drift) deterministically from a
// seed, and an orchestrator that starts and stops a scenario's devices
// as runtime endpoints. Simulated devices run in the same endpoint
// runner as real ones, so batching, anomaly and drift detection and
// publishing see them exactly as they see a Modbus device; every reading
// reaches the cloud with protocol "simulated", the tag the cloud tells
// them apart by.
package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Protocol is the endpoint "protocol" value of simulated devices.
const Protocol = "simulated"

// Config is the decoded "connection" object of a simulated endpoint.
type Config struct {
	// Scenario names the generator (Scenarios).
	Scenario string `json:"scenario"`
	// Seed makes the generated values repeatable.
	Seed uint64 `json:"seed"`
}

// ParseConfig decodes a connection object strictly; every problem is an
// *adapters.FieldError naming connection.<key>, joined.
func ParseConfig(raw json.RawMessage) (Config, Scenario, error) {
	var c Config
	errs, object := adapters.DecodeObject(raw, "connection", map[string]any{"scenario": &c.Scenario, "seed": &c.Seed})
	if !object {
		return c, Scenario{}, errs[0]
	}
	fail := func(field, format string, args ...any) {
		errs = append(errs, adapters.Fieldf("connection."+field, format, args...))
	}
	sc, ok := Lookup(c.Scenario)
	switch {
	case c.Scenario == "":
		fail("scenario", "is required (one of %s)", strings.Join(Names(), ", "))
	case !ok:
		fail("scenario", "unknown scenario %q (one of %s)", c.Scenario, strings.Join(Names(), ", "))
	}
	return c, sc, errors.Join(errs...)
}

// Driver builds simulated adapters and counts what each endpoint's
// generator produced, for the orchestrator's status. Use NewDriver.
type Driver struct {
	now func() time.Time

	mu       sync.Mutex
	produced map[string]*atomic.Int64 // by endpoint UUID
}

// NewDriver returns a driver; now is the clock of outages, time.Now when
// nil.
func NewDriver(now func() time.Time) *Driver {
	if now == nil {
		now = time.Now
	}
	return &Driver{now: now, produced: map[string]*atomic.Int64{}}
}

// Protocol returns "simulated".
func (*Driver) Protocol() string { return Protocol }

// Validate checks the connection and the data points without any I/O: a
// data point's register names one of the scenario's signals.
func (*Driver) Validate(ep adapters.Endpoint) error {
	_, _, err := compile(ep)
	return err
}

func compile(ep adapters.Endpoint) (Config, Scenario, error) {
	var errs []error
	if ep.Protocol != "" && ep.Protocol != Protocol {
		errs = append(errs, adapters.Fieldf("protocol", "%q is not %q", ep.Protocol, Protocol))
	}
	cfg, sc, err := ParseConfig(ep.Connection)
	errs = append(errs, err)
	if err == nil {
		seen := map[string]bool{}
		for i, dp := range ep.DataPoints {
			if seen[dp.Name] {
				errs = append(errs, adapters.Fieldf(fmt.Sprintf("data_points[%d].name", i), "duplicate data point %q", dp.Name))
			}
			seen[dp.Name] = true
			if !sc.hasSignal(dp.Register) {
				errs = append(errs, adapters.Fieldf(fmt.Sprintf("data_points[%d].register", i),
					"%q is no signal of scenario %s (one of %s)", dp.Register, sc.Name, strings.Join(sc.signalNames(), ", ")))
			}
		}
	}
	return cfg, sc, errors.Join(errs...)
}

// New builds an adapter for a validated endpoint; it does not connect.
func (d *Driver) New(ep adapters.Endpoint, env adapters.Env) (adapters.Adapter, error) {
	cfg, sc, err := compile(ep)
	if err != nil {
		return nil, fmt.Errorf("simulated endpoint %q: %w", ep.Name, err)
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Adapter{ep: ep, sc: sc, gen: sc.NewGenerator(cfg.Seed), frame: env.Frame, now: d.now,
		produced: d.counter(ep.UUID), log: log.With("protocol", Protocol, "endpoint", ep.Name)}, nil
}

// counter is the endpoint's count of produced readings; an endpoint
// restarted (a reboot, a PATCH) keeps counting on it.
func (d *Driver) counter(uuid string) *atomic.Int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.produced[uuid]
	if c == nil {
		c = &atomic.Int64{}
		d.produced[uuid] = c
	}
	return c
}

// Produced is how many readings the endpoint's generator produced.
func (d *Driver) Produced(uuid string) int64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	if c := d.produced[uuid]; c != nil {
		return c.Load()
	}
	return 0
}

// Forget drops the endpoint's count, once it no longer runs.
func (d *Driver) Forget(uuid string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.produced, uuid)
}

// Adapter is one simulated device. The runner calls it from one
// goroutine; the mutex only guards against a stray concurrent Close.
type Adapter struct {
	ep       adapters.Endpoint
	sc       Scenario
	frame    func([]byte, time.Time)
	now      func() time.Time
	produced *atomic.Int64
	log      *slog.Logger

	mu        sync.Mutex
	gen       Generator
	connected bool
	downUntil time.Time
}

// errPeerGone and errRefused are what a lost and a refusing TCP peer
// look like, so Classify gives DEVICE_OFFLINE and CONNECTION_REFUSED and
// the runner's outage path runs as for a real device.
var (
	errPeerGone = &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	errRefused  = &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
)

// Connect fails while the device is down, like a refused dial.
func (a *Adapter) Connect(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.now().Before(a.downUntil) {
		return fmt.Errorf("simulated device %s is down: %w", a.ep.Name, errRefused)
	}
	a.connected = true
	return nil
}

// Poll produces one frame: the raw JSON frame goes to the drift detector
// the way an MQTT frame does, then the readings of the data points.
func (a *Adapter) Poll(ctx context.Context) ([]adapters.Reading, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	at := a.now()
	if !a.connected {
		return nil, fmt.Errorf("simulated device %s: %w", a.ep.Name, errPeerGone)
	}
	f := a.gen.Next()
	if f.Down {
		a.connected = false
		a.downUntil = at.Add(a.sc.Outage)
		err := fmt.Errorf("simulated device %s went away: %w", a.ep.Name, errPeerGone)
		rs := make([]adapters.Reading, len(a.ep.DataPoints))
		for i, dp := range a.ep.DataPoints {
			rs[i] = adapters.BadReading(a.ep.Name, a.ep.UUID, dp, at, err)
		}
		a.produced.Add(int64(len(rs)))
		return rs, err
	}
	if a.frame != nil {
		if b, err := frameJSON(f); err == nil {
			a.frame(b, at)
		}
	}
	rs := readings(a.ep, f, at)
	a.produced.Add(int64(len(rs)))
	return rs, nil
}

// Close implements adapters.Adapter.
func (a *Adapter) Close() error {
	a.mu.Lock()
	a.connected = false
	a.mu.Unlock()
	return nil
}

// errFault is the detail of a generated BAD reading.
var errFault = errors.New("simulated fault")

// readings maps a frame onto the endpoint's data points: a data point
// whose signal vanished from the frame has no reading, as a field
// missing from an MQTT frame has none.
func readings(ep adapters.Endpoint, f Frame, at time.Time) []adapters.Reading {
	rs := make([]adapters.Reading, 0, len(ep.DataPoints))
	for _, dp := range ep.DataPoints {
		i := sampleOf(f, dp.Register)
		if i < 0 {
			continue
		}
		s := f.Samples[i]
		if s.Code != "" {
			rs = append(rs, adapters.BadReading(ep.Name, ep.UUID, dp, at, adapters.WithCode(s.Code, errFault)))
			continue
		}
		rs = append(rs, adapters.Reading{DeviceName: ep.Name, DeviceID: ep.UUID, Metric: dp.Name,
			Value: round3(s.Value * dp.ScaleOr1()), Unit: dp.Unit, Timestamp: at, Quality: adapters.Good})
	}
	return rs
}

func sampleOf(f Frame, signal string) int {
	for i, s := range f.Samples {
		if s.Signal == signal {
			return i
		}
	}
	return -1
}

// frameJSON is the device's frame as a JSON object of its signals; a BAD
// sample is null.
func frameJSON(f Frame) ([]byte, error) {
	m := make(map[string]any, len(f.Samples))
	for _, s := range f.Samples {
		if s.Code != "" {
			m[s.Signal] = nil
			continue
		}
		m[s.Signal] = s.Value
	}
	return json.Marshal(m)
}

// Interface guards.
var (
	_ adapters.Driver  = (*Driver)(nil)
	_ adapters.Adapter = (*Adapter)(nil)
)
