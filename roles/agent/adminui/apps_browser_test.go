package adminui_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/roles/agent/adminui"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
)

// memAdmins keeps the admin users and sessions in memory.
type memAdmins struct {
	mu       sync.Mutex
	users    map[string]httpapi.AdminUser
	sessions map[string]string
}

func (m *memAdmins) Admin(_ context.Context, name string) (httpapi.AdminUser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.users[name]
	if !ok {
		return u, httpapi.ErrNotFound
	}
	return u, nil
}

func (m *memAdmins) Admins(context.Context) ([]httpapi.AdminUser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []httpapi.AdminUser
	for _, u := range m.users {
		out = append(out, u)
	}
	return out, nil
}

func (m *memAdmins) CreateAdmin(_ context.Context, u httpapi.AdminUser) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users[u.Username] = u
	return nil
}

func (m *memAdmins) CreateFirstAdmin(_ context.Context, u httpapi.AdminUser) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.users) > 0 {
		return false, nil
	}
	u.Superuser, u.Active = true, true
	m.users[u.Username] = u
	return true, nil
}

func (m *memAdmins) UpdateAdmin(context.Context, string, httpapi.AdminPatch) (httpapi.AdminUser, error) {
	return httpapi.AdminUser{}, httpapi.Errorf(http.StatusNotImplemented, "not in this test")
}

func (m *memAdmins) DeleteAdmin(context.Context, string) error {
	return httpapi.Errorf(http.StatusNotImplemented, "not in this test")
}

func (m *memAdmins) CreateSession(_ context.Context, idHash, name string, _ time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sessions[idHash] = name
	return nil
}

func (m *memAdmins) SessionUser(_ context.Context, idHash string, _ time.Time) (httpapi.AdminUser, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name, ok := m.sessions[idHash]
	if !ok {
		return httpapi.AdminUser{}, httpapi.ErrNotFound
	}
	return m.users[name], nil
}

func (m *memAdmins) DeleteSession(_ context.Context, idHash string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sessions, idHash)
	return nil
}

func (m *memAdmins) PurgeSessions(context.Context, time.Time) (int64, error) { return 0, nil }

// memApps is an httpapi.Apps without a runtime: a created service runs
// at once and its log is a few lines, then quiet while followed.
type memApps struct {
	mu      sync.Mutex
	apps    []control.TargetApp
	stopped map[string]bool
	cfg     httpapi.RuntimeConfig
}

func (m *memApps) State(context.Context) (control.AppsState, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := control.AppsState{Runtime: control.RuntimeState{Status: "connected", Version: "4.3.1"}, Apps: []control.AppState{}}
	for _, a := range m.apps {
		as := control.AppState{AppID: a.AppID, AppName: a.AppName}
		for _, s := range a.Services {
			ss := control.ServiceState{ServiceName: s.ServiceName, ImageName: s.ImageName, Target: s.State, Config: s.Config,
				State: "running", Status: "Up 1 second", ContainerID: "c-" + s.ServiceName}
			if m.stopped[s.ServiceName] {
				ss.State, ss.Status = "exited", "Exited (0)"
			}
			as.Services = append(as.Services, ss)
		}
		st.Apps = append(st.Apps, as)
	}
	return st, nil
}

func (m *memApps) CreateApp(_ context.Context, a control.TargetApp) (control.TargetApp, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a.AppID = len(m.apps) + 1
	m.apps = append(m.apps, a)
	return a, nil
}

func (m *memApps) DeleteApp(context.Context, int) error {
	return httpapi.Errorf(501, "not in this test")
}
func (m *memApps) AddService(context.Context, int, control.TargetService) (control.TargetService, error) {
	return control.TargetService{}, httpapi.Errorf(501, "not in this test")
}

func (m *memApps) PutService(_ context.Context, id int, svc control.TargetService) (control.TargetService, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := range m.apps {
		for j := range m.apps[i].Services {
			if m.apps[i].AppID == id && m.apps[i].Services[j].ServiceName == svc.ServiceName {
				m.apps[i].Services[j] = svc
				return svc, nil
			}
		}
	}
	return svc, httpapi.ErrNotFound
}

func (m *memApps) DeleteService(context.Context, int, string) error {
	return httpapi.Errorf(501, "not in this test")
}

func (m *memApps) Act(ctx context.Context, id int, service string, action httpapi.AppAction, _ bool) (control.AppState, error) {
	m.mu.Lock()
	m.stopped[service] = action == httpapi.ActionStop
	m.mu.Unlock()
	st, _ := m.State(ctx)
	for _, a := range st.Apps {
		if a.AppID == id {
			return a, nil
		}
	}
	return control.AppState{}, httpapi.ErrNotFound
}

func (m *memApps) Purge(context.Context, int, bool) error {
	return httpapi.Errorf(501, "not in this test")
}

func (m *memApps) Logs(ctx context.Context, _ int, service string, opts httpapi.LogOptions, emit func(httpapi.LogLine) error) error {
	for i := range 3 {
		if err := emit(httpapi.LogLine{Msg: fmt.Sprintf("%s tick %d", service, i), Stream: "stdout"}); err != nil {
			return err
		}
	}
	if opts.Follow {
		<-ctx.Done()
	}
	return nil
}

