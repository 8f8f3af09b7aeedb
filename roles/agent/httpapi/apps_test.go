package httpapi

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
)

// fakeApps is an in-memory Apps: enough behaviour to tell the routes'
// statuses and bodies apart, no runtime.
type fakeApps struct {
	mu      sync.Mutex
	apps    []control.TargetApp
	running map[string]bool // "appId/service"
	nextID  int
	runtime control.RuntimeState
	// down makes every runtime call fail with ErrRuntimeDown.
	down bool
	// managed makes every write fail with a 409 as a cloud-managed app.
	managed bool
	cfg     RuntimeConfig
	lines   []LogLine
	// logErr is returned by Logs after its lines.
	logErr error
	// logOpts is what the last Logs call got; logsEnded is closed when
	// a following Logs returns.
	logOpts   LogOptions
	logsEnded chan struct{}
	calls     []string
}

func newFakeApps() *fakeApps {
	return &fakeApps{running: map[string]bool{}, nextID: 1, runtime: control.RuntimeState{Status: "connected"}}
}

func (f *fakeApps) call(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *fakeApps) called(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Contains(f.calls, name)
}

func (f *fakeApps) State(context.Context) (control.AppsState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := control.AppsState{Runtime: f.runtime, Apps: []control.AppState{}}
	for _, a := range f.apps {
		as := control.AppState{AppID: a.AppID, AppName: a.AppName}
		for _, s := range a.Services {
			ss := control.ServiceState{ServiceName: s.ServiceName, ImageName: s.ImageName, Target: s.State, Config: s.Config, State: "stopped"}
			if f.running[fmt.Sprintf("%d/%s", a.AppID, s.ServiceName)] {
				ss.State, ss.Status, ss.ContainerID = "running", "Up 1 second", "c-"+s.ServiceName
			}
			as.Services = append(as.Services, ss)
		}
		st.Apps = append(st.Apps, as)
	}
	return st, nil
}

func (f *fakeApps) find(id int) int {
	return slices.IndexFunc(f.apps, func(a control.TargetApp) bool { return a.AppID == id })
}

func (f *fakeApps) refuse(id int) error {
	if f.managed {
		return Errorf(http.StatusConflict, "app %d is managed by the cloud's target state (version 3); change it there", id)
	}
	return nil
}

func (f *fakeApps) CreateApp(_ context.Context, app control.TargetApp) (control.TargetApp, error) {
	f.call("CreateApp")
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse(app.AppID); err != nil {
		return app, err
	}
	if app.AppID == 0 {
		app.AppID = f.nextID
		f.nextID++
	}
	f.apps = append(f.apps, app)
	return app, nil
}

func (f *fakeApps) DeleteApp(_ context.Context, id int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.refuse(id); err != nil {
		return err
	}
	i := f.find(id)
	if i < 0 {
		return fmt.Errorf("delete app %d: %w", id, ErrNotFound)
	}
	f.apps = slices.Delete(f.apps, i, i+1)
	return nil
}

func (f *fakeApps) AddService(_ context.Context, id int, svc control.TargetService) (control.TargetService, error) {
	f.call("AddService")
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.find(id)
	if i < 0 {
		return svc, ErrNotFound
	}
	if slices.ContainsFunc(f.apps[i].Services, func(s control.TargetService) bool { return s.ServiceName == svc.ServiceName }) {
		return svc, ErrDuplicate
	}
	f.apps[i].Services = append(f.apps[i].Services, svc)
	return svc, nil
}

func (f *fakeApps) PutService(_ context.Context, id int, svc control.TargetService) (control.TargetService, error) {
	f.call("PutService")
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.find(id)
	if i < 0 {
		return svc, ErrNotFound
	}
	j := slices.IndexFunc(f.apps[i].Services, func(s control.TargetService) bool { return s.ServiceName == svc.ServiceName })
	if j < 0 {
		return svc, ErrNotFound
	}
	f.apps[i].Services[j] = svc
	return svc, nil
}

func (f *fakeApps) DeleteService(_ context.Context, id int, service string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	i := f.find(id)
	if i < 0 {
		return ErrNotFound
	}
	n := len(f.apps[i].Services)
	f.apps[i].Services = slices.DeleteFunc(f.apps[i].Services, func(s control.TargetService) bool { return s.ServiceName == service })
	if len(f.apps[i].Services) == n {
		return ErrNotFound
	}
	return nil
}

