// Package agent is the agent role: the edge agent's local HTTP API on port
// 48484, its lifecycle of six init phases, its SQLite store and the
// protocol endpoints it polls. It imports core and config only; cmd
// composes it.
//
// The HTTP server starts first and stops last, so /v1/readiness answers
// 503 while the agent initialises and in-flight requests drain at
// shutdown. The agent itself is one lifecycle service whose Run runs a
// nested group of services: the init phases and the background loops
// (docs/agent.md, section Lifecycle). A soft reboot stops the group and
// runs it again; a phase that fails is retried the same way, unless the
// data directory may not be used (see fatalError): no retry fixes a
// permission.
package agent

import (
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/modbus"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/mqtt"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/opcua"
	"github.com/edgeplat/edgeplat/roles/agent/adminui"
	"github.com/edgeplat/edgeplat/roles/agent/apps"
	"github.com/edgeplat/edgeplat/roles/agent/commands"
	"github.com/edgeplat/edgeplat/roles/agent/drift"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/jobs"
	"github.com/edgeplat/edgeplat/roles/agent/logring"
	"github.com/edgeplat/edgeplat/roles/agent/logship"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/report"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// Options carries what cmd decides beyond the config.
type Options struct {
	PortHint string
	// Drivers replaces the built-in protocol drivers (tests).
	Drivers []adapters.Driver
	// ReleaseStartupPages drops the executable pages start-up faulted in
	// once the agent runs (see sysinfo.ReleaseExecutablePages). Only the
	// agent alone on a device wants it; all-in-one's other roles would
	// fault them back.
	ReleaseStartupPages bool
	// Simulate is a scenario to start once the agent runs (all-in-one
	// --simulate); it needs agent.simulation_mode.
	Simulate string
}

// DefaultDrivers are the protocols the agent speaks.
func DefaultDrivers() []adapters.Driver {
	return []adapters.Driver{modbus.Driver{}, opcua.Driver{}, mqtt.Driver{}, bacnet.Driver{}}
}

// logRingCapacity bounds the log lines GET /v1/logs can return.
const logRingCapacity = 5000

// processStart is when the agent process started: its uptime in the
// metrics report survives a soft reboot of the group.
var processStart = time.Now()

// memorySampleInterval is how often the memory monitor samples the heap.
const memorySampleInterval = 30 * time.Second

// New builds the role's services without doing I/O: the HTTP server first,
// then the agent. In LOCALHOST_ONLY mode the API binds loopback only; in
// key mode it binds every interface.
func New(cfg *config.Config, r *rt.Runtime, opts Options) ([]lifecycle.Service, error) {
	drivers := opts.Drivers
	if drivers == nil {
		drivers = DefaultDrivers()
	}
	ring := logring.New(logRingCapacity)
	level := new(slog.LevelVar)
	level.Set(slog.LevelInfo)
	log := ringLogger(r.Logger, ring, level).With("component", "agent")
	sampler := sysinfo.NewSampler("/proc", cfg.Agent.DataDir)
	p := &parts{cfg: cfg.Agent, log: log, st: &storeRef{}, id: &atomic.Pointer[identity]{},
		memory: sysinfo.NewMemoryMonitor("/proc", memorySampleInterval, 0)}
	p.lc = newLifecycle(log, cfg.Lifecycle.ShutdownGrace, opts.ReleaseStartupPages)
	p.pub = publish.New(log, sampler.CPUPercent)
	p.out = newOutput(log, p.pub)
	ds := driftStore{st: p.st, log: log.With("component", "drift")}
	p.drift = drift.NewService(drift.ServiceOptions{Options: &ds, Store: &ds, Cloud: p.pub, Log: ds.log})
	ds.svc, p.out.drift = p.drift, p.drift
	drivers, simDriver := withSimulation(cfg.Agent.SimulationMode, drivers)
	run := runner.New(drivers, p.out, log.With("component", "endpoints"), r.Metrics)
	p.endpoints = &endpointService{st: p.st, runner: run, log: log}
	sim, err := newSimulation(simDriver, run, p.endpoints, opts.Simulate, log)
	if err != nil {
		return nil, err
	}
	p.simulation = sim
	p.lc.health = &healthCheck{st: p.st, memory: p.memory, endpoints: p.endpoints, parts: p}
	p.settings = newSettingsService(p.st, p.id, p.memory, level, log)
	anom, err := newAnomaly(p, r.Metrics)
	if err != nil {
		return nil, err
	}
	p.anomaly, p.settings.anomaly, p.out.anomaly = anom, anom, anom
	if p.discovery, err = newDiscovery(p); err != nil {
		return nil, err
	}
	p.cloud = &cloudService{st: p.st, id: p.id, pub: p.pub, endpoints: p.endpoints, lc: p.lc, settings: p.settings,
		m: newMetrics(r.Metrics, p.pub), log: log, kick: make(chan struct{}, 1)}
	p.cloud.beforeReset = anom.Forget
	logs, err := logship.New(logship.Options{
		Uploader: cloudLogs{st: p.st}, Enabled: func() bool { return p.settings.current().Logging.CloudEnabled },
		Log: log, Metrics: r.Metrics,
	})
	if err != nil {
		return nil, err
	}
	p.logs = logs
	ring.SetTap(logs.Add)
	pc := &publishConfig{st: p.st, pub: p.pub, cloud: p.cloud, logs: logs, log: log}
	mgr := apps.New(apps.Options{Log: log.With("component", "apps"), Metrics: r.Metrics})
	if p.apps, err = newAppsService(cfg.Agent, mgr, p, log.With("component", "apps")); err != nil {
		return nil, err
	}
	p.cloud.target = newReconciler(p, pc)
	system := &systemService{st: p.st, id: p.id, ring: ring, sampler: sampler, memory: p.memory, cloud: p.cloud, lc: p.lc, apps: p.apps}
	p.jobs = newJobs(p, system, adapterService{run}, jobs.Options{Log: log.With("component", "jobs"), Metrics: r.Metrics})
	p.commands = commands.New(log.With("component", "commands"), r.Metrics, p.pub.TopicPrefix)
	p.registerCommands()
	p.reports = report.New(report.Options{
		Publisher: p.pub, State: stateSource{p: p, buffer: pc}, Target: p.cloud.target, Sampler: sampler,
		Interval: func() time.Duration {
			return time.Duration(p.settings.current().Intervals.StateReportMS) * time.Millisecond
		},
		Started: processStart, Log: log.With("component", "reports"), Metrics: r.Metrics,
	})
	ui, err := adminui.New()
	if err != nil {
		return nil, err
	}
	engine := httpapi.New(httpapi.Deps{
		Log: log, KeyMode: cfg.Agent.KeyMode(), APIKey: cfg.Agent.APIKey.Reveal(),
		BodyTimeout: cfg.Lifecycle.HTTPBodyTimeout, Metrics: r.Metrics,
		Store: p.st, Lifecycle: p.lc, Admins: adminStore{p.st}, Changed: p.lc.configChanged,
		Endpoints: p.endpoints, Adapters: adapterService{run},
		Publishing: pc,
		Cloud:      p.cloud, Settings: p.settings,
		System: system, Jobs: jobsAPI{p.jobs}, Apps: p.apps, Drift: ds,
		Anomaly:    anomalyAPI{s: anom, settings: p.settings, development: cfg.Agent.Development},
		Simulation: simulationRoutes(sim),
		Discovery:  discoveryAPI{p.discovery},
		UI:         ui,
	})
	bind := "127.0.0.1"
	if cfg.Agent.KeyMode() {
		bind = "0.0.0.0"
	}
	srv, err := httpx.NewServer(httpx.ServerOptions{
		Name:     "agent-http",
		Addr:     net.JoinHostPort(bind, strconv.Itoa(cfg.Agent.Port)),
		Handler:  engine,
		PortHint: opts.PortHint,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	p.server = srv
	p.lc.p = p
	return []lifecycle.Service{srv, p.lc}, nil
}

// ringLogger tees the agent's logs into the ring GET /v1/logs reads.
func ringLogger(base *slog.Logger, ring *logring.Ring, level slog.Leveler) *slog.Logger {
	return slog.New(logring.Handler(base.Handler(), ring, level))
}
