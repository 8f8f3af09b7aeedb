package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

const (
	agentUUID = "BBBBBBBBBBBBBBBBBBBBBB"
	deviceKey = "device-key-for-tests"
)

// fakeAPI implements the two agent routes of the Cloud API's jobs
// (docs/fleets-and-jobs.md) over an in-memory execution table: the
// peer the agent is a client of, run as a real HTTP server.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	execs    []control.JobDispatch // released executions, oldest first
	status   map[string]control.ExecStatus
	updates  map[string][]control.JobStatusUpdate
	failEnds int // terminal updates to answer 503 before taking one
	nexts    int
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{t: t, status: map[string]control.ExecStatus{}, updates: map[string][]control.JobStatusUpdate{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/agents/{uuid}/jobs/next", f.next)
	mux.HandleFunc("PATCH /api/v1/agents/{uuid}/jobs/{job}/status", f.patch)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

func apiError(w http.ResponseWriter, status int, code, msg string, extra map[string]any) {
	e := map[string]any{"code": code, "message": msg}
	for k, v := range extra {
		e[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": e})
}

func (f *fakeAPI) auth(w http.ResponseWriter, r *http.Request) bool {
	if r.PathValue("uuid") != agentUUID || r.Header.Get("X-Device-API-Key") != deviceKey {
		apiError(w, http.StatusUnauthorized, "unauthorized", "bad device key", nil)
		return false
	}
	return true
}

func (f *fakeAPI) next(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nexts++
	for _, d := range f.execs {
		if st := f.status[d.JobID]; st == control.ExecQueued || st == control.ExecInProgress {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(d)
			return
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (f *fakeAPI) patch(w http.ResponseWriter, r *http.Request) {
	if !f.auth(w, r) {
		return
	}
	var u control.JobStatusUpdate
	if err := json.NewDecoder(r.Body).Decode(&u); err != nil || u.Check() != nil {
		apiError(w, http.StatusUnprocessableEntity, "validation_failed", "bad update", nil)
		return
	}
	id := r.PathValue("job")
	f.mu.Lock()
	defer f.mu.Unlock()
	cur, ok := f.status[id]
	switch {
	case !ok:
		apiError(w, http.StatusNotFound, "not_found", "no such execution", nil)
	case cur.Terminal():
		apiError(w, http.StatusConflict, control.CodeExecutionEnded, "the execution ended "+string(cur), map[string]any{"status": cur})
	case !cur.CanMove(u.Status):
		apiError(w, http.StatusUnprocessableEntity, "validation_failed", "status: cannot move", nil)
	case u.Status.Terminal() && f.failEnds > 0:
		f.failEnds--
		apiError(w, http.StatusServiceUnavailable, "unavailable", "try later", nil)
	default:
		f.status[id] = u.Status
		f.updates[id] = append(f.updates[id], u)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"` + string(u.Status) + `"}`))
	}
}

// add releases a new execution and returns its dispatch.
func (f *fakeAPI) add(handler string, params string, timeout int) control.JobDispatch {
	d := control.JobDispatch{JobID: codec.NewUUID().String(), Handler: handler, TimeoutSeconds: timeout, QueuedAt: time.Now().UTC()}
	if params != "" {
		d.Params = json.RawMessage(params)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.execs = append(f.execs, d)
	f.status[d.JobID] = control.ExecQueued
	return d
}

// end ends an execution in the cloud (a cancel, the scheduler's timeout).
func (f *fakeAPI) end(jobID string, st control.ExecStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status[jobID] = st
}

func (f *fakeAPI) statusOf(jobID string) control.ExecStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.status[jobID]
}

// final returns the terminal update the cloud took for jobID.
func (f *fakeAPI) final(jobID string) (control.JobStatusUpdate, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.updates[jobID] {
		if u.Status.Terminal() {
			return u, true
		}
	}
	return control.JobStatusUpdate{}, false
}

// apiCloud is Cloud through the agent's real client.
type apiCloud struct {
	c  *cloud.Client
	cr cloud.Credentials
}

func (a apiCloud) NextJob(ctx context.Context) (control.JobDispatch, bool, error) {
	return a.c.NextJob(ctx, a.cr)
}

func (a apiCloud) ReportJob(ctx context.Context, jobID string, u control.JobStatusUpdate) error {
	return a.c.ReportJob(ctx, a.cr, jobID, u)
}

// actions counts the handlers' calls; block makes a call wait for its
// context (a long job).
type actions struct {
	mu      sync.Mutex
	calls   map[string]int
	block   atomic.Bool
	started chan string
	reboot  func()
}

func newActions() *actions {
	return &actions{calls: map[string]int{}, started: make(chan string, 16)}
}

func (a *actions) call(ctx context.Context, name string) error {
	a.mu.Lock()
	a.calls[name]++
	a.mu.Unlock()
	select {
	case a.started <- name:
	default:
	}
	if a.block.Load() {
		<-ctx.Done()
		return ctx.Err()
	}
	return nil
}

func (a *actions) count(name string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[name]
}

func (a *actions) Reboot() error {
	a.mu.Lock()
	a.calls["reboot"]++
	a.mu.Unlock()
	if a.reboot != nil {
		a.reboot()
	}
	return nil
}

func (a *actions) Sync(ctx context.Context) (int64, error) { return 7, a.call(ctx, "sync") }

func (a *actions) RestartEndpoint(ctx context.Context, endpoint string) error {
	if endpoint != "plc1" {
		return errors.Join(ErrInvalidParams, errors.New("no endpoint "+endpoint))
	}
	return a.call(ctx, "restart")
}

func (a *actions) Write(ctx context.Context, endpoint, register string, value any) (any, error) {
	return value, a.call(ctx, "write")
}

func (a *actions) UploadLogs(ctx context.Context) (string, error) {
	return "shipped 3 log lines", a.call(ctx, "logs")
}

func (a *actions) Diagnostics(ctx context.Context) (map[string]any, error) {
	return map[string]any{"memory": map[string]any{"rss": 1}, "db": map[string]any{}, "health": map[string]any{"overall": "ok"}}, a.call(ctx, "diagnostics")
}

type platform struct{ up atomic.Bool }

func (p *platform) PlatformConnected() bool { return p.up.Load() }

// harness is a jobs service over a real store and the fake API.
type harness struct {
	t        *testing.T
	dir      string
	st       *store.Store
	api      *fakeAPI
	act      *actions
	platform *platform
	svc      *Service
	reg      *prometheus.Registry
	cancel   context.CancelFunc
	done     chan struct{}
}

func newHarness(t *testing.T, api *fakeAPI, dir string, mutate func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, api: api, act: newActions(), platform: &platform{}, reg: prometheus.NewRegistry()}
	var err error
	if h.st, err = store.Open(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	client, err := cloud.NewClient(api.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Store:    func() (*store.Store, error) { return h.st, nil },
		Cloud:    apiCloud{c: client, cr: cloud.Credentials{APIEndpoint: api.srv.URL, AgentUUID: agentUUID, APIKey: deviceKey}},
		Actions:  h.act,
		Platform: h.platform,
		// Long enough that the tests see the dispatch paths, not the
		// timer, unless they shorten it.
		PollInterval: func() time.Duration { return time.Hour },
		Tick:         20 * time.Millisecond,
		RetryMin:     10 * time.Millisecond,
		RetryMax:     50 * time.Millisecond,
		Metrics:      h.reg,
	}
	if mutate != nil {
		mutate(&o)
	}
	h.svc = New(o)
	return h
}

// start runs the service as the agent's group would.
func (h *harness) start() *harness {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := h.svc.Start(ctx); err != nil {
		cancel()
		h.t.Fatal(err)
	}
	h.cancel, h.done = cancel, make(chan struct{})
	go func() {
		defer close(h.done)
		_ = h.svc.Run(ctx)
	}()
	h.t.Cleanup(h.kill)
	return h
}

// kill stops the service and closes the store, as a process kill leaves
// them: nothing is finished on the way out.
func (h *harness) kill() {
	if h.cancel == nil {
		return
	}
	h.cancel()
	<-h.done
	h.cancel = nil
	_ = h.st.Close()
}

func (h *harness) job(id string) store.Job {
	h.t.Helper()
	j, err := h.st.Jobs().Get(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return j
}

// waitFinal waits for the cloud to take a terminal status of id.
func (h *harness) waitFinal(id string) control.JobStatusUpdate {
	h.t.Helper()
	var u control.JobStatusUpdate
	coretest.Eventually(h.t, 10*time.Second, "the final status of "+id, func() bool {
		var ok bool
		u, ok = h.api.final(id)
		return ok
	})
	return u
}

func (h *harness) dispatch(d control.JobDispatch) {
	b, err := json.Marshal(d)
	if err != nil {
		h.t.Fatal(err)
	}
	h.svc.HandleJob(context.Background(), b)
}

func (h *harness) cancelJob(id string) {
	h.svc.HandleCancel(context.Background(), []byte(`{"jobId":"`+id+`"}`))
}
