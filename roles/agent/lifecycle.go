package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// Lifecycle states (docs/agent.md, section Lifecycle).
const (
	StateInitializing = "INITIALIZING"
	StateRunning      = "RUNNING"
	StateStopping     = "STOPPING"
)

// The six init phases, in the order the health report lists them. Each is
// a lifecycle service of the agent's group (see Agent.services); the group
// starts publishing before the adapters, so an endpoint's first batch
// never waits for routes, and stops them after, so the endpoints' last
// batches still find their destinations.
const (
	PhaseConfig     = "config"
	PhaseStore      = "store"
	PhaseIdentity   = "identity"
	PhaseAdapters   = "adapters"
	PhasePublishing = "publishing"
	PhaseAPI        = "api"
)

var phaseOrder = []string{PhaseConfig, PhaseStore, PhaseIdentity, PhaseAdapters, PhasePublishing, PhaseAPI}

// phaseRetry is how long the agent waits before it starts the group again
// after a phase failed.
const phaseRetry = 5 * time.Second

// PhaseResult records one init phase.
type PhaseResult = httpapi.Phase

// Reasons the group is stopped for.
var (
	errReboot = errors.New("soft reboot")
	// errShutdown ends Run when POST /v1/shutdown arrives.
	errShutdown = fmt.Errorf("agent: %w", lifecycle.ErrShutdownRequested)
)

// Agent is the agent's lifecycle: one service of the role whose Run runs
// the group of its init phases and background loops, again after a soft
// reboot and, after phaseRetry, after a phase failed. Nothing of the group
// outlives one run of it.
type Agent struct {
	log *slog.Logger
	// p are the parts the group's services start and stop.
	p     *parts
	grace time.Duration
	// releasePages: see Options.ReleaseStartupPages.
	releasePages bool
	health       *healthCheck

	mu     sync.Mutex
	state  string
	phases []PhaseResult
	// stopGroup ends the running group with its cause; nil between runs.
	stopGroup context.CancelCauseFunc
	shutdown  chan struct{}
	// changes tells the page releaser of configuration writes.
	changes chan struct{}
}

func newLifecycle(log *slog.Logger, grace time.Duration, releasePages bool) *Agent {
	a := &Agent{log: log, grace: grace, releasePages: releasePages, state: StateInitializing, shutdown: make(chan struct{}, 1),
		changes: make(chan struct{}, 1)}
	a.resetPhases()
	return a
}

// Name implements lifecycle.Service.
func (a *Agent) Name() string { return "agent" }

// Start implements lifecycle.Service; the init phases run in Run, so the
// API can answer readiness probes while they do.
func (a *Agent) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service. Run has stopped the group by then.
func (a *Agent) Stop(context.Context) error {
	a.setState(StateStopping)
	return nil
}

// Run runs the group until ctx ends, a shutdown is requested or a phase
// fails for good (a *fatalError).
func (a *Agent) Run(ctx context.Context) error {
	for {
		err := a.runGroup(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var fe *fatalError
		switch {
		case errors.Is(err, lifecycle.ErrShutdownRequested):
			return errShutdown
		case errors.As(err, &fe):
			return err
		case errors.Is(err, errReboot):
			a.log.Info("soft reboot")
			a.resetPhases()
			continue
		}
		a.setState(StateInitializing)
		if se := (*lifecycle.ServiceError)(nil); !errors.As(err, &se) || se.Phase != "start" {
			// A phase that failed to start was logged when it failed.
			a.log.Error("agent services stopped; starting them again", "err", err, "retry_in", phaseRetry)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.shutdown:
			return errShutdown
		case <-time.After(phaseRetry):
		}
	}
}

// runGroup runs the services once and returns why they stopped: the
// cause that stopped them (errReboot, errShutdown) or their failure.
func (a *Agent) runGroup(ctx context.Context) error {
	gctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	a.mu.Lock()
	a.stopGroup = stop
	a.mu.Unlock()
	select {
	case <-a.shutdown:
		return errShutdown
	default:
	}
	err := lifecycle.Run(gctx, lifecycle.Options{Logger: a.log, GracePeriod: a.grace, OnStart: a.started}, a.p.services()...)
	a.mu.Lock()
	a.stopGroup = nil
	a.mu.Unlock()
	if cause := context.Cause(gctx); gctx.Err() != nil && ctx.Err() == nil && !errors.Is(cause, context.Canceled) {
		if err != nil {
			a.log.Warn("agent services stopped with errors", "err", err)
		}
		return cause
	}
	return err
}

// started is lifecycle.Options.OnStart: it records each phase's start.
// Once the last phase passed, the agent is RUNNING.
func (a *Agent) started(name string, took time.Duration, err error) {
	if !slices.Contains(phaseOrder, name) {
		return // a loop, not a phase
	}
	a.mu.Lock()
	for i := range a.phases {
		p := &a.phases[i]
		if p.Name != name {
			continue
		}
		p.Attempts++
		p.DurationMS = float64(took.Microseconds()) / 1000
		p.Healthy, p.Error = err == nil, ""
		if err != nil {
			p.Error = err.Error()
		}
	}
	ready := err == nil && name == PhaseAPI
	if ready {
		a.state = StateRunning
	}
	a.mu.Unlock()
	var fe *fatalError
	switch {
	case errors.As(err, &fe):
		// Run ends the agent with it, and the role logs it once.
	case err != nil:
		a.log.Error("init phase failed", "phase", name, "err", err, "retry_in", phaseRetry)
	case ready:
		a.log.Info("agent running")
		if a.releasePages {
			releaseExecutablePages(a.log, "start-up")
		}
	default:
		a.log.Info("init phase done", "phase", name, "duration", took.Round(time.Microsecond))
	}
}

func (a *Agent) resetPhases() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.phases = make([]PhaseResult, len(phaseOrder))
	for i, n := range phaseOrder {
		a.phases[i] = PhaseResult{Name: n}
	}
}

