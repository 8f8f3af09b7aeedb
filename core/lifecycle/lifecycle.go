// Package lifecycle runs a role's long-running parts as one unit: start them
// in order, run them together, and stop them in reverse order when the
// context ends or the first of them fails. Ordering matters because later
// services depend on earlier ones (the broker must own its port before the
// API subscriber dials it), and stopping in reverse lets the HTTP server,
// started first, drain in-flight requests last. Each service's Stop comes
// after its Run has returned, so no service guards against itself. See
// docs/lifecycle.md.
package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Service is one long-running part of a role: an HTTP server, a consumer, a
// poller.
type Service interface {
	// Name is kebab-case; it labels logs, metrics and readiness.
	Name() string
	// Start acquires what the service needs and returns once it is ready.
	// It must not block beyond that.
	Start(ctx context.Context) error
	// Run works until ctx is done, then returns nil. Returning earlier, with
	// or without an error, stops the whole process. Once ctx is done Run
	// must return on its own, not wait for Stop; work it finishes first
	// (in-flight requests) is bounded by DrainContext(ctx).
	Run(ctx context.Context) error
	// Stop releases what Start acquired, within ctx's deadline. It is
	// called after Run has returned, or without Run when a later service
	// failed to start, so it never races with Run.
	Stop(ctx context.Context) error
}

// DefaultGracePeriod bounds how long stopping all services may take.
const DefaultGracePeriod = 10 * time.Second

// Options tunes Run.
type Options struct {
	Logger *slog.Logger
	// GracePeriod bounds the whole stop phase; DefaultGracePeriod when zero.
	GracePeriod time.Duration
	// OnStart, when set, is told of each service's Start: how long it took
	// and its error. The agent reports its init phases from it.
	OnStart func(service string, took time.Duration, err error)
}

// ServiceError names the service that failed and the phase it failed in.
type ServiceError struct {
	Service string
	Phase   string // "start", "run" or "stop"
	Err     error
}

func (e *ServiceError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Service, e.Phase, e.Err)
}

func (e *ServiceError) Unwrap() error { return e.Err }

// ErrExitedEarly is wrapped when a service's Run returns nil before it was
// asked to stop: a server that quietly stops serving is a failure.
var ErrExitedEarly = errors.New("exited before shutdown was requested")

// ErrShutdownRequested is returned by a service's Run to stop the process
// cleanly on its own initiative (the agent's POST /v1/shutdown): every
// service is stopped as for a signal, and Run returns nil.
var ErrShutdownRequested = errors.New("shutdown requested")

// Run starts services in order, runs them until ctx is done or one fails, and
// then stops the started ones in reverse order: for each, it cancels that
// service's context, waits for its Run to return and only then calls its
// Stop, so Stop never releases what a running Run still uses. A service
// keeps running while the ones after it stop, as it did while they started.
//
// Run returns nil after a clean shutdown requested through ctx, and
// otherwise the first failure as a *ServiceError. Stop errors, and errors a
// Run returns while stopping, are returned too, so a leak is never silent.
// Run may be called again with the same services once it has returned (the
// agent's soft reboot), if each service supports a second Start.
func Run(ctx context.Context, opts Options, services ...Service) error {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	grace := opts.GracePeriod
	if grace <= 0 {
		grace = DefaultGracePeriod
	}
	if err := checkNames(services); err != nil {
		return err
	}

	// Each service runs under its own context, detached from ctx, so that a
	// signal stops the services one at a time in reverse order rather than
	// all at once. The stop phase's context, once stopping begins, is what
	// DrainContext returns to them.
	phase := &stopPhase{}
	base := context.WithValue(context.WithoutCancel(ctx), stopPhaseKey{}, phase)

	runs := make([]*running, 0, len(services))
	var failure error
	for _, s := range services {
		t0 := time.Now()
		err := s.Start(ctx)
		if opts.OnStart != nil {
			opts.OnStart(s.Name(), time.Since(t0), err)
		}
		if err != nil {
			failure = &ServiceError{Service: s.Name(), Phase: "start", Err: err}
			break
		}
		runCtx, cancel := context.WithCancelCause(base)
		runs = append(runs, &running{svc: s, ctx: runCtx, cancel: cancel})
		log.Debug("service started", "service", s.Name(), "took", time.Since(t0).Round(time.Microsecond))
	}

	if failure == nil {
		log.Info("all services started", "count", len(runs))
		ended := make(chan *running, len(runs))
		for _, r := range runs {
			r.done = make(chan struct{})
			go func() {
				defer close(r.done)
				r.err = r.svc.Run(r.ctx)
				ended <- r
			}()
		}
		failure = waitForShutdown(ctx, log, ended)
	}

	stopBase := context.WithoutCancel(ctx)
	if outer := phaseOf(ctx); outer != nil {
		// A nested Run ends no later than the stop phase around it.
		stopBase = outer
	}
	stopCtx, stopCancel := context.WithTimeout(stopBase, grace)
	defer stopCancel()
	phase.set(stopCtx)

	var stopErrs []error
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		r.cancel(errShuttingDown)
		if err := r.waitRun(stopCtx); err != nil {
			stopErrs = append(stopErrs, &ServiceError{Service: r.svc.Name(), Phase: "stop",
				Err: fmt.Errorf("still running after the %s grace period", grace)})
		} else if err := r.stopError(); err != nil {
			stopErrs = append(stopErrs, &ServiceError{Service: r.svc.Name(), Phase: "stop", Err: err})
		}
		t0 := time.Now()
		if err := r.svc.Stop(stopCtx); err != nil {
			stopErrs = append(stopErrs, &ServiceError{Service: r.svc.Name(), Phase: "stop", Err: err})
			continue
		}
		log.Debug("service stopped", "service", r.svc.Name(), "took", time.Since(t0).Round(time.Microsecond))
	}

	if failure != nil {
		return errors.Join(append([]error{failure}, stopErrs...)...)
	}
	return errors.Join(stopErrs...)
}

