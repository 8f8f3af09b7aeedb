package simulation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Errors of the orchestrator, wrapped with the scenario's name.
var (
	ErrUnknownScenario = errors.New("unknown scenario")
	ErrRunning         = errors.New("scenario is running already")
	ErrNotRunning      = errors.New("scenario is not running")
	// ErrNotReady: the agent's endpoints are not running (it initialises
	// or reboots).
	ErrNotReady = errors.New("the agent's endpoints are not running yet")
	// ErrHalted: the cloud's run state stops every endpoint.
	ErrHalted = errors.New("the run state stops every endpoint")
)

// DefaultSeed is the seed of a scenario started without one.
const DefaultSeed = 1

// Options are what the orchestrator acts on: the agent's endpoint runner
// through three functions, so this package knows nothing of the runner.
type Options struct {
	Driver *Driver
	// Apply starts (or restarts) an endpoint in the runner.
	Apply func(adapters.Endpoint) error
	// Remove stops an endpoint and waits for it.
	Remove func(uuid string)
	// Running reports whether an endpoint runs.
	Running func(uuid string) bool
	// Halted reports whether the cloud's run state stops the endpoints;
	// nil never does.
	Halted func() bool
	// Autostart is a scenario to start the first time the service
	// starts (all-in-one --simulate); empty starts none.
	Autostart string
	Log       *slog.Logger
	Now       func() time.Time
}

// Orchestrator starts and stops scenarios. Their devices are endpoints
// kept in memory, not in the store: they never outlive the process, so a
// restart with simulation mode off cannot leave one polling. It is a
// lifecycle service of the agent's group, after the adapters phase: its
// Start puts the running scenarios' devices back into the runner after a
// soft reboot, its Stop takes them out before the runner stops.
type Orchestrator struct {
	o Options

	mu        sync.Mutex
	active    bool
	autoDone  bool
	scenarios map[string]*running
}

// running is a started scenario.
type running struct {
	started time.Time
	seed    uint64
	devices []adapters.Endpoint
}

// NewOrchestrator validates o; it does no I/O.
func NewOrchestrator(o Options) (*Orchestrator, error) {
	if o.Driver == nil || o.Apply == nil || o.Remove == nil || o.Running == nil {
		panic("BUG: simulation.Options needs Driver, Apply, Remove and Running")
	}
	if o.Autostart != "" {
		if _, ok := Lookup(o.Autostart); !ok {
			return nil, fmt.Errorf("%w %q (one of %v)", ErrUnknownScenario, o.Autostart, Names())
		}
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Orchestrator{o: o, scenarios: map[string]*running{}}, nil
}

// Name implements lifecycle.Service.
func (s *Orchestrator) Name() string { return "simulation" }

// Start puts the running scenarios' devices into the runner, and starts
// the autostart scenario the first time.
func (s *Orchestrator) Start(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = true
	for name, r := range s.scenarios {
		if err := s.applyAll(r.devices); err != nil {
			s.o.Log.Error("simulation scenario not resumed", "scenario", name, "err", err)
		}
	}
	if s.o.Autostart != "" && !s.autoDone {
		s.autoDone = true
		if _, err := s.startLocked(s.o.Autostart, DefaultSeed); err != nil {
			s.o.Log.Error("simulation scenario not started", "scenario", s.o.Autostart, "err", err)
		}
	}
	return nil
}

// Run implements lifecycle.Service.
func (s *Orchestrator) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Stop takes the devices out of the runner; the scenarios stay started
// and resume at the next Start.
func (s *Orchestrator) Stop(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = false
	for _, r := range s.scenarios {
		for _, ep := range r.devices {
			s.o.Remove(ep.UUID)
		}
	}
	return nil
}

// applyAll starts eps; on a failure the ones started are removed.
func (s *Orchestrator) applyAll(eps []adapters.Endpoint) error {
	for i, ep := range eps {
		if err := s.o.Apply(ep); err != nil {
			for _, done := range eps[:i] {
				s.o.Remove(done.UUID)
			}
			return err
		}
	}
	return nil
}

// StartScenario starts a scenario's devices with seed.
func (s *Orchestrator) StartScenario(_ context.Context, name string, seed uint64) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.startLocked(name, seed)
}

