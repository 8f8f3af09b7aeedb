package apps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
)

// Errors of the Manager's operations.
var (
	// ErrRuntimeDown: the runtime is needed and cannot be reached.
	ErrRuntimeDown = errors.New("the container runtime is not reachable")
	// ErrNotFound: no such app or service in the target.
	ErrNotFound = errors.New("not found")
	// ErrRunning: purge without force of an app that runs.
	ErrRunning = errors.New("the app is running")
)

// Runtime statuses (control.RuntimeState.Status).
const (
	StatusConnected    = "connected"
	StatusUnreachable  = "unreachable"
	StatusUnconfigured = "unconfigured"
)

// Timing of the reconciler (docs/apps.md, "Reconciler").
const (
	defaultResync   = 30 * time.Second
	retryFirst      = time.Second
	retryMax        = 5 * time.Minute
	reconnectFirst  = time.Second
	reconnectMax    = 30 * time.Second
	eventSettle     = 200 * time.Millisecond
	listTimeout     = 5 * time.Second
	stopTimeoutSecs = 10
)

// Options configure a Manager.
type Options struct {
	Log     *slog.Logger
	Metrics prometheus.Registerer
	// Resync is how often the reconciler compares the target with the
	// runtime without a trigger; 30 s when zero.
	Resync time.Duration
}

// Manager reconciles the target apps against the container runtime. Its
// methods are safe for concurrent use; Run does the background work.
type Manager struct {
	log    *slog.Logger
	m      *metrics
	resync time.Duration

	// work serialises reconcile passes and actions, so one container
	// operation on a service is in flight at a time.
	work sync.Mutex

	mu        sync.Mutex
	agent     string
	cfg       RuntimeConfig
	stored    bool // cfg was configured, not the built-in default
	cli       *client.Client
	runtime   control.RuntimeState
	target    []control.TargetApp
	stopped   bool
	overrides map[svcKey]string
	failures  map[svcKey]*failure
	pulling   map[svcKey]bool

	kick      chan struct{}
	reconnect chan struct{}
}

// svcKey names one service of one app.
type svcKey struct {
	app     int
	service string
}

// failure is a service's last failed reconcile and its back-off.
type failure struct {
	hash    string
	err     string
	retries int
	next    time.Time
	at      time.Time
}

// New builds a Manager; nothing runs until Run.
func New(opts Options) *Manager {
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	resync := opts.Resync
	if resync <= 0 {
		resync = defaultResync
	}
	return &Manager{log: log, m: newMetrics(opts.Metrics), resync: resync,
		runtime:   control.RuntimeState{Status: StatusUnreachable, Error: "not connected yet"},
		overrides: map[svcKey]string{}, failures: map[svcKey]*failure{}, pulling: map[svcKey]bool{},
		kick: make(chan struct{}, 1), reconnect: make(chan struct{}, 1)}
}

// Configure sets the agent UUID its containers are labelled with and the
// runtime configuration (stored: set by the user, not the default).
// Call it before Run; a later call reconnects.
func (m *Manager) Configure(agent string, cfg RuntimeConfig, stored bool) {
	m.mu.Lock()
	m.agent, m.cfg, m.stored = agent, cfg, stored
	m.mu.Unlock()
	signal(m.reconnect)
}

// Runtime is the configuration in use and whether it was stored.
func (m *Manager) Runtime() (RuntimeConfig, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg, m.stored
}

// SetTarget replaces the target apps; stopped (the applied target
// state's runState) stops every service while set. A service whose
// definition changed loses its start/stop override and its back-off.
func (m *Manager) SetTarget(apps []control.TargetApp, stopped bool) {
	m.mu.Lock()
	old := index(m.target)
	now := index(apps)
	for k := range m.overrides {
		if !reflect.DeepEqual(old[k], now[k]) {
			delete(m.overrides, k)
		}
	}
	m.target, m.stopped = slices.Clone(apps), stopped
	m.mu.Unlock()
	signal(m.kick)
}

// Target returns the target apps and the run state's stop.
func (m *Manager) Target() ([]control.TargetApp, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.target), m.stopped
}

// HasWork reports whether the Manager has apps or a configured runtime:
// whether the state report carries apps.
func (m *Manager) HasWork() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.target) > 0 || m.stored
}

// RuntimeState is the runtime as last seen.
func (m *Manager) RuntimeState() control.RuntimeState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runtime
}

