package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/edgeplat/edgeplat/roles/agent/simulation"
)

// withSimulation returns drivers with the simulated protocol's driver
// added when simulation mode is on; off, the protocol does not exist, so
// POST /v1/endpoints refuses it like any unknown protocol.
func withSimulation(on bool, drivers []adapters.Driver) ([]adapters.Driver, *simulation.Driver) {
	if !on {
		return drivers, nil
	}
	d := simulation.NewDriver(nil)
	return append(slices.Clip(drivers), d), d
}

// newSimulation builds the orchestrator over the runner, nil when the
// mode is off. Its devices go straight into the runner (docs/
// simulation.md, "Devices"): the orchestrator is told when the run
// state halts the endpoints and starts nothing then.
func newSimulation(d *simulation.Driver, run *runner.Runner, eps *endpointService, autostart string, log *slog.Logger) (*simulation.Orchestrator, error) {
	if d == nil {
		if autostart != "" {
			return nil, fmt.Errorf("scenario %q: simulation mode is off (agent.simulation_mode, SIMULATION_MODE)", autostart)
		}
		return nil, nil
	}
	return simulation.NewOrchestrator(simulation.Options{
		Driver: d, Apply: run.Apply, Remove: run.Remove,
		Running: func(uuid string) bool { _, ok := run.Health(uuid); return ok },
		Halted:  eps.stopped, Autostart: autostart, Log: log.With("component", "simulation"),
	})
}

// simulationAPI is httpapi.Simulation: the orchestrator with its errors
// as the API's statuses.
type simulationAPI struct{ o *simulation.Orchestrator }

// simulationRoutes is the orchestrator's API, a nil interface when the
// mode is off.
func simulationRoutes(o *simulation.Orchestrator) httpapi.Simulation {
	if o == nil {
		return nil
	}
	return simulationAPI{o}
}

func (s simulationAPI) StartScenario(ctx context.Context, name string, seed *uint64) (any, error) {
	sd := uint64(simulation.DefaultSeed)
	if seed != nil {
		sd = *seed
	}
	st, err := s.o.StartScenario(ctx, name, sd)
	return st, simulationError(err)
}

func (s simulationAPI) StopScenario(ctx context.Context, name string) (any, error) {
	st, err := s.o.StopScenario(ctx, name)
	return st, simulationError(err)
}

func (s simulationAPI) StopAll(ctx context.Context) []string { return s.o.StopAll(ctx) }

func (s simulationAPI) Statuses(ctx context.Context) any { return s.o.Statuses(ctx) }

func simulationError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, simulation.ErrUnknownScenario):
		return httpapi.Errorf(http.StatusNotFound, "scenario: %v", err)
	case errors.Is(err, simulation.ErrRunning), errors.Is(err, simulation.ErrNotRunning):
		return httpapi.Errorf(http.StatusConflict, "%v", err)
	case errors.Is(err, simulation.ErrHalted):
		return httpapi.Errorf(http.StatusConflict, "%v: %s", err, reasonRunStopped)
	case errors.Is(err, simulation.ErrNotReady):
		return fmt.Errorf("%w: %w", httpapi.ErrNotReady, err)
	}
	return err
}

// insertAfter puts svc into svcs right after the service named name.
func insertAfter(svcs []lifecycle.Service, name string, svc lifecycle.Service) []lifecycle.Service {
	i := slices.IndexFunc(svcs, func(s lifecycle.Service) bool { return s.Name() == name })
	if i < 0 {
		panic("BUG: no service " + name)
	}
	return slices.Insert(svcs, i+1, svc)
}
