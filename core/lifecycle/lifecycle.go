// Package lifecycle runs a role's long-running parts as one unit: start them
// in order, run them together, and stop them in reverse order when the
// context ends or the first of them fails. Ordering matters because later
// services depend on earlier ones (the broker must own its port before the
// API subscriber dials it), and stopping in reverse lets the HTTP server,
// started first, drain in-flight requests last.
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
	// or without an error, stops the whole process.
	Run(ctx context.Context) error
	// Stop releases what Start acquired, within ctx's deadline.
	Stop(ctx context.Context) error
}

// DefaultGracePeriod bounds how long stopping all services may take.
const DefaultGracePeriod = 10 * time.Second

// Options tunes Run.
type Options struct {
	Logger *slog.Logger
	// GracePeriod bounds the whole stop phase; DefaultGracePeriod when zero.
	GracePeriod time.Duration
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
// then stops the started ones in reverse order. It returns nil after a clean
// shutdown requested through ctx, and otherwise the first failure as a
// *ServiceError. Stop errors are returned too, so a leak is never silent.
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

	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	started := make([]Service, 0, len(services))
	var failure error
	for _, s := range services {
		t0 := time.Now()
		if err := s.Start(runCtx); err != nil {
			failure = &ServiceError{Service: s.Name(), Phase: "start", Err: err}
			break
		}
		started = append(started, s)
		log.Debug("service started", "service", s.Name(), "took", time.Since(t0).Round(time.Microsecond))
	}

	var wg sync.WaitGroup
	var once sync.Once
	firstRunErr := make(chan error, 1)
	if failure == nil {
		log.Info("all services started", "count", len(started))
		for _, s := range started {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.Run(runCtx)
				if err == nil && runCtx.Err() == nil {
					err = ErrExitedEarly
				}
				if errors.Is(err, ErrShutdownRequested) {
					log.Info("shutdown requested", "service", s.Name())
					cancel(err)
					return
				}
				if err != nil && runCtx.Err() == nil {
					once.Do(func() {
						firstRunErr <- &ServiceError{Service: s.Name(), Phase: "run", Err: err}
						cancel(err)
					})
				}
			}()
		}
		select {
		case <-runCtx.Done():
		case failure = <-firstRunErr:
		}
		if failure == nil {
			select {
			case failure = <-firstRunErr:
			default:
				log.Info("shutting down", "reason", context.Cause(runCtx))
			}
		}
		cancel(errors.New("shutting down"))
	}

	stopCtx, stopCancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer stopCancel()
	var stopErrs []error
	for i := len(started) - 1; i >= 0; i-- {
		s := started[i]
		t0 := time.Now()
		if err := s.Stop(stopCtx); err != nil {
			stopErrs = append(stopErrs, &ServiceError{Service: s.Name(), Phase: "stop", Err: err})
			continue
		}
		log.Debug("service stopped", "service", s.Name(), "took", time.Since(t0).Round(time.Microsecond))
	}

	// Run goroutines must end once their context is cancelled and Stop has
	// released their resources; waiting past the grace period would hang the
	// process on a misbehaving service, so give up and report it.
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-stopCtx.Done():
		stopErrs = append(stopErrs, fmt.Errorf("services still running after the %s grace period", grace))
	}

	if failure != nil {
		return errors.Join(append([]error{failure}, stopErrs...)...)
	}
	return errors.Join(stopErrs...)
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