func (f *fakeApps) Act(ctx context.Context, id int, service string, action AppAction, force bool) (control.AppState, error) {
	f.call(fmt.Sprintf("Act %d %s %s %v", id, service, action, force))
	if f.down {
		return control.AppState{}, fmt.Errorf("dial unix /run/none.sock: connect: no such file or directory: %w", ErrRuntimeDown)
	}
	f.mu.Lock()
	i := f.find(id)
	if i < 0 {
		f.mu.Unlock()
		return control.AppState{}, ErrNotFound
	}
	found := false
	for _, s := range f.apps[i].Services {
		if service == "" || s.ServiceName == service {
			found = true
			f.running[fmt.Sprintf("%d/%s", id, s.ServiceName)] = action != ActionStop
		}
	}
	f.mu.Unlock()
	if !found {
		return control.AppState{}, ErrNotFound
	}
	st, _ := f.State(ctx)
	a, _ := findApp(st, id)
	return a, nil
}

func (f *fakeApps) Purge(_ context.Context, id int, force bool) error {
	f.call(fmt.Sprintf("Purge %d %v", id, force))
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.find(id) < 0 {
		return ErrNotFound
	}
	for k, on := range f.running {
		if on && strings.HasPrefix(k, fmt.Sprintf("%d/", id)) && !force {
			return Errorf(http.StatusConflict, "app %d is running; stop it or purge with force", id)
		}
	}
	return nil
}

func (f *fakeApps) Logs(ctx context.Context, _ int, _ string, opts LogOptions, emit func(LogLine) error) error {
	f.mu.Lock()
	f.logOpts = opts
	lines, logErr, ended := f.lines, f.logErr, f.logsEnded
	f.mu.Unlock()
	for _, l := range lines {
		if err := emit(l); err != nil {
			return err
		}
	}
	if logErr != nil {
		return logErr
	}
	if opts.Follow {
		<-ctx.Done()
		if ended != nil {
			close(ended)
		}
	}
	return nil
}

func (f *fakeApps) RuntimeConfig(context.Context) (RuntimeConfig, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cfg, nil
}

func (f *fakeApps) SetRuntimeConfig(_ context.Context, cfg RuntimeConfig) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cfg = cfg
	return nil
}

func (f *fakeApps) TestRuntime(_ context.Context, cfg RuntimeConfig) (RuntimeTest, error) {
	f.call("TestRuntime " + cfg.Key)
	if f.down {
		return RuntimeTest{}, fmt.Errorf("dial tcp 10.0.0.9:2375: i/o timeout: %w", ErrRuntimeDown)
	}
	return RuntimeTest{Version: "4.3.1", Containers: 2}, nil
}

const webApp = `{"appName":"web","services":[{"serviceName":"nginx","imageName":"nginx:1.27","config":{"ports":["8080:80"],"environment":{"A":"1"}}}]}`

func appsDeps(f *fakeApps) Deps {
	return Deps{Store: &fakeStore{}, Apps: f}
}

