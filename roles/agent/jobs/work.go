package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// work runs the queued executions one at a time, oldest first, and sends
// the final reports the cloud has not taken, until ctx ends.
func (s *Service) work(ctx context.Context) {
	for ctx.Err() == nil {
		s.reportPending(ctx)
		j, jctx, err := s.take(ctx)
		switch {
		case errors.Is(err, store.ErrNotFound):
			select {
			case <-ctx.Done():
			case <-s.wake:
			}
			continue
		case err != nil:
			if ctx.Err() == nil {
				s.o.Log.Error("next job not read", "err", err)
				sleep(ctx, s.o.RetryMax)
			}
			continue
		}
		s.execute(ctx, jctx, j)
		s.mu.Lock()
		s.cur.cancel(nil)
		s.cur = nil
		s.mu.Unlock()
		signal(s.kick)
	}
}

// take makes the oldest queued execution the current one, under the lock
// a cancel takes, so a cancel either ends it queued or finds it current;
// the context it returns is the execution's, cancelled by CmdJobCancel.
func (s *Service) take(ctx context.Context) (store.Job, context.Context, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, err := s.jobs.Next(ctx)
	if err != nil {
		return j, nil, err
	}
	jctx, cancel := context.WithCancelCause(ctx)
	s.cur = &current{id: j.JobID, cancel: cancel}
	return j, jctx, nil
}

// reportPending sends the final reports of executions that ended and
// were not reported (cancelled queued, or left by the last run).
func (s *Service) reportPending(ctx context.Context) {
	open, err := s.store().Open(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.o.Log.Error("unreported jobs not read", "err", err)
		}
		return
	}
	for _, j := range open {
		if j.State == store.JobEnded && ctx.Err() == nil {
			s.rep.final(ctx, s.store(), j.JobID, update(j))
		}
	}
}

// outcome is what a handler returned.
type outcome struct {
	result   string
	exitData any
	// after runs once the final report was taken (the reboot).
	after func()
}

// execute runs one execution: in_progress first (the cloud may answer
// that it ended meanwhile), then the handler under its timeout, then the
// final status, stored before it is reported.
func (s *Service) execute(ctx, jctx context.Context, j store.Job) {
	jobs := s.store()
	log := s.o.Log.With("job", j.JobID, "handler", j.Handler)

	err := s.rep.send(jctx, j.JobID, control.JobStatusUpdate{Status: control.ExecInProgress})
	var ended *cloud.EndedError
	switch {
	case ctx.Err() != nil:
		return // stopping: it stays queued for the next run
	case errors.As(err, &ended):
		log.Info("job ended in the cloud before it started; not run", "status", ended.Status)
		e := store.JobEnd{Status: string(ended.Status)}
		if ended.Status == control.ExecCancelled {
			e.Reason = control.ReasonCancelled
		}
		s.end(ctx, j.JobID, e, true)
		return
	case errors.Is(context.Cause(jctx), errCancelled):
		log.Info("job cancelled before it started")
		s.finish(ctx, j, store.JobEnd{Status: string(control.ExecCancelled), Reason: control.ReasonCancelled}, nil)
		return
	case err != nil:
		log.Warn("the cloud refused the job's start; not run", "err", err)
		s.end(ctx, j.JobID, store.JobEnd{Status: string(control.ExecFailed), Reason: control.ReasonHandlerError,
			Result: clip("the cloud refused the start: " + err.Error())}, true)
		return
	}
	if err := jobs.SetState(ctx, j.JobID, store.JobRunning); err != nil {
		log.Error("job start not stored", "err", err)
	}
	log.Info("job started")
	d := control.JobDispatch{JobID: j.JobID, Handler: j.Handler, Params: json.RawMessage(j.Params), TimeoutSeconds: j.TimeoutSeconds}
	hctx, hcancel := context.WithTimeout(jctx, d.Timeout())
	var beat sync.WaitGroup
	beat.Go(func() { s.heartbeat(hctx, j.JobID) })
	out, herr := s.h.run(hctx, d)
	hcancel()
	beat.Wait()
	if ctx.Err() != nil {
		return // killed with the agent: Start decides at the next run
	}
	e := classify(jctx, hctx, out, herr)
	s.m.run(j.Handler, e.Status)
	log.Info("job ended", "status", e.Status, "reason", e.Reason)
	s.finish(ctx, j, e, out.after)
}

// classify makes the final report of a handler's run.
func classify(jctx, hctx context.Context, out outcome, err error) store.JobEnd {
	e := store.JobEnd{Result: clip(out.result), ExitData: exitData(out.exitData)}
	reason := func(r string) {
		e.Status, e.Reason = string(control.ExecFailed), r
		if e.Result == "" {
			e.Result = clip(err.Error())
		}
	}
	switch {
	case errors.Is(context.Cause(jctx), errCancelled):
		e.Status, e.Reason = string(control.ExecCancelled), control.ReasonCancelled
	case errors.Is(hctx.Err(), context.DeadlineExceeded):
		e.Status, e.Reason = string(control.ExecTimedOut), control.ReasonTimeout
	case err == nil:
		e.Status = string(control.ExecSucceeded)
	case errors.Is(err, errUnknownHandler):
		reason(control.ReasonUnknownHandler)
	case errors.Is(err, errShellDisabled):
		reason(control.ReasonShellDisabled)
	case errors.Is(err, ErrInvalidParams):
		reason(control.ReasonInvalidParams)
	default:
		reason(control.ReasonHandlerError)
	}
	return e
}

