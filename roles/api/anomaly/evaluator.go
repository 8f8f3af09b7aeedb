package anomaly

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// Evaluator bounds.
const (
	// queueBatches bounds the batches waiting for the evaluator; beyond
	// it Observe drops (and counts) instead of making the pipeline wait.
	queueBatches = 1024
	// maxStates bounds the series the evaluator tracks; a new series past
	// it is not evaluated until idle ones are swept (counted).
	maxStates = 200_000
	// reloadEvery is how often the rule cache is read again when no local
	// write nudged it: the bound on how late another replica's rule
	// change takes effect here.
	reloadEvery = 10 * time.Second
	// idleAfter is how long a series without readings is kept; its window
	// and recovery timer start again when it comes back.
	idleAfter = time.Hour
	// matchCacheMax bounds the per-tenant cache of metric name to rules.
	matchCacheMax = 50_000
	// maxSamples bounds the samples all windows hold together, 16 bytes
	// each: 128 MiB. Past it a full window keeps its length and drops its
	// oldest sample instead of growing, so windows get shorter rather than
	// memory larger.
	maxSamples = 8 << 20
)

// batch is what the pipeline hands over: one publish's messages. They are
// read only.
type batch struct {
	tenantKey string
	msgs      []telemetry.Message
}

// compiled is a rule as the evaluator runs it.
type compiled struct {
	rule Rule
	// agents, when not nil, are the only agents the rule watches (its
	// agent, or its fleet's members at the last reload).
	agents       map[string]bool
	recoverAfter time.Duration
	det          detector
	conds        []detector
	window       time.Duration
	// corrMetric names a correlation rule's series (correlationMetric).
	corrMetric string
	// version keys the rule's series (ruleVersion), made once: formatting
	// it for every reading was a fifth of the evaluator's time.
	version string
}

// tenantRules are one tenant's compiled rules, with the metric names
// already matched against them.
type tenantRules struct {
	rules []*compiled
	match map[string][]int
}

func (tr *tenantRules) matching(metric, reading string) []int {
	if idx, ok := tr.match[metric]; ok {
		return idx
	}
	var idx []int
	for i, c := range tr.rules {
		if c.rule.Type == TypeCorrelation {
			for _, sub := range c.rule.Conditions {
				if matchMetric(sub.Metric, metric, reading) {
					idx = append(idx, i)
					break
				}
			}
			continue
		}
		if matchMetric(c.rule.Metric, metric, reading) {
			idx = append(idx, i)
		}
	}
	if len(tr.match) >= matchCacheMax {
		clear(tr.match)
	}
	tr.match[metric] = idx
	return idx
}

type stateKey struct {
	rule, agent, metric string
	cond                int
}

// state is one series under one rule (or one condition of a correlation
// rule): its window, and whether an incident is open for it.
type state struct {
	s          series
	open       bool
	clearSince time.Time
	peak       float64
	lastSeen   time.Time
	// lastTrue is, for a correlation rule's agent, when each condition
	// last held.
	lastTrue []time.Time
	device   string
}

// Evaluator judges readings against the tenants' rules as the Cloud API's
// pipeline receives them, and opens and closes incidents. One goroutine
// owns its rules and series, so it needs no lock; the pipeline reaches it
// only through Observe, which never blocks.
type Evaluator struct {
	st       *store
	d        *Deps
	notify   *Dispatcher
	in       chan batch
	nudge    chan struct{}
	active   atomic.Pointer[map[string]bool]
	tenants  map[string]*tenantRules
	states   map[stateKey]*state
	tenantOf map[string]string
	// openKeys are the series with an open incident at the last reload,
	// so a series met anew (after a restart or a rule update) knows one is
	// open and closes it on recovery.
	openKeys map[openKey]bool
	// samples is what the windows of states hold together.
	samples int
	m       *metrics
}

type openKey struct{ rule, agent, metric string }

func newEvaluator(st *store, d *Deps, notify *Dispatcher, m *metrics) *Evaluator {
	e := &Evaluator{st: st, d: d, notify: notify, m: m, in: make(chan batch, queueBatches), nudge: make(chan struct{}, 1),
		tenants: map[string]*tenantRules{}, states: map[stateKey]*state{}, tenantOf: map[string]string{}}
	e.active.Store(&map[string]bool{})
	return e
}