// TestAppsRoutes drives every apps route in order against one fake and
// checks the status and the body of each answer, and that a refused
// request reached nothing.
func TestAppsRoutes(t *testing.T) {
	f := newFakeApps()
	d := appsDeps(f)
	steps := []struct {
		name, method, path, body string
		code                     int
		want                     []string // substrings of the answer
		setup                    func()
	}{
		{"empty list", "GET", "/v1/apps", "", 200, []string{`"apps":[]`, `"runtime":{"status":"connected"}`}, nil},
		{"create", "POST", "/v1/apps", webApp, 201, []string{`{"appId":1,"appName":"web"}`}, nil},
		{"create with id", "POST", "/v1/apps", `{"appId":7,"appName":"db","services":[]}`, 201, []string{`"appId":7`}, nil},
		{"bad port", "POST", "/v1/apps", `{"appName":"x","services":[{"serviceName":"a","imageName":"i","config":{"ports":["80:99999"]}}]}`, 400,
			[]string{`services[0].config.ports[0]: container port`}, nil},
		{"duplicate service", "POST", "/v1/apps", `{"appName":"x","services":[{"serviceName":"a","imageName":"i"},{"serviceName":"a","imageName":"i"}]}`, 400,
			[]string{`services[1].serviceName: service \"a\" is named already at index 0`}, nil},
		{"unknown field", "POST", "/v1/apps", `{"appName":"x","services":[],"bogus":1}`, 400, []string{`bogus: unknown field`}, nil},
		{"id zero", "POST", "/v1/apps", `{"appId":0,"appName":"x","services":[]}`, 400, []string{`appId: must be 1..`}, nil},
		{"no name", "POST", "/v1/apps", `{"services":[]}`, 400, []string{`appName: is required`}, nil},
		{"array body", "POST", "/v1/apps", `[` + webApp + `]`, 400, []string{`error`}, nil},
		{"bad json", "POST", "/v1/apps", `{"appName":`, 400, []string{`error`}, nil},
		{"list", "GET", "/v1/apps", "", 200, []string{`"appName":"web"`, `"serviceName":"nginx"`, `"target":"running"`, `"restart":"unless-stopped"`}, nil},
		{"get", "GET", "/v1/apps/1", "", 200, []string{`"appId":1`, `"serviceName":"nginx"`, `"imageName":"nginx:1.27"`, `"services":[`, `"config":{"image":"nginx:1.27"`}, nil},
		{"get bad id", "GET", "/v1/apps/abc", "", 400, []string{`appId: must be a positive integer, got \"abc\"`}, nil},
		{"get id zero", "GET", "/v1/apps/0", "", 400, []string{`appId: must be a positive integer`}, nil},
		{"get missing", "GET", "/v1/apps/99", "", 404, []string{`app 99 not found`}, nil},
		{"start app", "POST", "/v1/apps/1/start", "", 200, []string{`{"containerId":"c-nginx","status":"started"}`}, nil},
		{"start app force", "POST", "/v1/apps/1/start", `{"force":true}`, 200, []string{`"status":"started"`}, nil},
		{"start app bad body", "POST", "/v1/apps/1/start", `{"forse":true}`, 400, []string{`forse`}, nil},
		{"purge running", "POST", "/v1/purge", `{"appId":1}`, 409, []string{`app 1 is running`}, nil},
		{"purge forced", "POST", "/v1/purge", `{"appId":1,"force":true}`, 200, []string{`OK`}, nil},
		{"purge no id", "POST", "/v1/purge", `{"force":true}`, 400, []string{`appId: is required`}, nil},
		{"stop app", "POST", "/v1/apps/1/stop", "", 200, []string{`{"containerId":"","status":"stopped"}`}, nil},
		{"add service", "POST", "/v1/apps/1/services", `{"serviceName":"redis","imageName":"redis:7"}`, 201, []string{`"serviceName":"redis"`, `"state":"running"`}, nil},
		{"add service twice", "POST", "/v1/apps/1/services", `{"serviceName":"redis","imageName":"redis:7"}`, 409, []string{`app 1 has a service \"redis\" already`}, nil},
		{"add service bad volume", "POST", "/v1/apps/1/services", `{"serviceName":"x","imageName":"i","config":{"volumes":["data"]}}`, 400, []string{`config.volumes[0]: `}, nil},
		{"add service missing app", "POST", "/v1/apps/5/services", `{"serviceName":"x","imageName":"i"}`, 404, []string{`app 5 not found`}, nil},
		{"put service", "PUT", "/v1/apps/1/services/redis", `{"imageName":"redis:7","config":{"environment":{"B":"2"}}}`, 200, []string{`"serviceName":"redis"`, `"B":"2"`}, nil},
		{"put service rename", "PUT", "/v1/apps/1/services/redis", `{"serviceName":"other","imageName":"redis:7"}`, 400, []string{`serviceName: must be \"redis\" as in the path`}, nil},
		{"put service bad env", "PUT", "/v1/apps/1/services/redis", `{"imageName":"redis:7","config":{"environment":{"1X":"2"}}}`, 400, []string{`config.environment.1X: is not a variable name`}, nil},
		{"put missing service", "PUT", "/v1/apps/1/services/nope", `{"imageName":"redis:7"}`, 404, []string{`app 1 has no service \"nope\"`}, nil},
		{"service restart", "POST", "/v1/apps/1/services/redis/restart", "", 200, []string{`{"action":"restart","appId":1,"serviceName":"redis"}`}, nil},
		{"service bad action", "POST", "/v1/apps/1/services/redis/kill", "", 400, []string{`action: must be start, stop or restart, got \"kill\"`}, nil},
		{"service action missing", "POST", "/v1/apps/1/services/nope/stop", "", 404, []string{`app 1 has no service \"nope\"`}, nil},
		{"restart", "POST", "/v1/restart", `{"appId":1}`, 200, []string{`OK`}, nil},
		{"restart bad id", "POST", "/v1/restart", `{"appId":-2}`, 400, []string{`appId: must be a positive integer`}, nil},
		{"restart missing", "POST", "/v1/restart", `{"appId":42}`, 404, []string{`app 42 not found`}, nil},
		{"restart runtime down", "POST", "/v1/restart", `{"appId":1}`, 503, []string{`no such file or directory: the container runtime is not reachable`}, func() { f.down = true }},
		{"delete service", "DELETE", "/v1/apps/1/services/redis", "", 204, nil, func() { f.down = false }},
		{"delete service again", "DELETE", "/v1/apps/1/services/redis", "", 404, []string{`app 1 has no service \"redis\"`}, nil},
		{"managed create", "POST", "/v1/apps", webApp, 409, []string{`managed by the cloud's target state (version 3)`}, func() { f.managed = true }},
		{"managed delete", "DELETE", "/v1/apps/1", "", 409, []string{`managed by the cloud`}, nil},
		{"managed start allowed", "POST", "/v1/apps/1/services/nginx/start", "", 200, []string{`"action":"start"`}, nil},
		{"delete", "DELETE", "/v1/apps/1", "", 204, nil, func() { f.managed = false }},
		{"delete again", "DELETE", "/v1/apps/1", "", 404, []string{`app 1 not found`}, nil},
	}
	for _, s := range steps {
		if s.setup != nil {
			s.setup()
		}
		creates := len(f.calls)
		code, body := serve(t, d, s.method, s.path, s.body)
		if code != s.code {
			t.Errorf("%s: %s %s = %d %s, want %d", s.name, s.method, s.path, code, body, s.code)
			continue
		}
		for _, w := range s.want {
			if !strings.Contains(body, w) {
				t.Errorf("%s: %s %s = %s, want it to hold %s", s.name, s.method, s.path, body, w)
			}
		}
		if code == 400 && len(f.calls) != creates {
			t.Errorf("%s: a 400 reached the implementation: %v", s.name, f.calls[creates:])
		}
	}
	// Purge and restart pass force and the id through as they came.
	for _, c := range []string{"Purge 1 true", "Act 1  restart false", "Act 1  start true"} {
		if !f.called(c) {
			t.Errorf("no call %q in %q", c, f.calls)
		}
	}
}