func (m *memApps) RuntimeConfig(context.Context) (httpapi.RuntimeConfig, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cfg, nil
}

func (m *memApps) SetRuntimeConfig(_ context.Context, cfg httpapi.RuntimeConfig) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cfg = cfg
	return nil
}

func (m *memApps) TestRuntime(context.Context, httpapi.RuntimeConfig) (httpapi.RuntimeTest, error) {
	return httpapi.RuntimeTest{Version: "4.3.1", Containers: 5}, nil
}

type openStore struct{}

func (openStore) Hold() func() { return func() {} }

// TestAdminUIAppsPagesIntegration drives the apps pages in Chromium over
// the agent's routes with an in-memory Apps: the deploy form shows the
// API's 400 by the field it names, then deploys; the app page shows the
// service running and its log lines arriving over SSE; a service action
// and an edit go through; the runtime form's test answers. (Against a
// real runtime: the podman tests of roles/agent.)
func TestAdminUIAppsPagesIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser")
	}
	site, err := adminui.New()
	if err != nil {
		t.Fatal(err)
	}
	apps := &memApps{stopped: map[string]bool{}, cfg: httpapi.RuntimeConfig{Type: "socket", SocketPath: "/run/podman/podman.sock"}}
	srv := httptest.NewServer(httpapi.New(httpapi.Deps{
		Log: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Store: openStore{},
		Admins: &memAdmins{users: map[string]httpapi.AdminUser{}, sessions: map[string]string{}},
		Apps:   apps, UI: site,
	}))
	t.Cleanup(srv.Close)
	u := newUI(t, srv.URL)
	u.Run("open the UI", chromedp.Navigate(srv.URL+"/admin/"))
	u.WaitForPage("setup form", `document.querySelector('#setup') !== null`)
	u.Run("fill setup",
		chromedp.SendKeys(`#setup [data-input="username"]`, "root", chromedp.ByQuery),
		chromedp.SendKeys(`#setup [data-input="password"]`, "correct horse"+kb.Enter, chromedp.ByQuery))
	u.WaitFor("logged in", `document.querySelector('#logout') !== null`)

	u.goTo("#/apps", "#apps p.empty")
	u.WaitFor("runtime shown", `document.querySelector('#apps-runtime').textContent.includes('connected')`)
	u.goTo("#/apps/new", "#app-form")
	u.set("#app-form", "appName", "shop")
	u.set("#app-form", "services[0].serviceName", "web")
	u.set("#app-form", "services[0].imageName", "localhost/ticker:test")
	u.set("#app-form", "services[0].config.ports", "8080:80\n8081:99999")
	u.set("#app-form", "services[0].config.environment", "GREETING=hi there")
	u.submit("deploy with a bad port", "#app-form")
	u.WaitFor("port error by its field",
		`(document.querySelector('[data-field="services[0].config.ports"] .field-error') || {}).textContent?.includes('container port')`)
	if len(apps.apps) != 0 {
		t.Fatalf("a refused form created %v", apps.apps)
	}
	u.set("#app-form", "services[0].config.ports", "8080:80")
	u.submit("deploy", "#app-form")
	u.WaitFor("app page", `location.hash === '#/apps/1'`)
	u.WaitFor("service running", `(document.querySelector('[data-state="shop/web"]') || {}).textContent?.includes('running')`)
	u.WaitFor("log lines", `document.querySelectorAll('#app-log .log-line').length >= 3`)
	if got := u.text("#app-log"); !strings.Contains(got, "web tick 2") {
		t.Errorf("log view = %q", got)
	}
	if env := apps.apps[0].Services[0].Config.Environment; env["GREETING"] != "hi there" {
		t.Errorf("deployed environment = %v", env)
	}

	u.Run("stop web", chromedp.Click(`[data-action="web/stop"]`, chromedp.ByQuery))
	u.WaitFor("service stopped", `(document.querySelector('[data-state="shop/web"]') || {}).textContent?.includes('exited')`)
	u.Run("edit web", chromedp.Click(`[data-edit="web"]`, chromedp.ByQuery))
	u.WaitFor("edit form", `document.querySelector('#service-form') !== null`)
	u.set("#service-form", "config.environment", "GREETING=hello")
	u.submit("save", "#service-form")
	u.WaitFor("saved", `document.querySelector('#app-status').textContent.includes('saved')`)
	apps.mu.Lock()
	env := apps.apps[0].Services[0].Config.Environment
	apps.mu.Unlock()
	if env["GREETING"] != "hello" || len(env) != 1 {
		t.Errorf("environment after the edit = %v", env)
	}

	u.goTo("#/apps", `[data-app="shop"]`)
	u.WaitFor("runtime form", `document.querySelector('#runtime-form') !== null`)
	u.Run("test runtime", chromedp.Click("#test-runtime", chromedp.ByQuery))
	u.WaitFor("test answer", `document.querySelector('#runtime-status').textContent.includes('engine 4.3.1, 5 containers')`)
	if p := u.Problems(); len(p) > 0 {
		t.Errorf("page errors and CSP violations: %v", p)
	}
}