func (a *Agent) setState(s string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.state = s
}

// snapshot returns the state and a copy of the phase results.
func (a *Agent) snapshot() (string, []PhaseResult) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state, append([]PhaseResult(nil), a.phases...)
}

// Reboot implements httpapi.Lifecycle: the group stops and runs again.
// Only a RUNNING agent reboots.
func (a *Agent) Reboot() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != StateRunning || a.stopGroup == nil {
		return a.state, false
	}
	state := a.state
	// INITIALIZING at once, so readiness stops answering 200 before
	// this request is answered.
	a.state = StateInitializing
	a.stopGroup(errReboot)
	return state, true
}

// Shutdown implements httpapi.Lifecycle.
func (a *Agent) Shutdown() {
	select {
	case a.shutdown <- struct{}{}:
	default:
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopGroup != nil {
		a.stopGroup(errShutdown)
	}
}

// Health implements httpapi.Lifecycle.
func (a *Agent) Health(ctx context.Context) httpapi.Health {
	state, phases := a.snapshot()
	return a.health.check(ctx, state, phases)
}

// storeCorrupt follows a corruption the store confirmed while running:
// a soft reboot reopens the store, which moves the file aside and
// salvages it, rather than failing every flush on the same page.
func (a *Agent) storeCorrupt(reason string) {
	if state, ok := a.Reboot(); !ok {
		a.log.Error("agent store corrupt; it is reopened at the next start", "reason", reason, "state", state)
		return
	}
	a.log.Error("agent store corrupt; reopening it", "reason", reason)
}

// releaseExecutablePages drops the executable's resident pages (see
// sysinfo.ReleaseExecutablePages); a failure only costs memory. after
// names the work whose pages go: start-up, or one-off work since.
func releaseExecutablePages(log *slog.Logger, after string) {
	before, _ := sysinfo.ReadProcess("/proc", 0)
	n, err := sysinfo.ReleaseExecutablePages()
	if err != nil {
		log.Debug("release executable pages", "after", after, "err", err)
		return
	}
	now, _ := sysinfo.ReadProcess("/proc", 0)
	log.Debug("released executable pages", "after", after, "mapped_mb", n>>20, "rss_before_mb", before.RSSBytes>>20, "rss_after_mb", now.RSSBytes>>20)
}

// Re-release times: one-off work after start-up (configuring endpoints
// over the API, provisioning, applying a target state) faults its code in
// 64 KiB at a time and would keep it resident for good. Releasing again
// 10 s and 1 min after start-up, when such work has usually settled, then
// every 10 min, keeps the resident set to the pages the agent keeps
// using; those fault back at once, a few MB read from the page cache or
// the disk. Configuration writes over the API are such work at any time:
// pageReleaseSettle after the last of a burst, the pages are released
// too.
var pageReleaseAfter = []time.Duration{10 * time.Second, 50 * time.Second}

const (
	pageReleaseEvery  = 10 * time.Minute
	pageReleaseSettle = 15 * time.Second
)

// configChanged tells the page releaser that the API changed something;
// it never blocks.
func (a *Agent) configChanged() {
	select {
	case a.changes <- struct{}{}:
	default:
	}
}

// pageReleaser releases the executable's pages again while the agent
// runs (Options.ReleaseStartupPages): on the schedule above, and once
// configuration writes have settled.
func pageReleaser(log *slog.Logger, changes <-chan struct{}) lifecycle.Service {
	return &lifecycle.Funcs{ServiceName: "page-release", RunFunc: func(ctx context.Context) error {
		settle := time.NewTimer(time.Hour)
		settle.Stop()
		defer settle.Stop()
		next := func(i int) *time.Timer {
			if i < len(pageReleaseAfter) {
				return time.NewTimer(pageReleaseAfter[i])
			}
			return time.NewTimer(pageReleaseEvery)
		}
		t := next(0)
		defer func() { t.Stop() }()
		for i := 1; ; {
			select {
			case <-ctx.Done():
				return nil
			case <-changes:
				settle.Reset(pageReleaseSettle)
			case <-settle.C:
				releaseExecutablePages(log, "configuration changes")
			case <-t.C:
				releaseExecutablePages(log, "one-off work")
				t = next(i)
				i++
			}
		}
	}}
}
