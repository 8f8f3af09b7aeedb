// Package jobs runs the cloud's job executions on the agent
// (docs/agent.md, section Jobs): it takes control.CmdJob and
// control.CmdJobCancel from the command dispatcher, polls the cloud's
// GET /agents/:uuid/jobs/next, keeps one durable row per jobId in the
// agent's store so an execution runs at most once, runs executions one at
// a time in arrival order and reports each one's status until the cloud
// has taken it.
package jobs

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// ErrNoCloud is what a Cloud answers while the agent is not provisioned:
// there is nothing to poll and nobody to report to yet.
var ErrNoCloud = errors.New("the agent is not provisioned: no cloud to take jobs from")

// ErrInvalidParams marks an action's refusal of its parameters (an
// endpoint that does not exist): the execution fails with
// control.ReasonInvalidParams.
var ErrInvalidParams = errors.New("invalid params")

// AppRestarter restarts the services of one app, as
// POST /v1/apps/:appId/services/:serviceName/restart does for each.
// An app the agent does not know is ErrInvalidParams.
type AppRestarter interface {
	RestartApp(ctx context.Context, appID int) error
}

// Cloud is the agent's side of the two job routes of the Cloud API.
type Cloud interface {
	// NextJob is GET /agents/:uuid/jobs/next; ok is false on 204.
	NextJob(ctx context.Context) (d control.JobDispatch, ok bool, err error)
	// ReportJob is PATCH /agents/:uuid/jobs/:jobId/status; a 409
	// control.CodeExecutionEnded is a *cloud.EndedError.
	ReportJob(ctx context.Context, jobID string, u control.JobStatusUpdate) error
}

// Actions are what the handlers act on, implemented by roles/agent.
type Actions interface {
	// Reboot restarts the agent's services (a soft reboot); it returns
	// at once, the restart follows.
	Reboot() error
	// Sync pulls the target state now and returns its version.
	Sync(ctx context.Context) (int64, error)
	// RestartEndpoint stops and starts the adapter of the endpoint
	// named; ErrInvalidParams when there is no such endpoint.
	RestartEndpoint(ctx context.Context, endpoint string) error
	// Write writes value to a register of the endpoint's device, as
	// POST /v1/adapters/:protocol/devices/:device/write does.
	Write(ctx context.Context, endpoint, register string, value any) (any, error)
	// UploadLogs ships the agent's buffered log lines now and says what
	// it shipped.
	UploadLogs(ctx context.Context) (string, error)
	// Diagnostics returns what GET /v1/memory, GET /v1/db/stats and the
	// health report answer, by the names memory, db and health.
	Diagnostics(ctx context.Context) (map[string]any, error)
}

// Platform tells whether the platform connection is up; the service
// polls at once when it comes back.
type Platform interface {
	PlatformConnected() bool
}

// Defaults of Options.
const (
	DefaultQueueSize = 100
	DefaultTick      = time.Second
	DefaultRetryMin  = time.Second
	DefaultRetryMax  = time.Minute
)

// Options builds a Service. Store, Cloud, Actions, Platform and
// PollInterval are required.
type Options struct {
	// Store returns the agent's open store, or an error while it is not.
	Store    func() (*store.Store, error)
	Cloud    Cloud
	Actions  Actions
	Platform Platform
	// PollInterval returns intervals.jobPollMs as in force now; it is
	// also the period of the in_progress heartbeat.
	PollInterval func() time.Duration
	// Apps restarts apps for restart-app; nil on an agent built without
	// them, where the handler fails.
	Apps AppRestarter
	// Shell is agent.jobs_shell: the shell handler runs only when set.
	Shell bool
	// QueueSize bounds the executions received and not started.
	QueueSize int
	// Tick is how often the platform connection is looked at.
	Tick time.Duration
	// RetryMin and RetryMax bound the backoff of a status report the
	// cloud did not take.
	RetryMin, RetryMax time.Duration
	Log                *slog.Logger
	Metrics            prometheus.Registerer
}

// Service is the jobs service, a lifecycle service of the agent's group.
// Its Start and Run may be called again after Run returned (a soft
// reboot).
type Service struct {
	o   Options
	m   *metrics
	rep reporter
	h   handlers
	// inbox carries the dispatcher's commands to the service's loop, so
	// the MQTT goroutine never waits on the store.
	inbox chan message
	wake  chan struct{} // the worker: a new execution is queued
	kick  chan struct{} // the loop: poll now

	mu   sync.Mutex
	jobs *store.Jobs
	cur  *current
}

// message is one command for the loop: a dispatch or a cancel.
type message struct {
	dispatch *control.JobDispatch
	cancel   string
}