// Name implements lifecycle.Service.
func (e *Evaluator) Name() string { return "api-anomaly" }

// Start loads the rules.
func (e *Evaluator) Start(ctx context.Context) error {
	if err := e.reload(ctx); err != nil {
		// The database may come later; the next reload tries again.
		e.d.Log.Warn("load anomaly rules", "err", err)
	}
	return nil
}

// Run evaluates what Observe queued, reloads the rules and prunes old
// agent events until ctx ends.
func (e *Evaluator) Run(ctx context.Context) error {
	tick := time.NewTicker(reloadEvery)
	defer tick.Stop()
	lastPrune := time.Time{}
	for {
		select {
		case <-ctx.Done():
			return nil
		case b := <-e.in:
			e.process(ctx, b)
		case <-e.nudge:
			e.refresh(ctx)
		case <-tick.C:
			e.refresh(ctx)
			e.sweep()
			if now := e.d.Now(); now.Sub(lastPrune) >= time.Hour {
				lastPrune = now
				if n, err := e.st.pruneEvents(ctx, now.Add(-EventRetention)); err != nil {
					e.d.Log.Warn("prune agent events", "err", err)
				} else if n > 0 {
					e.d.Log.Debug("agent events pruned", "rows", n)
				}
			}
		}
	}
}

// Stop implements lifecycle.Service; Run has returned by then.
func (e *Evaluator) Stop(context.Context) error { return nil }

func (e *Evaluator) refresh(ctx context.Context) {
	if err := e.reload(ctx); err != nil && ctx.Err() == nil {
		e.d.Log.Warn("reload anomaly rules", "err", err)
	}
}

// Observe hands one publish's messages to the evaluator. It never blocks:
// a tenant without rules costs a map lookup, and a full queue drops the
// batch (edgeplat_api_anomaly_batches_total{outcome="dropped"}). msgs
// must not change afterwards.
func (e *Evaluator) Observe(tenantKey string, msgs []telemetry.Message) {
	if !(*e.active.Load())[tenantKey] {
		return
	}
	select {
	case e.in <- batch{tenantKey: tenantKey, msgs: msgs}:
	default:
		e.m.batches.WithLabelValues("dropped").Inc()
	}
}

// Changed makes the evaluator read the rules again soon.
func (e *Evaluator) Changed() {
	select {
	case e.nudge <- struct{}{}:
	default:
	}
}

// reload reads every enabled rule and the fleet members the fleet-scoped
// ones need, and replaces the compiled rules. Series of rules that are
// gone or changed are dropped; an incident they left open stays open
// until resolved.
func (e *Evaluator) reload(ctx context.Context) error {
	rules, err := e.st.enabledRules(ctx)
	if err != nil {
		return err
	}
	open, err := e.st.openSeries(ctx)
	if err != nil {
		return err
	}
	e.openKeys = open
	correlation := e.d.Feature == nil || e.d.Feature(licence.FeatureCorrelationRules) == nil
	var fleets map[string][]string
	tenants := map[string]*tenantRules{}
	active := map[string]bool{}
	keep := map[string]bool{}
	skipped := 0
	for _, r := range rules {
		if r.Type == TypeCorrelation && !correlation {
			skipped++
			continue
		}
		c := &compiled{rule: r, version: ruleVersion(r)}
		c.recoverAfter, _ = time.ParseDuration(r.RecoverAfter)
		switch {
		case r.Scope.AgentUUID != "":
			c.agents = map[string]bool{r.Scope.AgentUUID: true}
		case r.Scope.FleetID != "":
			if fleets == nil {
				if fleets, err = e.st.fleetMembers(ctx); err != nil {
					return err
				}
			}
			c.agents = map[string]bool{}
			for _, a := range fleets[r.Scope.FleetID] {
				c.agents[a] = true
			}
		}
		if r.Type == TypeCorrelation {
			c.window, _ = window(r.Window, false)
			c.corrMetric = correlationMetric(r)
			for _, sub := range r.Conditions {
				c.conds = append(c.conds, compile(sub))
			}
		} else {
			c.det = compile(r.Condition)
		}
		tr := tenants[r.tenant]
		if tr == nil {
			tr = &tenantRules{match: map[string][]int{}}
			tenants[r.tenant] = tr
			if u, err := codec.ParseUUID(r.tenant); err == nil {
				active[codec.EncodeID(u)] = true
			}
		}
		tr.rules = append(tr.rules, c)
		keep[c.version] = true
	}
	for k, st := range e.states {
		if !keep[k.rule] {
			e.samples -= st.s.n
			delete(e.states, k)
		}
	}
	e.tenants = tenants
	e.active.Store(&active)
	e.m.rules.Set(float64(len(rules) - skipped))
	e.m.series.Set(float64(len(e.states)))
	if skipped > 0 {
		e.d.Log.Debug("correlation rules not evaluated: the licence lacks the feature", "rules", skipped, "feature", licence.FeatureCorrelationRules)
	}
	return nil
}

