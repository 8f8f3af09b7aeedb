package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/jobs/jobstest"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

const (
	agentUUID = "BBBBBBBBBBBBBBBBBBBBBB"
	deviceKey = "device-key-for-tests"
)

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

func (a *actions) RestartApp(ctx context.Context, appID int) error {
	if appID != 3 {
		return errors.Join(ErrInvalidParams, fmt.Errorf("no app %d", appID))
	}
	return a.call(ctx, "restart-app")
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
	api      *jobstest.API
	act      *actions
	platform *platform
	svc      *Service
	reg      *prometheus.Registry
	cancel   context.CancelFunc
	done     chan struct{}
}

func newHarness(t *testing.T, api *jobstest.API, dir string, mutate func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, dir: dir, api: api, act: newActions(), platform: &platform{}, reg: prometheus.NewRegistry()}
	var err error
	if h.st, err = store.Open(context.Background(), dir, nil); err != nil {
		t.Fatal(err)
	}
	client, err := cloud.NewClient(api.URL())
	if err != nil {
		t.Fatal(err)
	}
	o := Options{
		Store:    func() (*store.Store, error) { return h.st, nil },
		Cloud:    apiCloud{c: client, cr: cloud.Credentials{APIEndpoint: api.URL(), AgentUUID: agentUUID, APIKey: deviceKey}},
		Actions:  h.act,
		Apps:     h.act,
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
		u, ok = h.api.Final(id)
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
