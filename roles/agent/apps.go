package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/apps"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// redactedKey stands for a stored TLS key in GET /v1/docker/config; sent
// back, it keeps the stored key.
const redactedKey = "********"

// appsService is httpapi.Apps and reconcile.Apps over the apps Manager:
// it decides the Manager's target (the local apps in the store, or the
// apps of the cloud's applied target state), keeps the runtime
// configuration, and refuses local writes to apps the cloud manages
// (docs/apps.md).
type appsService struct {
	mgr    *apps.Manager
	st     *storeRef
	id     *atomic.Pointer[identity]
	target *reconcile.Reconciler
	roots  []string
	// def is the runtime configuration until one is saved.
	def apps.RuntimeConfig
	log *slog.Logger

	// mu makes each local write one step: the store, then the target.
	mu sync.Mutex
}

func newAppsService(cfg config.Agent, mgr *apps.Manager, p *parts, log *slog.Logger) (*appsService, error) {
	def := apps.RuntimeConfig{Type: apps.RuntimeSocket, SocketPath: apps.DefaultSocket}
	if cfg.DockerHost != "" {
		var err error
		if def, err = apps.ParseDockerHost(cfg.DockerHost); err != nil {
			return nil, fmt.Errorf("agent.docker_host: %w", err)
		}
	}
	return &appsService{mgr: mgr, st: p.st, id: p.id, roots: cfg.VolumeRoots(), def: def, log: log}, nil
}

// start configures the Manager with the agent's UUID, the runtime
// configuration and the target; the Manager's Run connects.
func (a *appsService) start(ctx context.Context) error {
	st := a.st.Load()
	cfg, stored, err := a.runtimeConfig(ctx, st)
	if err != nil {
		return err
	}
	a.mgr.Configure(a.id.Load().UUID, cfg, stored)
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refresh(ctx)
}

func (a *appsService) runtimeConfig(ctx context.Context, st *store.Store) (apps.RuntimeConfig, bool, error) {
	raw, err := st.Apps().RuntimeConfig(ctx)
	if errors.Is(err, store.ErrNotFound) {
		return a.def, false, nil
	}
	if err != nil {
		return apps.RuntimeConfig{}, false, err
	}
	var cfg apps.RuntimeConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return apps.RuntimeConfig{}, false, fmt.Errorf("read runtime config: %w", err)
	}
	return cfg, true, nil
}

// cloudApps returns the applied document's apps when the agent is
// provisioned and the document has an apps section.
func (a *appsService) cloudApps(ctx context.Context) ([]control.TargetApp, bool) {
	st := a.st.Load()
	if a.target == nil || st == nil || !provisioned(ctx, st) {
		return nil, false
	}
	return a.target.AppliedApps()
}

// stopped is the applied target state's run state, for a provisioned
// agent.
func (a *appsService) stopped(ctx context.Context) bool {
	st := a.st.Load()
	return a.target != nil && st != nil && provisioned(ctx, st) && a.target.RunState() == control.RunStopped
}

// refresh hands the Manager its target; a.mu is held.
func (a *appsService) refresh(ctx context.Context) error {
	list, ok := a.cloudApps(ctx)
	if !ok {
		var err error
		if list, err = a.localApps(ctx); err != nil {
			return err
		}
	}
	a.mgr.SetTarget(list, a.stopped(ctx))
	return nil
}

// localApps are the apps in the store.
func (a *appsService) localApps(ctx context.Context) ([]control.TargetApp, error) {
	st, err := a.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Apps().List(ctx)
}

// targetApps is reconcile.Apps: the cloud's target state reaching the
// apps service.
type targetApps struct{ a *appsService }

// CheckApps implements reconcile.Apps: the volume policy.
func (t targetApps) CheckApps(list []control.TargetApp) error {
	var errs []error
	for i, app := range list {
		errs = append(errs, apps.CheckVolumes(fmt.Sprintf("apps[%d]", i), app, t.a.roots))
	}
	return errors.Join(errs...)
}