// ruleIDOf is the rule id of a ruleVersion.
func ruleIDOf(v string) string {
	id, _, _ := strings.Cut(v, "@")
	return id
}

// ruleVersion keys a rule's series: an update starts them afresh.
func ruleVersion(r Rule) string { return r.ID + "@" + r.UpdatedAt.Format(time.RFC3339Nano) }

// sweep forgets series that have been quiet for idleAfter and have no open
// incident.
func (e *Evaluator) sweep() {
	cut := e.d.Now().Add(-idleAfter)
	for k, st := range e.states {
		if !st.open && st.lastSeen.Before(cut) {
			e.samples -= st.s.n
			delete(e.states, k)
		}
	}
	e.m.series.Set(float64(len(e.states)))
	e.m.samples.Set(float64(e.samples))
}

func (e *Evaluator) process(ctx context.Context, b batch) {
	defer e.m.batches.WithLabelValues("evaluated").Inc()
	tenant, ok := e.tenantOf[b.tenantKey]
	if !ok {
		u, err := codec.DecodeID(b.tenantKey)
		if err != nil {
			return
		}
		tenant = u.String()
		if len(e.tenantOf) > matchCacheMax {
			clear(e.tenantOf)
		}
		e.tenantOf[b.tenantKey] = tenant
	}
	tr := e.tenants[tenant]
	if tr == nil {
		return
	}
	now := e.d.Now()
	for i := range b.msgs {
		m := &b.msgs[i]
		agent, err := telemetry.ParseAgentUUID(m.AgentUUID)
		if err != nil {
			continue
		}
		agentID := agent.String()
		base := now
		if m.Timestamp != nil {
			base = m.Timestamp.Time
		}
		for j := range m.Readings {
			r := &m.Readings[j]
			if r.Value == nil || !finite(*r.Value) {
				continue
			}
			t := base
			if r.Timestamp != nil {
				t = r.Timestamp.Time
			}
			metric := m.DeviceName + "." + r.Name
			for _, idx := range tr.matching(metric, r.Name) {
				c := tr.rules[idx]
				if c.agents != nil && !c.agents[agentID] {
					continue
				}
				e.judge(ctx, tenant, c, agentID, m.DeviceName, metric, r.Name, t.UTC(), *r.Value, now)
			}
		}
	}
}

// stateOf returns the series' state, creating it when there is room.
func (e *Evaluator) stateOf(k stateKey, now time.Time) *state {
	st, ok := e.states[k]
	if !ok {
		if len(e.states) >= maxStates {
			e.m.seriesDropped.Inc()
			return nil
		}
		st = &state{}
		e.states[k] = st
		if k.cond == 0 {
			st.open = e.openKeys[openKey{rule: ruleIDOf(k.rule), agent: k.agent, metric: k.metric}]
		}
	}
	st.lastSeen = now
	return st
}