// TestAppsRuntimeDown: the list answers while the runtime is down, with
// the reason; the log stream, which needs it, answers 503.
func TestAppsRuntimeDown(t *testing.T) {
	f := newFakeApps()
	f.runtime = control.RuntimeState{Status: "unreachable", Error: "dial unix /var/run/docker.sock: no such file"}
	if _, err := f.CreateApp(context.Background(), control.TargetApp{AppName: "a", Services: []control.TargetService{{ServiceName: "s", ImageName: "i", State: "running"}}}); err != nil {
		t.Fatal(err)
	}
	d := appsDeps(f)
	code, body := serve(t, d, "GET", "/v1/apps", "")
	if code != 200 || !strings.Contains(body, `"runtime":{"status":"unreachable","error":"dial unix /var/run/docker.sock: no such file"}`) {
		t.Fatalf("GET /v1/apps with the runtime down = %d %s", code, body)
	}
	code, body = serve(t, d, "GET", "/v1/apps/1/services/s/logs", "")
	if code != 503 || !strings.Contains(body, "not reachable (unreachable): dial unix") {
		t.Fatalf("logs with the runtime down = %d %s", code, body)
	}
}

func TestLogQuery(t *testing.T) {
	for _, tt := range []struct {
		query string
		code  int
		want  string
		opts  LogOptions
	}{
		{"", 200, "", LogOptions{Tail: 200, Timestamps: true}},
		{"?tail=0&follow=false&timestamps=false", 200, "", LogOptions{Tail: 0}},
		{"?tail=2000&timestamps=0", 200, "", LogOptions{Tail: 2000}},
		{"?tail=2001", 400, `tail: must be an integer 0..2000, got \"2001\"`, LogOptions{}},
		{"?tail=-1", 400, `tail: must be`, LogOptions{}},
		{"?tail=ten", 400, `tail: must be`, LogOptions{}},
		{"?follow=yes", 400, `follow: must be true or false, got \"yes\"`, LogOptions{}},
		{"?timestamps=", 400, `timestamps: must be true or false`, LogOptions{}},
	} {
		f := newFakeApps()
		f.apps = []control.TargetApp{{AppID: 3, AppName: "a", Services: []control.TargetService{{ServiceName: "s", ImageName: "i"}}}}
		code, body := serve(t, appsDeps(f), "GET", "/v1/apps/3/services/s/logs"+tt.query, "")
		if code != tt.code || !strings.Contains(body, tt.want) {
			t.Errorf("logs%s = %d %s, want %d %s", tt.query, code, body, tt.code, tt.want)
			continue
		}
		if code == 200 && f.logOpts != tt.opts {
			t.Errorf("logs%s gave Logs %+v, want %+v", tt.query, f.logOpts, tt.opts)
		}
	}
}