// ApplyApps implements reconcile.Apps.
func (t targetApps) ApplyApps(ctx context.Context, list []control.TargetApp, stopped bool) error {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	if list == nil {
		var err error
		if list, err = a.localApps(ctx); err != nil {
			return err
		}
	}
	a.mgr.SetTarget(list, stopped)
	return nil
}

// managed refuses a local write while the cloud's target state manages
// the apps.
func (a *appsService) managed(ctx context.Context, what string) error {
	st := a.st.Load()
	if a.target == nil || st == nil || !provisioned(ctx, st) {
		return nil
	}
	if v, ok := a.target.ManagedApps(); ok {
		return managedError(what, v)
	}
	return nil
}

// State implements httpapi.Apps.
func (a *appsService) State(ctx context.Context) (control.AppsState, error) {
	return a.mgr.State(ctx), nil
}

// count is the number of target apps (GET /v1/device).
func (a *appsService) count() int {
	list, _ := a.mgr.Target()
	return len(list)
}

// local returns the store and the stored app with appID.
func (a *appsService) local(ctx context.Context, appID int) (*store.Store, control.TargetApp, error) {
	st, err := a.st.Open()
	if err != nil {
		return nil, control.TargetApp{}, err
	}
	list, err := st.Apps().List(ctx)
	if err != nil {
		return nil, control.TargetApp{}, err
	}
	for _, app := range list {
		if app.AppID == appID {
			return st, app, nil
		}
	}
	return nil, control.TargetApp{}, fmt.Errorf("%w: no app with id %d", httpapi.ErrNotFound, appID)
}

// put stores app and hands the new target over.
func (a *appsService) put(ctx context.Context, st *store.Store, app control.TargetApp) (control.TargetApp, error) {
	saved, err := st.Apps().Put(ctx, app)
	if errors.Is(err, store.ErrDuplicate) {
		return saved, httpapi.Errorf(http.StatusBadRequest, "appName: an app named %q exists already", app.AppName)
	}
	if err != nil {
		return saved, err
	}
	return saved, a.refresh(ctx)
}

// checkApp checks app as the document parser would, together with the
// agent's other local apps (a host port taken by another app is refused
// here, not by the runtime later), and against the volume policy.
func (a *appsService) checkApp(app control.TargetApp, all []control.TargetApp) error {
	others := slices.DeleteFunc(slices.Clone(all), func(o control.TargetApp) bool { return o.AppID == app.AppID })
	body, err := json.Marshal(append(others, app))
	if err != nil {
		return err
	}
	// The parser names fields under apps[i]; a route's body is the app.
	if _, err := control.ParseApps(body); err != nil {
		return httpapi.Invalid(unprefixed(err, fmt.Sprintf("apps[%d].", len(others))))
	}
	if err := apps.CheckVolumes("", app, a.roots); err != nil {
		return httpapi.Invalid(err)
	}
	return nil
}

// unprefixed drops prefix from each line of a joined error.
func unprefixed(err error, prefix string) error {
	var errs []error
	for _, l := range strings.Split(err.Error(), "\n") {
		if len(l) > len(prefix) && l[:len(prefix)] == prefix {
			l = l[len(prefix):]
		}
		errs = append(errs, errors.New(l))
	}
	return errors.Join(errs...)
}

// CreateApp implements httpapi.Apps.
func (a *appsService) CreateApp(ctx context.Context, app control.TargetApp) (control.TargetApp, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.managed(ctx, fmt.Sprintf("app %q", app.AppName)); err != nil {
		return app, err
	}
	st, err := a.st.Open()
	if err != nil {
		return app, err
	}
	list, err := st.Apps().List(ctx)
	if err != nil {
		return app, err
	}
	check := app
	if check.AppID == 0 {
		// The parser wants an id; the store assigns the real one.
		check.AppID = 1
		for _, o := range list {
			check.AppID = max(check.AppID, o.AppID+1)
		}
	} else if slices.ContainsFunc(list, func(o control.TargetApp) bool { return o.AppID == app.AppID }) {
		return app, httpapi.Errorf(http.StatusBadRequest, "appId: app id %d is used already", app.AppID)
	}
	if err := a.checkApp(check, list); err != nil {
		return app, err
	}
	saved, err := a.put(ctx, st, app)
	if err == nil {
		a.log.Info("app created", "app", saved.AppName, "app_id", saved.AppID, "services", len(saved.Services))
	}
	return saved, err
}

