// Package health collects the liveness of a role's dependencies (database,
// stream store, broker, ...) in one registry that each role's health endpoint
// reads, so every check is written once and reported the same way.
package health

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Check reports whether one dependency is usable; nil means healthy.
type Check func(ctx context.Context) error

// Status of one component in a Report.
type Status struct {
	Healthy bool   `json:"healthy"`
	Error   string `json:"error,omitempty"`
}

// Report is the outcome of running every registered check.
type Report struct {
	Healthy    bool              `json:"healthy"`
	Uptime     time.Duration     `json:"-"`
	Components map[string]Status `json:"components"`
}

// Registry holds named checks. The zero value is not usable; call New.
type Registry struct {
	started time.Time
	timeout time.Duration

	mu     sync.RWMutex
	checks map[string]Check
}

// New returns an empty registry whose uptime starts now. Each check gets at
// most timeout per report, so a hung dependency cannot hang the probe.
func New(timeout time.Duration) *Registry {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &Registry{started: time.Now(), timeout: timeout, checks: map[string]Check{}}
}

// Register adds or replaces the check named name.
func (r *Registry) Register(name string, c Check) {
	if c == nil {
		panic("BUG: health.Register with nil check for " + name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks[name] = c
}

// Unregister removes a check, for services that stop while the process runs.
func (r *Registry) Unregister(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.checks, name)
}

// Names lists the registered checks in sorted order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.checks))
	for n := range r.checks {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Uptime is the time since New.
func (r *Registry) Uptime() time.Duration { return time.Since(r.started) }

// Report runs all checks concurrently, each bounded by the registry timeout.
func (r *Registry) Report(ctx context.Context) Report {
	r.mu.RLock()
	checks := make(map[string]Check, len(r.checks))
	for n, c := range r.checks {
		checks[n] = c
	}
	r.mu.RUnlock()

	rep := Report{Healthy: true, Uptime: r.Uptime(), Components: make(map[string]Status, len(checks))}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, check := range checks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, r.timeout)
			defer cancel()
			st := Status{Healthy: true}
			if err := check(cctx); err != nil {
				st = Status{Healthy: false, Error: err.Error()}
			}
			mu.Lock()
			rep.Components[name] = st
			if !st.Healthy {
				rep.Healthy = false
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return rep
}
