package agent

import (
	"context"
	"log/slog"
	"os"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly"
	"github.com/edgeplat/edgeplat/roles/agent/commands"
	"github.com/edgeplat/edgeplat/roles/agent/discovery"
	"github.com/edgeplat/edgeplat/roles/agent/drift"
	"github.com/edgeplat/edgeplat/roles/agent/jobs"
	"github.com/edgeplat/edgeplat/roles/agent/logship"
	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/report"
	"github.com/edgeplat/edgeplat/roles/agent/simulation"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// identity is the agent's UUID and device name.
type identity struct {
	UUID string
	Name string
}

// parts are what the group's services share: each service starts or
// stops one of them.
type parts struct {
	cfg       config.Agent
	log       *slog.Logger
	st        *storeRef
	id        *atomic.Pointer[identity]
	pub       *publish.Router
	out       *output
	endpoints *endpointService
	settings  *settingsService
	cloud     *cloudService
	commands  *commands.Dispatcher
	memory    *sysinfo.MemoryMonitor
	reports   *report.Service
	logs      *logship.Shipper
	jobs      *jobs.Service
	apps      *appsService
	drift     *drift.Service
	anomaly   *anomaly.Service
	// simulation is nil while simulation mode is off.
	simulation *simulation.Orchestrator
	discovery  *discovery.Service
	lc         *Agent
	// server is the HTTP server, for the api phase's self-check.
	server interface{ Addr() string }
}

// registerCommands routes the cloud's commands (docs/control-channel.md)
// to the services that handle them; the platform destination's
// connection delivers them to the dispatcher.
func (p *parts) registerCommands() {
	p.commands.Handle(control.CmdTargetState, p.cloud.targetStateNotice)
	p.commands.Handle(control.CmdReceipts, p.applyReceipts)
	p.commands.Handle(control.CmdJob, p.jobs.HandleJob)
	p.commands.Handle(control.CmdJobCancel, p.jobs.HandleCancel)
	p.pub.OnCommand(p.commands.Deliver)
}

// applyReceipts deletes the records a delivery receipt of the cloud
// covers (docs/agent-delivery.md). A receipt that does not decode is
// dropped: the records it meant are sent again after the wait, and the
// cloud's next receipt covers them.
func (p *parts) applyReceipts(ctx context.Context, payload []byte) {
	r, err := control.DecodeReceipts(payload)
	if err != nil {
		p.log.Warn("delivery receipt ignored", "err", err)
		return
	}
	if _, err := p.pub.ApplyReceipts(ctx, r); err != nil && ctx.Err() == nil {
		p.log.Warn("delivery receipt not applied; its records are sent again after the wait", "err", err)
	}
}

// services are the agent's group, in start order: the six init phases
// (Agent.started records them for the health report) and the background
// loops. lifecycle.Run stops them in reverse order, each after its Run
// returned.
func (p *parts) services() []lifecycle.Service {
	svcs := []lifecycle.Service{
		&lifecycle.Funcs{ServiceName: "memory-monitor", RunFunc: func(ctx context.Context) error {
			p.memory.Run(ctx)
			return nil
		}},
		&lifecycle.Funcs{ServiceName: PhaseConfig, StartFunc: func(context.Context) error {
			// The data directory is checked before the store opens it, so
			// the error names the directory and the fix.
			return checkDataDir(p.cfg.DataDir)
		}},
		&lifecycle.Funcs{ServiceName: PhaseStore, StartFunc: p.openStore,
			StopFunc: func(context.Context) error { p.st.close(p.log); return nil }},
		&lifecycle.Funcs{ServiceName: PhaseIdentity, StartFunc: p.loadIdentity},
		&lifecycle.Funcs{ServiceName: PhasePublishing, StartFunc: p.openPublishing,
			StopFunc: func(context.Context) error { p.pub.Close(); return nil }},
		p.drift, // before the endpoints, so their first frames are observed
		// Anomaly detection restores its baselines before the first
		// reading and saves them after the last (docs/anomaly-agent.md).
		p.anomaly,
		&lifecycle.Funcs{ServiceName: PhaseAdapters, StartFunc: p.startEndpoints,
			StopFunc: func(context.Context) error { p.endpoints.stop(); p.out.closeAll(); return nil }},
		// The apps' reconciler runs in the background: a slow pull or a
		// runtime that is down delays no other service, nor readiness.
		&lifecycle.Funcs{ServiceName: "apps", StartFunc: p.apps.start, RunFunc: p.apps.mgr.Run},
		&lifecycle.Funcs{ServiceName: "target-state", StartFunc: p.startTarget},
		&lifecycle.Funcs{ServiceName: "heartbeats", RunFunc: func(ctx context.Context) error {
			heartbeatLoop(ctx, p.out, p.endpoints.runner, p.pub, p.log)
			return nil
		}},
		p.reports,
		p.logs,
		&lifecycle.Funcs{ServiceName: "cloud-sync", RunFunc: func(ctx context.Context) error {
			p.cloud.syncLoop(ctx)
			return nil
		}},
		p.jobs,
		// Discovery rules run after the endpoints started, since a run
		// may create one (docs/discovery.md).
		p.discovery,
		&lifecycle.Funcs{ServiceName: PhaseAPI, StartFunc: func(ctx context.Context) error {
			if p.server == nil {
				return nil
			}
			return selfCheck(ctx, p.server.Addr())
		}},
	}
	if p.simulation != nil {
		// After the adapters phase, whose runner its devices run in.
		svcs = insertAfter(svcs, PhaseAdapters, p.simulation)
	}
	if p.lc.releasePages {
		svcs = append(svcs, pageReleaser(p.log, p.lc.changes))
	}
	return svcs
}

func (p *parts) openStore(ctx context.Context) error {
	s, err := store.Open(ctx, p.cfg.DataDir, p.log)
	if err != nil {
		if isAccessError(err) {
			// checkDataDir passed, so this is rare (a file changed hands
			// in between), but no more retryable.
			return dataDirError(p.cfg.DataDir, "holds a store this user cannot open", err)
		}
		return err
	}
	s.OnCorruption(p.lc.storeCorrupt)
	p.st.set(s)
	return nil
}

func (p *parts) loadIdentity(ctx context.Context) error {
	s := p.st.Load()
	uuid, err := s.MetaOrCreate(ctx, "uuid", func() string { return codec.NewUUID().String() })
	if err != nil {
		return err
	}
	name, err := s.MetaOrCreate(ctx, metaDeviceName, func() string {
		if h, err := os.Hostname(); err == nil && h != "" {
			return h
		}
		return "edgeplat-agent"
	})
	if err != nil {
		return err
	}
	p.id.Store(&identity{UUID: uuid, Name: name})
	if err := p.settings.load(ctx, s); err != nil {
		return err
	}
	return bootstrapAdmin(ctx, s, p.cfg, p.log)
}

// openPublishing starts the publish destinations and routes: the
// platform destination with the provisioned credentials, when there are.
// The router lives until the phase stops, not as long as ctx: the
// endpoints' last batches reach it after the group's context ended.
func (p *parts) openPublishing(ctx context.Context) error {
	st := p.st.Load()
	cr, err := credentials(ctx, st)
	if err != nil {
		return err
	}
	creds, kid := platformCredentials(cr, provisioned(ctx, st))
	if err := p.pub.Open(context.WithoutCancel(ctx), st, creds, kid); err != nil {
		// Destinations that did start must not outlive the failed phase.
		p.pub.Close()
		return err
	}
	return nil
}