// DeleteApp implements httpapi.Apps.
func (a *appsService) DeleteApp(ctx context.Context, appID int) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.managed(ctx, fmt.Sprintf("app %d", appID)); err != nil {
		return err
	}
	st, app, err := a.local(ctx, appID)
	if err != nil {
		return err
	}
	if err := st.Apps().Delete(ctx, appID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	a.log.Info("app deleted", "app", app.AppName, "app_id", appID)
	return a.refresh(ctx)
}

// AddService implements httpapi.Apps.
func (a *appsService) AddService(ctx context.Context, appID int, svc control.TargetService) (control.TargetService, error) {
	return a.putService(ctx, appID, svc, true)
}

// PutService implements httpapi.Apps.
func (a *appsService) PutService(ctx context.Context, appID int, svc control.TargetService) (control.TargetService, error) {
	return a.putService(ctx, appID, svc, false)
}

func (a *appsService) putService(ctx context.Context, appID int, svc control.TargetService, add bool) (control.TargetService, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.managed(ctx, fmt.Sprintf("app %d", appID)); err != nil {
		return svc, err
	}
	st, app, err := a.local(ctx, appID)
	if err != nil {
		return svc, err
	}
	i := slices.IndexFunc(app.Services, func(s control.TargetService) bool { return s.ServiceName == svc.ServiceName })
	switch {
	case add && i >= 0:
		return svc, httpapi.Errorf(http.StatusBadRequest, "serviceName: app %q has a service %q already", app.AppName, svc.ServiceName)
	case !add && i < 0:
		return svc, fmt.Errorf("%w: app %d has no service %q", httpapi.ErrNotFound, appID, svc.ServiceName)
	case add:
		app.Services = append(app.Services, svc)
		i = len(app.Services) - 1
	default:
		app.Services[i] = svc
	}
	body, err := json.Marshal(svc)
	if err != nil {
		return svc, err
	}
	if svc, err = control.ParseService("", body); err != nil {
		return svc, httpapi.Invalid(err)
	}
	app.Services[i] = svc
	list, err := st.Apps().List(ctx)
	if err != nil {
		return svc, err
	}
	if err := a.checkApp(app, list); err != nil {
		return svc, err
	}
	if _, err := a.put(ctx, st, app); err != nil {
		return svc, err
	}
	return svc, nil
}

// DeleteService implements httpapi.Apps.
func (a *appsService) DeleteService(ctx context.Context, appID int, service string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.managed(ctx, fmt.Sprintf("app %d", appID)); err != nil {
		return err
	}
	st, app, err := a.local(ctx, appID)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(app.Services, func(s control.TargetService) bool { return s.ServiceName == service })
	if i < 0 {
		return fmt.Errorf("%w: app %d has no service %q", httpapi.ErrNotFound, appID, service)
	}
	app.Services = slices.Delete(app.Services, i, i+1)
	_, err = a.put(ctx, st, app)
	return err
}

// Act implements httpapi.Apps. For a local app, start and stop are
// stored as the service's state, so they hold across restarts; for an
// app of the cloud they hold until its document changes the service.
func (a *appsService) Act(ctx context.Context, appID int, service string, action httpapi.AppAction, force bool) (control.AppState, error) {
	if action == httpapi.ActionStart || action == httpapi.ActionStop {
		if err := a.storeState(ctx, appID, service, action); err != nil {
			return control.AppState{}, err
		}
	}
	st, err := a.mgr.Act(ctx, appID, service, string(action), force)
	return st, appsError(err)
}

