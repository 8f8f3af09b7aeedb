package agent

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/jobs"
	"github.com/edgeplat/edgeplat/roles/agent/logship"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// newJobs builds the jobs service over the agent's parts
// (docs/agent.md, section Jobs).
func newJobs(p *parts, system *systemService, adapters adapterService, opts jobs.Options) *jobs.Service {
	opts.Store = p.st.Open
	opts.Cloud = jobCloud{logs: cloudLogs{st: p.st}}
	opts.Actions = jobActions{p: p, system: system, adapters: adapters}
	opts.Platform = p.pub
	opts.PollInterval = func() time.Duration {
		return time.Duration(p.settings.current().Intervals.JobPollMS) * time.Millisecond
	}
	opts.Shell = p.cfg.JobsShell
	opts.Apps = appRestarter{apps: p.apps}
	return jobs.New(opts)
}

// appRestarter is the restart-app job's jobs.AppRestarter: every service
// of the app, as POST /v1/restart does.
type appRestarter struct{ apps *appsService }

func (r appRestarter) RestartApp(ctx context.Context, appID int) error {
	_, err := r.apps.Act(ctx, appID, "", httpapi.ActionRestart, false)
	if errors.Is(err, httpapi.ErrNotFound) {
		return fmt.Errorf("%w: no app %d on this agent", jobs.ErrInvalidParams, appID)
	}
	return err
}

// jobCloud is jobs.Cloud: the provisioned agent's cloud and device key,
// read at each call as the log upload reads them.
type jobCloud struct{ logs cloudLogs }

func (c jobCloud) client(ctx context.Context) (*cloud.Client, *cloud.Credentials, error) {
	cr, err := c.logs.credentials(ctx)
	if errors.Is(err, logship.ErrNotReady) {
		return nil, nil, jobs.ErrNoCloud
	}
	if err != nil {
		return nil, nil, err
	}
	client, err := cloud.NewClient(cr.APIEndpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("cloud endpoint: %w", err)
	}
	return client, cr, nil
}

// NextJob implements jobs.Cloud.
func (c jobCloud) NextJob(ctx context.Context) (control.JobDispatch, bool, error) {
	client, cr, err := c.client(ctx)
	if err != nil {
		return control.JobDispatch{}, false, err
	}
	return client.NextJob(ctx, *cr)
}

// ReportJob implements jobs.Cloud.
func (c jobCloud) ReportJob(ctx context.Context, jobID string, u control.JobStatusUpdate) error {
	client, cr, err := c.client(ctx)
	if err != nil {
		return err
	}
	return client.ReportJob(ctx, *cr, jobID, u)
}

// jobActions is jobs.Actions over the agent's services.
type jobActions struct {
	p        *parts
	system   *systemService
	adapters adapterService
}

// Reboot implements jobs.Actions.
func (a jobActions) Reboot() error {
	if state, ok := a.p.lc.Reboot(); !ok {
		return fmt.Errorf("the agent reboots only when RUNNING; it is %s", state)
	}
	return nil
}

// Sync implements jobs.Actions.
func (a jobActions) Sync(ctx context.Context) (int64, error) {
	release := a.p.st.Hold()
	defer release()
	res, err := a.p.cloud.pull(ctx)
	return res.Version, err
}

// endpoint finds the stored endpoint named; an unknown one is the job's
// invalid params.
func (a jobActions) endpoint(ctx context.Context, name string) (adapters.Endpoint, error) {
	release := a.p.st.Hold()
	defer release()
	st, err := a.p.st.Open()
	if err != nil {
		return adapters.Endpoint{}, err
	}
	ep, err := st.Endpoints().Get(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return ep, fmt.Errorf("%w: no endpoint %q", jobs.ErrInvalidParams, name)
	}
	return ep, err
}

// RestartEndpoint implements jobs.Actions: the runner stops the
// endpoint's adapter and starts it again with its stored definition.
func (a jobActions) RestartEndpoint(ctx context.Context, name string) error {
	ep, err := a.endpoint(ctx, name)
	if err != nil {
		return err
	}
	if !ep.Enabled {
		return fmt.Errorf("endpoint %q is disabled", name)
	}
	e := a.p.endpoints
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.running {
		return errors.New("the endpoints are stopping")
	}
	return e.runner.Apply(ep)
}

// Write implements jobs.Actions.
func (a jobActions) Write(ctx context.Context, endpoint, register string, value any) (any, error) {
	ep, err := a.endpoint(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	return a.adapters.Write(ctx, ep.Protocol, ep.Name, register, value)
}

// UploadLogs implements jobs.Actions.
func (a jobActions) UploadLogs(ctx context.Context) (string, error) {
	n, err := a.p.logs.ShipNow(ctx)
	if err != nil {
		return fmt.Sprintf("shipped %d log lines", n), err
	}
	return fmt.Sprintf("shipped %d log lines", n), nil
}

// Diagnostics implements jobs.Actions.
func (a jobActions) Diagnostics(ctx context.Context) (map[string]any, error) {
	release := a.p.st.Hold()
	defer release()
	mem, err := a.system.Memory()
	if err != nil {
		return nil, fmt.Errorf("memory: %w", err)
	}
	db, err := a.system.DBStats(ctx)
	if err != nil {
		return nil, fmt.Errorf("db stats: %w", err)
	}
	return map[string]any{"memory": mem, "db": db, "health": a.p.lc.Health(ctx)}, nil
}

// jobsAPI is httpapi.Jobs.
type jobsAPI struct{ s *jobs.Service }

func (j jobsAPI) Recent(ctx context.Context, limit int) (any, error) { return j.s.Recent(ctx, limit) }