// TestLogStreamFraming: the spec's headers, one data line per log line
// (a newline in a line stays inside its JSON), and a failure once the
// stream runs as an error event.
func TestLogStreamFraming(t *testing.T) {
	f := newFakeApps()
	f.apps = []control.TargetApp{{AppID: 3, AppName: "a", Services: []control.TargetService{{ServiceName: "s", ImageName: "i"}}}}
	f.lines = []LogLine{{Msg: "hello", Stream: "stdout"}, {Msg: "two\nlines", Stream: "stderr"}}
	f.logErr = fmt.Errorf("read log: %w", ErrRuntimeDown)
	d := appsDeps(f)
	d.Log = slog.New(slog.DiscardHandler)
	d.Metrics = prometheus.NewRegistry()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/v1/apps/3/services/s/logs?tail=5", nil)
	req.Host = "localhost"
	New(d).ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("status %d %s", rec.Code, rec.Body)
	}
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "Connection": "keep-alive"} {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	want := ": connected\nretry: 3000\n\n" +
		`data: {"msg":"hello","stream":"stdout"}` + "\n\n" +
		`data: {"msg":"two\nlines","stream":"stderr"}` + "\n\n" +
		"event: error\n" + `data: {"error":"read log: the container runtime is not reachable"}` + "\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("stream =\n%s\nwant\n%s", got, want)
	}
	for _, tt := range []struct{ path, want string }{
		{"/v1/apps/4/services/s/logs", "app 4 not found"},
		{"/v1/apps/3/services/t/logs", `app 3 has no service \"t\"`},
	} {
		if code, body := serve(t, d, "GET", tt.path, ""); code != 404 || !strings.Contains(body, tt.want) {
			t.Errorf("GET %s = %d %s, want 404 %s", tt.path, code, body, tt.want)
		}
	}
}

// TestLogStreamFollow: a following stream sends heartbeats, lets the
// store go (a reboot must not wait for it) and ends Logs when the client
// leaves.
func TestLogStreamFollow(t *testing.T) {
	old := sseHeartbeat
	sseHeartbeat = 20 * time.Millisecond
	t.Cleanup(func() { sseHeartbeat = old })
	f := newFakeApps()
	f.apps = []control.TargetApp{{AppID: 3, AppName: "a", Services: []control.TargetService{{ServiceName: "s", ImageName: "i"}}}}
	f.lines = []LogLine{{Msg: "first", Stream: "stdout"}}
	f.logsEnded = make(chan struct{})
	st := &fakeStore{}
	d := Deps{Store: st, Apps: f, Log: slog.New(slog.DiscardHandler), Metrics: prometheus.NewRegistry()}
	srv := httptest.NewServer(New(d))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/v1/apps/3/services/s/logs?follow=true", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = res.Body.Close() }()
	sc := bufio.NewScanner(res.Body)
	var got []string
	for sc.Scan() {
		got = append(got, sc.Text())
		if sc.Text() == ": keepalive" {
			break
		}
	}
	if !slices.Contains(got, `data: {"msg":"first","stream":"stdout"}`) || got[len(got)-1] != ": keepalive" {
		t.Fatalf("stream = %q, want the line then a keepalive", got)
	}
	if st.held != 1 || st.released != 1 {
		t.Errorf("store held %d, released %d times while the stream runs; want it let go", st.held, st.released)
	}
	cancel()
	<-f.logsEnded // Logs returns once the client left
}