func index(apps []control.TargetApp) map[svcKey]control.TargetService {
	out := map[svcKey]control.TargetService{}
	for _, a := range apps {
		for _, s := range a.Services {
			out[svcKey{a.AppID, s.ServiceName}] = s
		}
	}
	return out
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// client returns the connected client, or ErrRuntimeDown.
func (m *Manager) client() (*client.Client, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cli == nil {
		return nil, fmt.Errorf("%w: %s", ErrRuntimeDown, m.runtime.Error)
	}
	return m.cli, nil
}

func (m *Manager) setRuntime(cli *client.Client, status, reason, version string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cli = cli
	if m.runtime.Status != status || m.runtime.Error != reason {
		since := time.Now().UnixMilli()
		if m.runtime.Status == status {
			since = m.runtime.Since
		}
		m.runtime = control.RuntimeState{Status: status, Error: reason, Version: version, Since: since}
	}
}

// Run connects to the runtime and reconciles until ctx ends. A runtime
// that cannot be reached is retried with back-off (1 s doubling to 30 s)
// and shown in RuntimeState; reconciling resumes once it is back.
func (m *Manager) Run(ctx context.Context) error {
	// A Configure before Run asks for no reconnect.
	select {
	case <-m.reconnect:
	default:
	}
	wait := reconnectFirst
	for {
		cli, version, err := m.connect(ctx)
		if ctx.Err() != nil {
			return nil
		}
		if err == nil {
			wait = reconnectFirst
			m.setRuntime(cli, StatusConnected, "", version)
			m.log.Info("container runtime connected", "version", version)
			err = m.serve(ctx, cli)
			m.setRuntime(nil, StatusUnreachable, reason(err), "")
			_ = cli.Close()
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, errReconfigured) {
				continue
			}
			m.log.Warn("container runtime lost; reconnecting", "err", err)
		} else {
			status := StatusUnreachable
			if errors.Is(err, errUnconfigured) {
				status = StatusUnconfigured
			}
			before := m.RuntimeState()
			m.setRuntime(nil, status, reason(err), "")
			if before.Error != reason(err) {
				m.log.Warn("container runtime not reachable; retrying", "err", err, "retry_in", wait)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-m.reconnect:
			t.Stop()
			wait = reconnectFirst
			continue
		case <-t.C:
		}
		wait = min(wait*2, reconnectMax)
	}
}

var (
	errReconfigured = errors.New("runtime configuration changed")
	errUnconfigured = errors.New("no container runtime configured and none at the default socket")
)

func reason(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// connect builds the client of the current configuration and pings it.
func (m *Manager) connect(ctx context.Context) (*client.Client, string, error) {
	m.mu.Lock()
	cfg, stored := m.cfg, m.stored
	m.mu.Unlock()
	cfg, err := cfg.Normalize()
	if err != nil {
		return nil, "", err
	}
	if !stored && cfg.Type == RuntimeSocket {
		if _, err := os.Stat(cfg.SocketPath); errors.Is(err, os.ErrNotExist) {
			return nil, "", fmt.Errorf("%w (%s)", errUnconfigured, cfg.SocketPath)
		}
	}
	cli, err := newClient(cfg)
	if err != nil {
		return nil, "", err
	}
	pctx, cancel := context.WithTimeout(ctx, connectTimeout)
	defer cancel()
	v, err := cli.ServerVersion(pctx, client.ServerVersionOptions{})
	if err != nil {
		_ = cli.Close()
		return nil, "", fmt.Errorf("runtime at %s: %w", cfg.Address(), err)
	}
	return cli, v.Version, nil
}

// serve reconciles while the runtime answers: on target changes, on the
// runtime's events about the agent's containers, every resync period and
// when a back-off ends. It returns why it stopped.
func (m *Manager) serve(ctx context.Context, cli *client.Client) error {
	ectx, cancel := context.WithCancel(ctx)
	defer cancel()
	m.mu.Lock()
	agent := m.agent
	m.mu.Unlock()
	ev := cli.Events(ectx, client.EventsListOptions{Filters: client.Filters{}.Add("type", string(events.ContainerEventType))})
	resync := time.NewTicker(m.resync)
	defer resync.Stop()
	retry := time.NewTimer(0)
	defer retry.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-m.reconnect:
			return errReconfigured
		case err := <-ev.Err:
			// The event stream ends when the runtime goes away.
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err == nil {
				err = errors.New("event stream closed")
			}
			return fmt.Errorf("runtime event stream: %w", err)
		case msg := <-ev.Messages:
			if msg.Actor.Attributes[LabelAgent] == agent {
				settle.Reset(eventSettle)
			}
			continue
		case <-m.kick:
		case <-resync.C:
		case <-retry.C:
		case <-settle.C:
		}
		next, err := m.pass(ctx, cli)
		if err != nil {
			return err
		}
		retry.Stop()
		if !next.IsZero() {
			retry.Reset(max(time.Until(next), 10*time.Millisecond))
		}
	}
}

// pass reconciles once. It returns when the next back-off ends (zero if
// none) and an error only when the runtime stopped answering.
func (m *Manager) pass(ctx context.Context, cli *client.Client) (time.Time, error) {
	m.work.Lock()
	defer m.work.Unlock()
	failed, err := m.reconcile(ctx, cli)
	if err != nil {
		pctx, cancel := context.WithTimeout(ctx, connectTimeout)
		defer cancel()
		if _, perr := cli.Ping(pctx, client.PingOptions{}); perr != nil {
			return time.Time{}, fmt.Errorf("runtime not answering: %w", perr)
		}
		m.log.Warn("apps reconcile failed", "err", err)
		failed = true
	}
	outcome := outcomeOK
	if failed {
		outcome = outcomeError
	}
	m.m.reconciles.WithLabelValues(outcome).Inc()
	m.mu.Lock()
	defer m.mu.Unlock()
	var next time.Time
	for _, f := range m.failures {
		if next.IsZero() || f.next.Before(next) {
			next = f.next
		}
	}
	return next, nil
}