// finish stores the final status, reports it and then runs after.
func (s *Service) finish(ctx context.Context, j store.Job, e store.JobEnd, after func()) {
	if !s.end(ctx, j.JobID, e, false) {
		return
	}
	j.State, j.Status, j.Reason, j.Result, j.ExitData = store.JobEnded, e.Status, e.Reason, e.Result, e.ExitData
	if s.rep.final(ctx, s.store(), j.JobID, update(j)) && after != nil {
		after()
	}
}

func (s *Service) end(ctx context.Context, jobID string, e store.JobEnd, reported bool) bool {
	if _, err := s.store().End(ctx, jobID, e, reported); err != nil {
		if ctx.Err() == nil {
			s.o.Log.Error("job end not stored", "job", jobID, "err", err)
		}
		return false
	}
	return true
}

// heartbeat repeats in_progress every PollInterval while the handler
// runs; the cloud's 409 cancels the execution.
func (s *Service) heartbeat(ctx context.Context, jobID string) {
	for {
		t := time.NewTimer(s.o.PollInterval())
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := s.o.Cloud.ReportJob(ctx, jobID, control.JobStatusUpdate{Status: control.ExecInProgress})
		var ended *cloud.EndedError
		if errors.As(err, &ended) {
			s.o.Log.Info("job ended in the cloud while it ran; cancelling it", "job", jobID, "status", ended.Status)
			s.cancelCurrent(jobID)
			return
		}
		if err != nil && ctx.Err() == nil {
			s.o.Log.Debug("job heartbeat failed", "job", jobID, "err", err)
		}
	}
}

// reportFinal reports a final status until the cloud takes it, answers
// 409 or refuses it for good, and then marks it reported. It reports
// whether the cloud took it.
func (r reporter) final(ctx context.Context, jobs *store.Jobs, jobID string, u control.JobStatusUpdate) bool {
	err := r.send(ctx, jobID, u)
	if ctx.Err() != nil {
		return false // reported at the next run
	}
	var ended *cloud.EndedError
	if err != nil && !errors.As(err, &ended) {
		r.log.Warn("the cloud refused a job's final status; not sent again", "job", jobID, "status", u.Status, "err", err)
	}
	if err := jobs.MarkReported(ctx, jobID); err != nil && ctx.Err() == nil {
		r.log.Error("job report not stored", "job", jobID, "err", err)
	}
	return err == nil
}

// report sends u with backoff while the cloud cannot be reached or
// answers a transient failure; it returns nil, a *cloud.EndedError, a
// refusal the cloud will repeat, or ctx's error.
func (r reporter) send(ctx context.Context, jobID string, u control.JobStatusUpdate) error {
	delay := r.min
	for {
		err := r.cloud.ReportJob(ctx, jobID, u)
		if err == nil || permanent(err) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.log.Debug("job status not reported; retrying", "job", jobID, "status", u.Status, "err", err, "in", delay)
		if !sleep(ctx, delay) {
			return ctx.Err()
		}
		delay = min(2*delay, r.max)
	}
}

// reporter sends status updates to the cloud.
type reporter struct {
	cloud    Cloud
	log      *slog.Logger
	min, max time.Duration
}

// permanent tells an answer the cloud will repeat (409 ended, a refused
// update) from one worth retrying (no answer, 5xx, 408, 429).
func permanent(err error) bool {
	var ended *cloud.EndedError
	if errors.As(err, &ended) {
		return true
	}
	var ce *cloud.Error
	if !errors.As(err, &ce) {
		return false
	}
	return ce.Status >= 400 && ce.Status < 500 && ce.Status != http.StatusRequestTimeout && ce.Status != http.StatusTooManyRequests
}

func update(j store.Job) control.JobStatusUpdate {
	u := control.JobStatusUpdate{Status: control.ExecStatus(j.Status), StatusReason: j.Reason, Result: j.Result}
	if j.ExitData != "" {
		u.ExitData = json.RawMessage(j.ExitData)
	}
	return u
}

// clip bounds a result to control.MaxJobResultBytes, on a character
// boundary.
func clip(s string) string {
	if len(s) <= control.MaxJobResultBytes {
		return s
	}
	return strings.ToValidUTF8(s[:control.MaxJobResultBytes], "")
}

// exitData encodes a handler's structured result; one over
// control.MaxJobExitBytes is replaced by a note saying so.
func exitData(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf(`{"error":%q}`, err.Error())
	}
	if len(b) > control.MaxJobExitBytes {
		return fmt.Sprintf(`{"truncated":true,"bytes":%d}`, len(b))
	}
	return string(b)
}

// sleep waits d or until ctx ends, and reports whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