func TestDockerRoutes(t *testing.T) {
	const pemCA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
	const pemKey = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"
	tlsBody := func(key string) string {
		b, _ := json.Marshal(RuntimeConfig{Type: "tcp+tls", Host: "10.0.0.9", CA: pemCA, Cert: pemCA, Key: key})
		return string(b)
	}
	f := newFakeApps()
	f.cfg = RuntimeConfig{Type: "socket", SocketPath: "/var/run/docker.sock"}
	d := appsDeps(f)
	steps := []struct {
		name, method, path, body string
		code                     int
		want                     string
		setup                    func()
	}{
		{"read", "GET", "/v1/docker/config", "", 200, `{"type":"socket","socketPath":"/var/run/docker.sock"}`, nil},
		{"masked key kept without one", "POST", "/v1/docker/config", tlsBody(MaskedKey), 400, `key: no key is stored`, nil},
		{"save tls", "POST", "/v1/docker/config", tlsBody(pemKey), 200, `{"ok":true}`, nil},
		{"read masks key", "GET", "/v1/docker/config", "", 200, `"key":"********"`, nil},
		{"save with mask keeps key", "POST", "/v1/docker/config", tlsBody(MaskedKey), 200, `{"ok":true}`, nil},
		{"test", "POST", "/v1/docker/test", `{"type":"tcp","host":"10.0.0.9","port":2375}`, 200, `{"version":"4.3.1","containers":2}`, nil},
		{"test with mask", "POST", "/v1/docker/test", tlsBody(MaskedKey), 200, `"version"`, nil},
		{"no type", "POST", "/v1/docker/config", `{}`, 400, `type: is required`, nil},
		{"bad type", "POST", "/v1/docker/config", `{"type":"ssh"}`, 400, `type: must be socket, tcp or tcp+tls, got \"ssh\"`, nil},
		{"relative socket", "POST", "/v1/docker/config", `{"type":"socket","socketPath":"run/x.sock"}`, 400, `socketPath: must be a clean absolute path`, nil},
		{"socket with host", "POST", "/v1/docker/config", `{"type":"socket","host":"h"}`, 400, `host: is not used with type \"socket\"`, nil},
		{"tcp no host", "POST", "/v1/docker/config", `{"type":"tcp"}`, 400, `host: is required`, nil},
		{"tcp url host", "POST", "/v1/docker/config", `{"type":"tcp","host":"tcp://h:2375"}`, 400, `host: must be a host name`, nil},
		{"tcp ipv6 host", "POST", "/v1/docker/test", `{"type":"tcp","host":"fd00::9"}`, 200, `"version"`, nil},
		{"tcp bad port", "POST", "/v1/docker/config", `{"type":"tcp","host":"h","port":70000}`, 400, `port: must be 1..65535`, nil},
		{"tls no ca", "POST", "/v1/docker/config", `{"type":"tcp+tls","host":"h"}`, 400, `ca: is required`, nil},
		{"tls bad pem", "POST", "/v1/docker/config", `{"type":"tcp+tls","host":"h","ca":"nope"}`, 400, `ca: is not PEM`, nil},
		{"unknown field", "POST", "/v1/docker/config", `{"type":"tcp","hots":"h"}`, 400, `hots`, nil},
		{"test unreachable", "POST", "/v1/docker/test", `{"type":"tcp","host":"10.0.0.9"}`, 503, `i/o timeout: the container runtime is not reachable`, func() { f.down = true }},
	}
	for _, s := range steps {
		if s.setup != nil {
			s.setup()
		}
		code, body := serve(t, d, s.method, s.path, s.body)
		if code != s.code || !strings.Contains(body, s.want) {
			t.Errorf("%s: %s %s = %d %s, want %d %s", s.name, s.method, s.path, code, body, s.code, s.want)
		}
	}
	if f.cfg.Key != pemKey {
		t.Errorf("stored key %q after a save with the mask, want the key saved before", f.cfg.Key)
	}
	if !f.called("TestRuntime " + pemKey) {
		t.Errorf("a test with the mask did not get the stored key: %q", f.calls)
	}
}