func (e *Evaluator) judge(ctx context.Context, tenant string, c *compiled, agent, device, metric, reading string, t time.Time, v float64, now time.Time) {
	rv := c.version
	if c.rule.Type != TypeCorrelation {
		st := e.stateOf(stateKey{rule: rv, agent: agent, metric: metric}, now)
		if st == nil {
			return
		}
		st.device = device
		before := st.s.n
		fired, score := c.det.observe(&st.s, t, v, e.samples < maxSamples)
		e.samples += st.s.n - before
		e.step(ctx, tenant, c, st, agent, metric, fired, score, v, t)
		return
	}
	// A correlation rule: each condition keeps its own window per metric;
	// the rule fires while every condition has held within the window.
	agg := e.stateOf(stateKey{rule: rv, agent: agent, metric: c.corrMetric}, now)
	if agg == nil {
		return
	}
	if agg.lastTrue == nil {
		agg.lastTrue = make([]time.Time, len(c.conds))
	}
	agg.device = device
	for i, sub := range c.rule.Conditions {
		if !matchMetric(sub.Metric, metric, reading) {
			continue
		}
		st := e.stateOf(stateKey{rule: rv, agent: agent, metric: metric, cond: i + 1}, now)
		if st == nil {
			return
		}
		before := st.s.n
		held, _ := c.conds[i].observe(&st.s, t, v, e.samples < maxSamples)
		e.samples += st.s.n - before
		if held {
			agg.lastTrue[i] = t
		}
	}
	all := true
	for _, lt := range agg.lastTrue {
		if lt.IsZero() || t.Sub(lt) > c.window || lt.Sub(t) > c.window {
			all = false
			break
		}
	}
	score := 0.0
	if all {
		score = 1
	}
	e.step(ctx, tenant, c, agg, agent, c.corrMetric, all, score, v, t)
}

// correlationMetric names a correlation rule's series in its incidents:
// its conditions' patterns.
func correlationMetric(r Rule) string {
	parts := make([]string, len(r.Conditions))
	for i, c := range r.Conditions {
		parts[i] = c.Metric
	}
	return strings.Join(parts, " & ")
}

// step moves a series' incident: open on a firing sample when none is
// open, close once the condition has stayed clear for the rule's
// recoverAfter (in reading time, so a replayed backlog recovers as it
// happened).
func (e *Evaluator) step(ctx context.Context, tenant string, c *compiled, st *state, agent, metric string, fired bool, score, v float64, t time.Time) {
	if fired {
		st.clearSince = time.Time{}
		if st.open {
			st.peak = max(st.peak, score)
			return
		}
		inc := Incident{TenantUUID: tenant, RuleID: c.rule.ID, RuleName: c.rule.Name, RuleType: c.rule.Type, Severity: c.rule.Severity,
			AgentUUID: agent, DeviceName: st.device, Metric: metric, Value: v, Score: score, PeakScore: score, OpenedAt: t}
		opened, err := e.st.openIncident(ctx, &inc)
		if err != nil {
			e.d.Log.Warn("open anomaly incident", "rule", c.rule.ID, "agent", agent, "metric", metric, "err", err)
			return
		}
		st.open, st.peak = true, score
		if opened {
			e.m.incidents.WithLabelValues("opened").Inc()
			e.notify.Incident(inc, "opened")
		}
		return
	}
	if !st.open {
		return
	}
	if st.clearSince.IsZero() {
		st.clearSince = t
	}
	if t.Sub(st.clearSince) < c.recoverAfter {
		return
	}
	inc, closed, err := e.st.recoverIncident(ctx, c.rule.ID, agent, metric, t, st.peak)
	if err != nil {
		e.d.Log.Warn("close anomaly incident", "rule", c.rule.ID, "agent", agent, "metric", metric, "err", err)
		return
	}
	st.open, st.clearSince, st.peak = false, time.Time{}, 0
	if closed {
		e.m.incidents.WithLabelValues("recovered").Inc()
		e.notify.Incident(inc, "recovered")
	}
}

// ruleSpec is the stored form of a rule's parameters.
func ruleSpec(r Rule) ([]byte, error) {
	b, err := json.Marshal(spec{Condition: r.Condition, Conditions: r.Conditions, RecoverAfter: r.RecoverAfter})
	if err != nil {
		return nil, fmt.Errorf("encode rule: %w", err)
	}
	return b, nil
}
