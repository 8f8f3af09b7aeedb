package jobs

import (
	"context"
	"errors"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// loop is the service's intake: commands from the dispatcher and the
// poll, at start, when the platform connection comes back, after each
// execution and every PollInterval. One goroutine decides what is new, so
// the queue bound and the duplicate check need no lock.
func (s *Service) loop(ctx context.Context) {
	tick := time.NewTicker(s.o.Tick)
	defer tick.Stop()
	connected := s.o.Platform.PlatformConnected()
	s.poll(ctx)
	// The timer runs from the last poll, so a stream of commands cannot
	// put the periodic poll off. The interval is read at each poll and at
	// each tick: a changed setting (an hour down to a second) takes effect
	// within a tick, not after the wait it replaced.
	armed := s.o.PollInterval()
	timer := time.NewTimer(armed)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.inbox:
			s.handle(ctx, m)
			continue
		case <-tick.C:
			if iv := s.o.PollInterval(); iv != armed {
				armed = iv
				timer.Reset(iv)
			}
			now := s.o.Platform.PlatformConnected()
			back := now && !connected
			connected = now
			if !back {
				continue
			}
		case <-s.kick:
		case <-timer.C:
		}
		s.poll(ctx)
		armed = s.o.PollInterval()
		timer.Reset(armed)
	}
}

// poll asks the cloud for the next execution.
func (s *Service) poll(ctx context.Context) {
	d, ok, err := s.o.Cloud.NextJob(ctx)
	switch {
	case errors.Is(err, ErrNoCloud), ctx.Err() != nil:
		return
	case err != nil:
		s.o.Log.Debug("job poll failed", "err", err)
		return
	case ok:
		s.receive(ctx, d)
	}
}

func (s *Service) handle(ctx context.Context, m message) {
	if m.dispatch != nil {
		s.receive(ctx, *m.dispatch)
		return
	}
	if err := s.cancelQueued(ctx, m.cancel); err != nil && ctx.Err() == nil {
		s.o.Log.Error("job cancel not stored", "job", m.cancel, "err", err)
	}
}

// receive stores a dispatch as received unless its jobId is known or
// the queue is full, and wakes the worker.
func (s *Service) receive(ctx context.Context, d control.JobDispatch) {
	jobs := s.store()
	queued, err := jobs.Queued(ctx)
	if err != nil {
		s.o.Log.Error("job dispatch not stored", "job", d.JobID, "err", err)
		return
	}
	if queued >= s.o.QueueSize {
		s.o.Log.Warn("job dispatch dropped: the queue is full; the poll fetches it again", "job", d.JobID, "queued", queued)
		return
	}
	params := ""
	if len(d.Params) > 0 && string(d.Params) != "null" {
		params = string(d.Params)
	}
	isNew, err := jobs.Receive(ctx, store.Job{JobID: d.JobID, Handler: d.Handler, Params: params, TimeoutSeconds: d.TimeoutSeconds})
	if err != nil {
		s.o.Log.Error("job dispatch not stored", "job", d.JobID, "err", err)
		return
	}
	if !isNew {
		s.m.duplicates.Inc()
		s.o.Log.Debug("job dispatch seen before; not run again", "job", d.JobID)
		return
	}
	s.o.Log.Info("job received", "job", d.JobID, "handler", d.Handler)
	signal(s.wake)
}

// cancelQueued ends a queued execution cancelled; one the worker has
// taken is cancelled through its context; an unknown one is recorded, so
// a dispatch arriving after its cancel never runs.
func (s *Service) cancelQueued(ctx context.Context, jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur != nil && s.cur.id == jobID {
		s.cur.cancel(errCancelled)
		return nil
	}
	end := store.JobEnd{Status: string(control.ExecCancelled), Reason: control.ReasonCancelled}
	j, err := s.jobs.Get(ctx, jobID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return s.jobs.Tombstone(ctx, jobID, end)
	case err != nil:
		return err
	case j.State != store.JobReceived:
		return nil
	}
	if _, err := s.jobs.End(ctx, jobID, end, false); err != nil {
		return err
	}
	s.o.Log.Info("queued job cancelled", "job", jobID)
	signal(s.wake) // its report
	return nil
}

func (s *Service) store() *store.Jobs {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.jobs
}
