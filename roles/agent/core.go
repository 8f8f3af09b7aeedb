package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// Lifecycle states (edge-agent.md §3).
const (
	StateInitializing = "INITIALIZING"
	StateRunning      = "RUNNING"
	StateStopping     = "STOPPING"
)

// The six init phases, in order. A phase that fails is retried with the
// ones after it; the agent is ready once all have passed.
const (
	PhaseConfig     = "config"
	PhaseStore      = "store"
	PhaseIdentity   = "identity"
	PhaseAdapters   = "adapters"
	PhasePublishing = "publishing"
	PhaseAPI        = "api"
)

var phaseOrder = []string{PhaseConfig, PhaseStore, PhaseIdentity, PhaseAdapters, PhasePublishing, PhaseAPI}

// memorySampleInterval is how often the memory monitor samples the heap.
const memorySampleInterval = 30 * time.Second

// phaseRetry is how long the agent waits before retrying failed phases.
const phaseRetry = 5 * time.Second

// PhaseResult records one init phase.
type PhaseResult struct {
	Name       string  `json:"name"`
	Healthy    bool    `json:"healthy"`
	DurationMS float64 `json:"durationMs"`
	Error      string  `json:"error,omitempty"`
	Attempts   int     `json:"attempts"`
}

// Agent is the running agent: its state, its store and its endpoints.
type Agent struct {
	cfg    config.Agent
	log    *slog.Logger
	ring   *logring.Ring
	level  *slog.LevelVar
	rt     *rt.Runtime
	opts   Options
	runner *runner.Runner
	out    *output
	pub    *publish.Router
	cloudM *syncMetrics
	server interface{ Addr() string }

	sampler *sysinfo.Sampler
	memory  *sysinfo.MemoryMonitor
	logins  *httpx.Attempts
	started time.Time
	// bodyTimeout is lifecycle.http_body_timeout, for the local API.
	bodyTimeout time.Duration

	st      atomic.Pointer[store.Store]
	storeMu sync.RWMutex
	runDone chan struct{}
	// runCalled tells Stop whether to wait for Run.
	runCalled atomic.Bool
	// endpointsMu makes each endpoint change one step: the store write
	// and the runner change, so the running set always follows the last
	// stored state.
	endpointsMu sync.Mutex
	// provisionMu serialises provisioning calls.
	provisionMu sync.Mutex
	cloud       cloudState
	identity    atomic.Pointer[identity]
	settings    atomic.Pointer[Settings]
	// settingsMu serialises read-modify-write of the settings.
	settingsMu sync.Mutex

	mu       sync.Mutex
	state    string
	phases   []PhaseResult
	ctx      context.Context // Run's context, for the endpoint goroutines
	reboot   chan struct{}
	shutdown chan struct{}
}

type identity struct {
	UUID string
	Name string
}

func newAgent(cfg *config.Config, r *rt.Runtime, opts Options) (*Agent, error) {
	drivers := opts.Drivers
	if drivers == nil {
		drivers = DefaultDrivers()
	}
	ring := logring.New(logRingCapacity)
	level := new(slog.LevelVar)
	level.Set(slog.LevelInfo)
	log := ringLogger(r.Logger, ring, level).With("component", "agent")
	a := &Agent{
		cfg: cfg.Agent, bodyTimeout: cfg.Lifecycle.HTTPBodyTimeout, log: log, ring: ring, level: level, rt: r, opts: opts,
		sampler: sysinfo.NewSampler("/proc", cfg.Agent.DataDir),
		logins:  httpx.NewAttempts(loginFailuresPerUser, loginFailuresPerIP, loginWindow),
		started: time.Now(), state: StateInitializing,
		reboot: make(chan struct{}, 1), shutdown: make(chan struct{}, 1), runDone: make(chan struct{}),
	}
	a.memory = sysinfo.NewMemoryMonitor("/proc", memorySampleInterval, 0)
	a.pub = publish.New(log, a.sampler.CPUPercent)
	a.out = newOutput(log, a.pub)
	a.cloudM = newMetrics(r.Metrics, a.pub)
	a.runner = runner.New(drivers, a.out, log.With("component", "endpoints"), r.Metrics)
	def := defaultSettings()
	a.settings.Store(&def)
	a.resetPhases()
	return a, nil
}

// Name implements lifecycle.Service.
func (a *Agent) Name() string { return "agent" }

// Start implements lifecycle.Service; the init phases run in Run, so the
// API can answer readiness probes while they do.
func (a *Agent) Start(context.Context) error { return nil }

// errShutdown ends Run's phases when POST /v1/shutdown arrives.
var errShutdown = fmt.Errorf("agent: %w", lifecycle.ErrShutdownRequested)