// storeState sets the stored state of a local app's services.
func (a *appsService) storeState(ctx context.Context, appID int, service string, action httpapi.AppAction) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.cloudApps(ctx); ok {
		return nil
	}
	st, app, err := a.local(ctx, appID)
	if err != nil {
		return err
	}
	want := control.ServiceRunning
	if action == httpapi.ActionStop {
		want = control.ServiceStopped
	}
	found := false
	for i := range app.Services {
		if service == "" || app.Services[i].ServiceName == service {
			app.Services[i].State, found = want, true
		}
	}
	if !found {
		return fmt.Errorf("%w: app %d has no service %q", httpapi.ErrNotFound, appID, service)
	}
	_, err = a.put(ctx, st, app)
	return err
}

// appsError maps the Manager's errors onto the API's.
func appsError(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, apps.ErrNotFound):
		return fmt.Errorf("%w: %v", httpapi.ErrNotFound, err)
	case errors.Is(err, apps.ErrRuntimeDown):
		return fmt.Errorf("%w: %v", httpapi.ErrRuntimeDown, err)
	case errors.Is(err, apps.ErrRunning):
		return httpapi.Errorf(http.StatusConflict, "%v", err)
	}
	return err
}

// Purge implements httpapi.Apps.
func (a *appsService) Purge(ctx context.Context, appID int, force bool) error {
	return appsError(a.mgr.Purge(ctx, appID, force))
}

// Logs implements httpapi.Apps.
func (a *appsService) Logs(ctx context.Context, appID int, service string, opts httpapi.LogOptions, emit func(httpapi.LogLine) error) error {
	tail := opts.Tail
	switch {
	case tail <= 0:
		tail = 200
	case tail > 2000:
		tail = 2000
	}
	err := a.mgr.Logs(ctx, appID, service, apps.LogOptions{Tail: tail, Follow: opts.Follow, Timestamps: opts.Timestamps},
		func(l apps.LogLine) error { return emit(httpapi.LogLine{Msg: l.Msg, Stream: l.Stream}) })
	return appsError(err)
}

// RuntimeConfig implements httpapi.Apps; the key is masked.
func (a *appsService) RuntimeConfig(ctx context.Context) (httpapi.RuntimeConfig, error) {
	cfg, _ := a.mgr.Runtime()
	cfg, _ = cfg.Normalize()
	if cfg.Key != "" {
		cfg.Key = redactedKey
	}
	return httpapi.RuntimeConfig(cfg), nil
}

// SetRuntimeConfig implements httpapi.Apps.
func (a *appsService) SetRuntimeConfig(ctx context.Context, in httpapi.RuntimeConfig) error {
	cfg := apps.RuntimeConfig(in)
	if cfg.Key == redactedKey {
		old, _ := a.mgr.Runtime()
		cfg.Key = old.Key
	}
	cfg, err := cfg.Normalize()
	if err != nil {
		return httpapi.Invalid(err)
	}
	st, err := a.st.Open()
	if err != nil {
		return err
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		return err
	}
	if err := st.Apps().SetRuntimeConfig(ctx, body); err != nil {
		return err
	}
	a.mgr.Configure(a.id.Load().UUID, cfg, true)
	a.log.Info("container runtime configuration saved; reconnecting", "runtime", cfg.Address())
	return nil
}

// TestRuntime implements httpapi.Apps.
func (a *appsService) TestRuntime(ctx context.Context, in httpapi.RuntimeConfig) (httpapi.RuntimeTest, error) {
	cfg, err := apps.RuntimeConfig(in).Normalize()
	if err != nil {
		return httpapi.RuntimeTest{}, httpapi.Invalid(err)
	}
	v, n, err := apps.Probe(ctx, cfg)
	if err != nil {
		return httpapi.RuntimeTest{}, fmt.Errorf("%w: %v", httpapi.ErrRuntimeDown, err)
	}
	return httpapi.RuntimeTest{Version: v, Containers: n}, nil
}

var (
	_ httpapi.Apps   = (*appsService)(nil)
	_ reconcile.Apps = targetApps{}
)