// errShuttingDown is the cause each service's context is cancelled with.
var errShuttingDown = errors.New("shutting down")

// running is one started service and its Run goroutine.
type running struct {
	svc    Service
	ctx    context.Context
	cancel context.CancelCauseFunc
	// done is closed when Run has returned; nil when Run was never called
	// (a later service failed to start).
	done chan struct{}
	err  error // Run's result, read after done
	// failed marks err as returned already, as the run failure.
	failed bool
}

// waitRun waits for Run to return, or for ctx.
func (r *running) waitRun(ctx context.Context) error {
	if r.done == nil {
		return nil
	}
	select {
	case <-r.done:
		// Once the grace period is over, a Run that has returned must
		// still count as returned, not lose a race with ctx.
		return nil
	default:
	}
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stopError is what a Run that has returned reports while stopping: its
// error, unless that is the failure already returned, the shutdown it
// requested, or its own context's cancellation.
func (r *running) stopError() error {
	if r.done == nil || r.failed || r.err == nil ||
		errors.Is(r.err, ErrShutdownRequested) || errors.Is(r.err, context.Canceled) {
		return nil
	}
	return r.err
}

// waitForShutdown returns when ctx is done, a service asks for a shutdown,
// or a Run fails, which it returns; a Run that returns nil before it was
// asked to stop fails with ErrExitedEarly.
func waitForShutdown(ctx context.Context, log *slog.Logger, ended <-chan *running) error {
	select {
	case <-ctx.Done():
		log.Info("shutting down", "reason", context.Cause(ctx))
		return nil
	case r := <-ended:
		if errors.Is(r.err, ErrShutdownRequested) {
			log.Info("shutdown requested", "service", r.svc.Name())
			return nil
		}
		err := r.err
		if err == nil {
			err = ErrExitedEarly
		}
		r.failed = true
		return &ServiceError{Service: r.svc.Name(), Phase: "run", Err: err}
	}
}

// stopPhase holds the stop phase's context once stopping begins.
type stopPhase struct {
	mu  sync.Mutex
	ctx context.Context
}

func (p *stopPhase) set(ctx context.Context) {
	p.mu.Lock()
	p.ctx = ctx
	p.mu.Unlock()
}

func (p *stopPhase) get() context.Context {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctx
}

type stopPhaseKey struct{}

// phaseOf returns the stop phase's context of the Run that ctx belongs to,
// or nil when ctx is not a service's context or stopping has not begun.
func phaseOf(ctx context.Context) context.Context {
	if p, ok := ctx.Value(stopPhaseKey{}).(*stopPhase); ok {
		return p.get()
	}
	return nil
}

// DrainContext returns the context that bounds what a Run does after its
// context ended, such as letting in-flight HTTP requests finish. Within
// lifecycle.Run it is the stop phase's context, whose deadline is the grace
// period; elsewhere it ends DefaultGracePeriod from now. A nested Run (a
// group of services inside one service) bounds its own stop phase by the
// one around it, so the whole process keeps one deadline.
func DrainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if s := phaseOf(ctx); s != nil {
		return context.WithCancel(s)
	}
	return context.WithTimeout(context.WithoutCancel(ctx), DefaultGracePeriod)
}

func checkNames(services []Service) error {
	seen := make(map[string]bool, len(services))
	for _, s := range services {
		if s == nil {
			panic("BUG: lifecycle.Run given a nil service")
		}
		if seen[s.Name()] {
			return fmt.Errorf("duplicate service name %q", s.Name())
		}
		seen[s.Name()] = true
	}
	return nil
}