func (s *Orchestrator) startLocked(name string, seed uint64) (Status, error) {
	sc, ok := Lookup(name)
	switch {
	case !ok:
		return Status{}, fmt.Errorf("%w %q (one of %v)", ErrUnknownScenario, name, Names())
	case s.scenarios[name] != nil:
		return Status{}, fmt.Errorf("%s: %w", name, ErrRunning)
	case !s.active:
		return Status{}, ErrNotReady
	case s.o.Halted != nil && s.o.Halted():
		return Status{}, ErrHalted
	}
	r := &running{started: s.o.Now(), seed: seed, devices: devicesOf(sc, seed)}
	if err := s.applyAll(r.devices); err != nil {
		return Status{}, fmt.Errorf("start scenario %s: %w", name, err)
	}
	s.scenarios[name] = r
	s.o.Log.Info("simulation scenario started", "scenario", name, "devices", len(r.devices), "seed", seed)
	return s.status(sc), nil
}

// devicesOf builds a scenario's endpoints. Their MQTT topic starts with
// the protocol, so the topic path names it as the payload does.
func devicesOf(sc Scenario, seed uint64) []adapters.Endpoint {
	eps := make([]adapters.Endpoint, sc.Devices)
	for i := range eps {
		conn, err := json.Marshal(Config{Scenario: sc.Name, Seed: seed + uint64(i)})
		if err != nil {
			panic("BUG: " + err.Error())
		}
		dps := make([]adapters.DataPoint, len(sc.Signals))
		for j, sg := range sc.Signals {
			dps[j] = adapters.DataPoint{Name: sg.Name, Register: sg.Name, Unit: sg.Unit}
		}
		name := fmt.Sprintf("sim-%s-%d", sc.Name, i+1)
		eps[i] = adapters.Endpoint{UUID: codec.NewUUID().String(), Name: name, Protocol: Protocol,
			Connection: conn, PollIntervalMS: int(sc.PollInterval / time.Millisecond), Enabled: true,
			DataPoints: dps, Metadata: map[string]any{"simulation": sc.Name},
			MQTTTopic: Protocol + "/" + name}
	}
	return eps
}

// StopScenario stops a scenario's devices.
func (s *Orchestrator) StopScenario(_ context.Context, name string) (Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc, ok := Lookup(name)
	switch {
	case !ok:
		return Status{}, fmt.Errorf("%w %q (one of %v)", ErrUnknownScenario, name, Names())
	case s.scenarios[name] == nil:
		return Status{}, fmt.Errorf("%s: %w", name, ErrNotRunning)
	}
	s.stopLocked(name)
	return s.status(sc), nil
}

func (s *Orchestrator) stopLocked(name string) {
	for _, ep := range s.scenarios[name].devices {
		s.o.Remove(ep.UUID)
		s.o.Driver.Forget(ep.UUID)
	}
	delete(s.scenarios, name)
	s.o.Log.Info("simulation scenario stopped", "scenario", name)
}

// StopAll stops every running scenario and returns their names.
func (s *Orchestrator) StopAll(context.Context) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopped := []string{}
	for _, sc := range Scenarios {
		if s.scenarios[sc.Name] != nil {
			s.stopLocked(sc.Name)
			stopped = append(stopped, sc.Name)
		}
	}
	return stopped
}

// Status is one scenario as GET /v1/simulation/status shows it.
type Status struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Running     bool       `json:"running"`
	StartedAt   *time.Time `json:"started_at"`
	Seed        *uint64    `json:"seed"`
	Devices     []Device   `json:"devices"`
	// Readings is how many readings the scenario's generators produced
	// since it started; the runner's BAD readings of failed connection
	// attempts during an outage are not among them.
	Readings int64 `json:"readings"`
}

// Device is one simulated device of a running scenario. Running is false
// when something else stopped it (the cloud's run state, DELETE
// /v1/endpoints); stopping and starting the scenario brings it back.
type Device struct {
	Name     string `json:"name"`
	UUID     string `json:"uuid"`
	Running  bool   `json:"running"`
	Readings int64  `json:"readings"`
}

// Statuses lists every scenario, in catalogue order.
func (s *Orchestrator) Statuses(context.Context) []Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Status, len(Scenarios))
	for i, sc := range Scenarios {
		out[i] = s.status(sc)
	}
	return out
}

// status is sc's Status; s.mu is held.
func (s *Orchestrator) status(sc Scenario) Status {
	st := Status{Name: sc.Name, Description: sc.Description, Devices: []Device{}}
	r := s.scenarios[sc.Name]
	if r == nil {
		return st
	}
	started, seed := r.started, r.seed
	st.Running, st.StartedAt, st.Seed = true, &started, &seed
	for _, ep := range r.devices {
		d := Device{Name: ep.Name, UUID: ep.UUID, Running: s.o.Running(ep.UUID), Readings: s.o.Driver.Produced(ep.UUID)}
		st.Readings += d.Readings
		st.Devices = append(st.Devices, d)
	}
	return st
}