// current is the execution the worker has taken.
type current struct {
	id     string
	cancel context.CancelCauseFunc
}

// errCancelled is the cause of an execution's context when CmdJobCancel
// or the cloud's 409 to a heartbeat stopped it.
var errCancelled = errors.New("execution cancelled")

// New builds the service and registers its metrics; it does no I/O.
func New(o Options) *Service {
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Tick <= 0 {
		o.Tick = DefaultTick
	}
	if o.RetryMin <= 0 {
		o.RetryMin = DefaultRetryMin
	}
	if o.RetryMax < o.RetryMin {
		o.RetryMax = max(DefaultRetryMax, o.RetryMin)
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Service{
		o: o, m: newMetrics(o.Metrics),
		rep:   reporter{cloud: o.Cloud, log: o.Log, min: o.RetryMin, max: o.RetryMax},
		h:     handlers{actions: o.Actions, apps: o.Apps, shell: o.Shell, log: o.Log},
		inbox: make(chan message, o.QueueSize),
		wake:  make(chan struct{}, 1),
		kick:  make(chan struct{}, 1),
	}
}

// Name implements lifecycle.Service.
func (s *Service) Name() string { return "jobs" }

// Start finishes what the last run left (docs/agent.md, section Jobs):
// an execution left running runs again when its handler is idempotent,
// a reboot ends succeeded (it did its work), any other ends failed with
// control.ReasonAgentRestarted. Their reports, and any final report the
// cloud had not taken, go out from Run.
func (s *Service) Start(ctx context.Context) error {
	st, err := s.o.Store()
	if err != nil {
		return err
	}
	jobs := st.Jobs()
	open, err := jobs.Open(ctx)
	if err != nil {
		return err
	}
	for _, j := range open {
		if j.State != store.JobRunning {
			continue
		}
		switch {
		case j.Handler == control.HandlerReboot:
			_, err = jobs.End(ctx, j.JobID, store.JobEnd{Status: string(control.ExecSucceeded), Result: "the agent restarted"}, false)
		case control.IdempotentHandler(j.Handler):
			s.o.Log.Info("job was running when the agent stopped; running it again", "job", j.JobID, "handler", j.Handler)
			err = jobs.SetState(ctx, j.JobID, store.JobReceived)
		default:
			s.o.Log.Warn("job was running when the agent stopped; it ends failed", "job", j.JobID, "handler", j.Handler)
			_, err = jobs.End(ctx, j.JobID, store.JobEnd{Status: string(control.ExecFailed), Reason: control.ReasonAgentRestarted,
				Result: "the agent restarted while the job ran"}, false)
		}
		if err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.jobs = jobs
	s.mu.Unlock()
	return nil
}

// Stop implements lifecycle.Service; Run ends everything it started.
func (s *Service) Stop(context.Context) error { return nil }

// Run polls and runs executions until ctx ends. An execution running
// then is left as it is in the store: the next Start decides its fate.
func (s *Service) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { s.work(ctx) })
	s.loop(ctx)
	wg.Wait()
	return nil
}

// HandleJob handles control.CmdJob; it only queues the dispatch for the
// service's loop.
func (s *Service) HandleJob(_ context.Context, payload []byte) {
	d, err := control.DecodeJobDispatch(payload)
	if err != nil {
		s.o.Log.Warn("job dispatch ignored", "err", err)
		return
	}
	s.post(message{dispatch: &d})
}

// HandleCancel handles control.CmdJobCancel: an execution that runs is
// cancelled at once; the loop ends a queued one.
func (s *Service) HandleCancel(_ context.Context, payload []byte) {
	c, err := control.DecodeJobCancel(payload)
	if err != nil {
		s.o.Log.Warn("job cancel ignored", "err", err)
		return
	}
	if s.cancelCurrent(c.JobID) {
		return
	}
	s.post(message{cancel: c.JobID})
}

func (s *Service) post(m message) {
	select {
	case s.inbox <- m:
	default:
		s.o.Log.Warn("job command dropped: the queue is full; the poll fetches a dispatch again")
	}
}

// cancelCurrent cancels the execution the worker has taken when it is
// jobID.
func (s *Service) cancelCurrent(jobID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil || s.cur.id != jobID {
		return false
	}
	s.cur.cancel(errCancelled)
	return true
}

// Recent returns up to limit executions from the store, newest first.
func (s *Service) Recent(ctx context.Context, limit int) ([]store.Job, error) {
	st, err := s.o.Store()
	if err != nil {
		return nil, err
	}
	jobs, err := st.Jobs().List(ctx, limit)
	if jobs == nil {
		jobs = []store.Job{}
	}
	return jobs, err
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