// Run performs the init phases, then serves reboots until ctx ends or a
// shutdown is requested. It owns the store and the endpoints: Stop waits
// for Run to return before it releases them, so the two never race.
func (a *Agent) Run(ctx context.Context) error {
	a.runCalled.Store(true)
	defer close(a.runDone)
	if ctx.Err() != nil {
		return nil
	}
	a.mu.Lock()
	a.ctx = ctx
	a.mu.Unlock()
	a.runner.Start(ctx)
	go a.memory.Run(ctx)
	go a.syncLoop(ctx)
	go a.heartbeatLoop(ctx)
	for {
		if err := a.initialise(ctx); err != nil {
			if fe := (*fatalError)(nil); errors.Is(err, lifecycle.ErrShutdownRequested) || errors.As(err, &fe) {
				return err
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-a.shutdown:
			return errShutdown
		case <-a.reboot:
			a.log.Info("soft reboot")
			a.setState(StateInitializing)
			a.teardown()
			a.resetPhases()
		}
	}
}

// Stop implements lifecycle.Service.
func (a *Agent) Stop(ctx context.Context) error {
	a.setState(StateStopping)
	// Run is not called when a service after the agent failed to start.
	if a.runCalled.Load() {
		select {
		case <-a.runDone:
		case <-ctx.Done():
			return fmt.Errorf("agent: init phases still running at shutdown: %w", ctx.Err())
		}
	}
	a.teardown()
	return nil
}

// teardown stops the endpoints and closes the store; the phases rebuild
// both. The store is closed under storeMu's write lock, so no request is
// using it: requests hold the read lock (holdStore) and later ones find
// no store and answer 503.
func (a *Agent) teardown() {
	a.runner.StopAll()
	a.pub.Release()
	a.out.closeAll()
	a.pub.Close()
	a.storeMu.Lock()
	s := a.st.Swap(nil)
	a.storeMu.Unlock()
	if s != nil {
		if err := s.Close(); err != nil {
			a.log.Warn("close store", "err", err)
		}
	}
}

// initialise runs every phase that has not passed yet, in order, retrying
// after phaseRetry until all pass. It returns nil once the agent runs,
// errShutdown when a shutdown is requested meanwhile, a *fatalError that
// no retry can fix, and ctx's error when ctx ends first.
func (a *Agent) initialise(ctx context.Context) error {
	t0 := time.Now()
	for {
		failed := false
		for i, name := range phaseOrder {
			if a.phaseHealthy(i) {
				continue
			}
			start := time.Now()
			err := a.runPhase(ctx, name)
			a.recordPhase(i, time.Since(start), err)
			if err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if fe := (*fatalError)(nil); errors.As(err, &fe) {
					return fmt.Errorf("init phase %s: %w", name, err)
				}
				a.log.Error("init phase failed", "phase", name, "err", err, "retry_in", phaseRetry)
				failed = true
				break
			}
			a.log.Info("init phase done", "phase", name, "duration", time.Since(start).Round(time.Microsecond))
		}
		if !failed {
			a.setState(StateRunning)
			a.log.Info("agent running", "init", time.Since(t0).Round(time.Millisecond))
			if a.opts.ReleaseStartupPages {
				a.releaseInitPages()
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-a.shutdown:
			return errShutdown
		case <-time.After(phaseRetry):
		}
	}
}

func (a *Agent) runPhase(ctx context.Context, name string) error {
	switch name {
	case PhaseConfig:
		return a.phaseConfig()
	case PhaseStore:
		s, err := store.Open(ctx, a.cfg.DataDir, a.log)
		if err != nil {
			if isAccessError(err) {
				// checkDataDir passed, so this is rare (a file changed
				// hands in between), but no more retryable.
				return dataDirError(a.cfg.DataDir, "holds a store this user cannot open", err)
			}
			return err
		}
		s.OnCorruption(a.storeCorrupt)
		if old := a.st.Swap(s); old != nil {
			_ = old.Close()
		}
		return nil
	case PhaseIdentity:
		return a.phaseIdentity(ctx)
	case PhaseAdapters:
		return a.phaseAdapters(ctx)
	case PhasePublishing:
		return a.phasePublishing(ctx)
	case PhaseAPI:
		return a.phaseAPI(ctx)
	}
	panic("BUG: unknown phase " + name)
}

// phaseConfig checks the data directory is usable before the store
// opens it, so the error names the directory and the fix.
func (a *Agent) phaseConfig() error { return checkDataDir(a.cfg.DataDir) }

func (a *Agent) phaseIdentity(ctx context.Context) error {
	s := a.st.Load()
	uuid, err := s.MetaOrCreate(ctx, "uuid", func() string { return codec.NewUUID().String() })
	if err != nil {
		return err
	}
	name, err := s.MetaOrCreate(ctx, "device_name", func() string {
		if h, err := os.Hostname(); err == nil && h != "" {
			return h
		}
		return "edgeplat-agent"
	})
	if err != nil {
		return err
	}
	a.identity.Store(&identity{UUID: uuid, Name: name})
	if err := a.loadSettings(ctx); err != nil {
		return err
	}
	return a.bootstrapAdmin(ctx)
}

// phaseAdapters starts every enabled stored endpoint. An endpoint whose
// adapter cannot be built (a protocol this build lacks) is logged and
// skipped, not fatal: the others must run.
func (a *Agent) phaseAdapters(ctx context.Context) error {
	eps, err := a.st.Load().Endpoints(ctx, "")
	if err != nil {
		return err
	}
	started := 0
	for _, ep := range eps {
		if !ep.Enabled {
			continue
		}
		if err := a.runner.Apply(ep); err != nil {
			a.log.Error("endpoint not started", "endpoint", ep.Name, "err", err)
			continue
		}
		started++
	}
	a.log.Info("endpoints started", "started", started, "stored", len(eps))
	return nil
}

// phaseAPI checks the API really answers on its address.
func (a *Agent) phaseAPI(ctx context.Context) error {
	if a.server == nil {
		return nil
	}
	return selfCheck(ctx, a.server.Addr())
}

func (a *Agent) resetPhases() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.phases = make([]PhaseResult, len(phaseOrder))
	for i, n := range phaseOrder {
		a.phases[i] = PhaseResult{Name: n}
	}
}

