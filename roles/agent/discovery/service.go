package discovery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Store keeps the rules and their runs (the agent's SQLite store).
type Store interface {
	Rules(ctx context.Context) ([]Rule, error)
	// Rule reports false when there is no rule uuid.
	Rule(ctx context.Context, uuid string) (Rule, bool, error)
	CreateRule(ctx context.Context, r Rule) error
	// UpdateRule and DeleteRule report false when there is no such
	// rule; DeleteRule deletes its runs too.
	UpdateRule(ctx context.Context, r Rule) (bool, error)
	DeleteRule(ctx context.Context, uuid string) (bool, error)
	// SaveRun stores run (new or finished) and deletes the oldest runs
	// of its rule beyond keep.
	SaveRun(ctx context.Context, run Run, keep int) error
	// Runs are the newest runs, of one rule or (ruleUUID empty) of all,
	// newest first.
	Runs(ctx context.Context, ruleUUID string, limit int) ([]Run, error)
}

// Options are what a Service works with.
type Options struct {
	Scanners  Registry
	Store     func() (Store, error)
	Endpoints Endpoints
	// Enabled is the features.discovery setting, read at each use.
	Enabled func() bool
	Log     *slog.Logger
}

// Service is the discovery scans and rules, and the lifecycle service
// that runs the enabled rules on their schedule.
type Service struct {
	scanners  Registry
	store     func() (Store, error)
	endpoints Endpoints
	enabled   func() bool
	log       *slog.Logger
	now       func() time.Time
	recent    recentScans
	sched     *scheduler

	// mu guards running: the rules with a run in progress.
	mu      sync.Mutex
	running map[string]bool
	// created serialises the endpoint creations of concurrent runs, so
	// two rules finding one device create one endpoint.
	created sync.Mutex
}

// New builds the service; it does no I/O.
func New(o Options) (*Service, error) {
	if o.Scanners == nil || o.Store == nil || o.Endpoints == nil || o.Enabled == nil || o.Log == nil {
		return nil, errors.New("BUG: discovery.New needs Scanners, Store, Endpoints, Enabled and Log")
	}
	s := &Service{scanners: o.Scanners, store: o.Store, endpoints: o.Endpoints, enabled: o.Enabled, log: o.Log,
		now: time.Now, running: map[string]bool{}}
	s.sched = newScheduler(s)
	return s, nil
}

// Name implements lifecycle.Service.
func (s *Service) Name() string { return "discovery" }

// Start implements lifecycle.Service.
func (s *Service) Start(context.Context) error { return nil }

// Run implements lifecycle.Service: the scheduler, until ctx ends and
// the runs it started returned.
func (s *Service) Run(ctx context.Context) error {
	s.sched.loop(ctx)
	return nil
}

// Stop implements lifecycle.Service.
func (s *Service) Stop(context.Context) error { return nil }

func (s *Service) open() (Store, error) {
	if !s.enabled() {
		return nil, ErrDisabled
	}
	return s.store()
}

// Rules lists the rules.
func (s *Service) Rules(ctx context.Context) ([]Rule, error) {
	st, err := s.open()
	if err != nil {
		return nil, err
	}
	rs, err := st.Rules(ctx)
	if rs == nil {
		rs = []Rule{}
	}
	return rs, err
}

// CreateRule creates a rule from body (the rule's fields).
func (s *Service) CreateRule(ctx context.Context, body []byte) (Rule, error) {
	st, err := s.open()
	if err != nil {
		return Rule{}, err
	}
	in, err := decodeRuleInput(body)
	if err != nil {
		return Rule{}, invalid(err)
	}
	now := s.now().UTC()
	r := Rule{UUID: codec.NewUUID().String(), IntervalSeconds: DefaultIntervalSeconds, Enabled: true, CreatedAt: now, UpdatedAt: now}
	in.apply(&r)
	if err := s.checkRule(ctx, r); err != nil {
		return Rule{}, err
	}
	if err := st.CreateRule(ctx, r); err != nil {
		return Rule{}, err
	}
	s.sched.changed()
	return r, nil
}

func (s *Service) checkRule(ctx context.Context, r Rule) error {
	known, err := s.endpoints.Connections(ctx)
	if err != nil {
		return err
	}
	return invalid(s.check(r, known))
}

// PatchRule changes the fields body names.
func (s *Service) PatchRule(ctx context.Context, uuid string, body []byte) (Rule, error) {
	st, err := s.open()
	if err != nil {
		return Rule{}, err
	}
	in, err := decodeRuleInput(body)
	if err != nil {
		return Rule{}, invalid(err)
	}
	r, ok, err := st.Rule(ctx, uuid)
	if err != nil {
		return Rule{}, err
	}
	if !ok {
		return Rule{}, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	in.apply(&r)
	r.UpdatedAt = s.now().UTC()
	if err := s.checkRule(ctx, r); err != nil {
		return Rule{}, err
	}
	if ok, err = st.UpdateRule(ctx, r); err != nil {
		return Rule{}, err
	} else if !ok {
		return Rule{}, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	s.sched.changed()
	return r, nil
}

// DeleteRule deletes a rule and its runs.
func (s *Service) DeleteRule(ctx context.Context, uuid string) error {
	st, err := s.open()
	if err != nil {
		return err
	}
	ok, err := st.DeleteRule(ctx, uuid)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	s.sched.changed()
	return nil
}

// RuleRuns lists a rule's newest runs.
func (s *Service) RuleRuns(ctx context.Context, uuid string, limit int) ([]Run, error) {
	st, err := s.open()
	if err != nil {
		return nil, err
	}
	if _, ok, err := st.Rule(ctx, uuid); err != nil {
		return nil, err
	} else if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	return nonNil(st.Runs(ctx, uuid, limit))
}

// Runs lists the newest runs of every rule.
func (s *Service) Runs(ctx context.Context, limit int) ([]Run, error) {
	st, err := s.open()
	if err != nil {
		return nil, err
	}
	return nonNil(st.Runs(ctx, "", limit))
}

func nonNil(rs []Run, err error) ([]Run, error) {
	if rs == nil {
		rs = []Run{}
	}
	return rs, err
}

// RunRule runs a rule now (disabled or not) and answers the finished run.
func (s *Service) RunRule(ctx context.Context, uuid string) (Run, error) {
	st, err := s.open()
	if err != nil {
		return Run{}, err
	}
	r, ok, err := st.Rule(ctx, uuid)
	if err != nil {
		return Run{}, err
	}
	if !ok {
		return Run{}, fmt.Errorf("%w: %s", ErrNotFound, uuid)
	}
	return s.runRule(ctx, st, r)
}

// runRule runs r once, unless it runs already: scans, creates the
// endpoints of new devices when auto_enable is set, and records the run.
func (s *Service) runRule(ctx context.Context, st Store, r Rule) (Run, error) {
	s.mu.Lock()
	if s.running[r.UUID] {
		s.mu.Unlock()
		return Run{}, &ConflictError{Msg: fmt.Sprintf("discovery rule %q is running already", r.Name)}
	}
	s.running[r.UUID] = true
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.running, r.UUID)
		s.mu.Unlock()
	}()
	run := Run{UUID: codec.NewUUID().String(), RuleUUID: r.UUID, StartedAt: s.now().UTC(), Status: RunRunning, Devices: []Device{}}
	if err := st.SaveRun(ctx, run, RunsKept); err != nil {
		return Run{}, err
	}
	var problems []string
	known, err := s.endpoints.Connections(ctx)
	if err == nil {
		var plans map[string]Plan
		if plans, err = s.plan([]string{r.Protocol}, map[string]json.RawMessage{r.Protocol: r.Params}, known,
			func(string) string { return "params_json" }); err == nil {
			res := runPlans(ctx, plans, false)
			run.Devices = res.Devices
			for _, e := range res.Errors {
				problems = append(problems, e)
			}
			if r.AutoEnable {
				n, errs := s.autoEnable(ctx, r, res.Devices)
				run.EndpointsCreated = n
				problems = append(problems, errs...)
			}
		}
	}
	if err != nil {
		problems = append(problems, err.Error())
	}
	run.DevicesFound = len(run.Devices)
	fin := s.now().UTC()
	run.FinishedAt = &fin
	run.Status = RunSucceeded
	if len(problems) > 0 {
		run.Status, run.Error = RunFailed, strings.Join(problems, "; ")
	}
	// The record is written even when the request that ran it is gone.
	if err := st.SaveRun(context.WithoutCancel(ctx), run, RunsKept); err != nil {
		return run, err
	}
	s.log.Info("discovery rule ran", "rule", r.Name, "protocol", r.Protocol, "devices", run.DevicesFound,
		"endpoints_created", run.EndpointsCreated, "status", run.Status)
	return run, nil
}

// autoEnable creates an endpoint for each device of devs no endpoint
// reaches yet, and reports how many it created and what failed.
func (s *Service) autoEnable(ctx context.Context, r Rule, devs []Device) (int, []string) {
	s.created.Lock()
	defer s.created.Unlock()
	known, err := s.endpoints.Connections(ctx)
	if err != nil {
		return 0, []string{err.Error()}
	}
	sc := s.scanners[r.Protocol]
	created := 0
	var problems []string
	seen := map[string]bool{}
	for _, d := range devs {
		if seen[d.Identity] || covered(sc, known[d.Protocol], d) {
			continue
		}
		seen[d.Identity] = true
		def, err := endpointDef(r.Target, d)
		if err == nil {
			_, err = s.endpoints.Create(ctx, def)
		}
		if err != nil {
			problems = append(problems, fmt.Sprintf("endpoint for %s not created: %v", d.Name, err))
			continue
		}
		created++
		known[d.Protocol] = append(known[d.Protocol], d.Connection)
	}
	return created, problems
}

func covered(sc Scanner, conns []json.RawMessage, d Device) bool {
	for _, c := range conns {
		if sc.Covers(c, d) {
			return true
		}
	}
	return false
}