func (a *Agent) phaseHealthy(i int) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.phases[i].Healthy
}

func (a *Agent) recordPhase(i int, d time.Duration, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := &a.phases[i]
	p.Attempts++
	p.DurationMS = float64(d.Microseconds()) / 1000
	p.Healthy = err == nil
	p.Error = ""
	if err != nil {
		p.Error = err.Error()
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

// releaseInitPages drops the executable's pages that start-up faulted in
// (see sysinfo.ReleaseExecutablePages); a failure only costs memory.
func (a *Agent) releaseInitPages() {
	before, _ := sysinfo.ReadProcess("/proc", 0)
	n, err := sysinfo.ReleaseExecutablePages()
	if err != nil {
		a.log.Debug("release start-up pages", "err", err)
		return
	}
	after, _ := sysinfo.ReadProcess("/proc", 0)
	a.log.Debug("released start-up pages", "mapped_mb", n>>20, "rss_before_mb", before.RSSBytes>>20, "rss_after_mb", after.RSSBytes>>20)
}

// storeCorrupt follows a corruption the store confirmed while running:
// a soft reboot reopens the store, which moves the file aside and
// salvages it, rather than failing every flush on the same page.
func (a *Agent) storeCorrupt(reason string) {
	if state, ok := a.requestReboot(); !ok {
		a.log.Error("agent store corrupt; it is reopened at the next start", "reason", reason, "state", state)
		return
	}
	a.log.Error("agent store corrupt; reopening it", "reason", reason)
}

// requestReboot asks Run for a soft reboot; it reports false when the agent
// is not RUNNING.
func (a *Agent) requestReboot() (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.state != StateRunning {
		return a.state, false
	}
	select {
	case a.reboot <- struct{}{}:
	default:
		// One is pending already.
	}
	return a.state, true
}

func (a *Agent) requestShutdown() {
	select {
	case a.shutdown <- struct{}{}:
	default:
	}
}

// storeOrErr returns the store, or an error while it is not open.
func (a *Agent) storeOrErr() (*store.Store, error) {
	if s := a.st.Load(); s != nil {
		return s, nil
	}
	return nil, errNotReady
}

var errNotReady = errors.New("the agent is initialising; its store is not open yet")

func (a *Agent) version() string { return buildinfo.Get().Version }

// phasePublishing starts the publish destinations and routes: the
// platform destination with the provisioned credentials, when there are.
func (a *Agent) phasePublishing(ctx context.Context) error {
	st := a.st.Load()
	cr, err := a.credentials(ctx, st)
	if err != nil {
		return err
	}
	creds, kid := platformCredentials(cr, a.provisioned(ctx, st))
	return a.pub.Open(ctx, st, creds, kid)
}

// reloadPublishing makes publishing follow a change of the stored
// destinations or subscriptions at once. A failure is logged: the change
// is stored and the next reload or restart applies it.
func (a *Agent) reloadPublishing(ctx context.Context) {
	if err := a.pub.Reload(ctx); err != nil {
		a.log.Error("publishing not reloaded", "err", err)
	}
}
