package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"slices"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// newReconciler builds the reconciler over the agent's services and
// hands each service the guard that refuses local changes to managed
// items (docs/agent.md, section "Managed by the cloud").
func newReconciler(p *parts, pc *publishConfig) *reconcile.Reconciler {
	r := reconcile.New(targetEndpoints{p.endpoints}, targetSettings{p.settings}, targetPublishing{pc}, p.log)
	g := &managedGuard{st: p.st, target: r}
	if p.apps != nil {
		p.apps.target = r
		r.SetApps(targetApps{p.apps})
	}
	p.endpoints.managed, p.settings.managed, pc.managed = g, g, g
	return r
}

// applyTarget applies a cached cloud target state (the JSON of a
// cloud.TargetState) when the agent is provisioned. force re-checks the
// local state even when that version is applied already (at start).
func (s *cloudService) applyTarget(ctx context.Context, st *store.Store, force bool) {
	if s.target == nil || !provisioned(ctx, st) {
		return
	}
	raw, err := st.Meta(ctx, metaTargetState)
	if err != nil || raw == "" {
		return
	}
	var ts cloud.TargetState
	if err := json.Unmarshal([]byte(raw), &ts); err != nil {
		s.log.Error("cached target state unreadable", "err", err)
		return
	}
	// A refusal is logged and kept in TargetStatus by the reconciler.
	_ = s.target.Apply(ctx, st, ts.Version, ts.State, force)
}

// startEndpoints is the adapters phase. It reads the applied document
// first, so a provisioned agent the cloud stopped starts with its
// endpoints stopped: none polls, not even until the cached document is
// applied again (docs/target-state.md, section Run state).
func (p *parts) startEndpoints(ctx context.Context) error {
	st := p.st.Load()
	if err := p.cloud.target.Load(ctx, st); err != nil {
		p.log.Error("applied target state unreadable; the next one applies in full", "err", err)
	}
	halted := p.cloud.target.RunState() == control.RunStopped && provisioned(ctx, st)
	return p.endpoints.start(ctx, halted)
}

// startTarget is the start-up step after the adapters phase: it applies
// the cached document, so the agent runs the cloud's last state without
// the cloud.
func (p *parts) startTarget(ctx context.Context) error {
	p.cloud.applyTarget(ctx, p.st.Load(), true)
	return nil
}

// managedGuard answers 409 for a local change to an item the applied
// target state manages, while the agent is provisioned.
type managedGuard struct {
	st     *storeRef
	target *reconcile.Reconciler
}

func (g *managedGuard) active(ctx context.Context) bool {
	if g == nil {
		return false
	}
	st := g.st.Load()
	return st != nil && provisioned(ctx, st)
}

func managedError(what string, version int64) error {
	return httpapi.Errorf(http.StatusConflict, "%s is managed by the cloud's target state (version %d); change it there", what, version)
}

// item refuses a change to the endpoint or destination name.
func (g *managedGuard) item(ctx context.Context, kind reconcile.Kind, name string) error {
	if !g.active(ctx) {
		return nil
	}
	if v, ok := g.target.Managed(kind, name); ok {
		return managedError(fmt.Sprintf("%s %q", kind, name), v)
	}
	return nil
}

// settings refuses a settings patch that sets a managed setting.
func (g *managedGuard) settings(ctx context.Context, patch []byte) error {
	if !g.active(ctx) {
		return nil
	}
	var groups map[string]json.RawMessage
	if json.Unmarshal(patch, &groups) != nil {
		return nil // the patch itself answers 400
	}
	for _, group := range settingsGroups {
		var keys map[string]json.RawMessage
		if json.Unmarshal(groups[group], &keys) != nil {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(keys)) {
			if v, ok := g.target.ManagedSetting(group, k); ok {
				return managedError(fmt.Sprintf("setting %q", group+"."+k), v)
			}
		}
	}
	return nil
}

// guard implements the settings service's part of the managed check.
func (s *settingsService) guard(ctx context.Context, patch []byte) error {
	return s.managed.settings(ctx, patch)
}

// targetEndpoints is reconcile.Endpoints over the endpoint service.
type targetEndpoints struct{ e *endpointService }

func (t targetEndpoints) Stored(ctx context.Context) ([]adapters.Endpoint, error) {
	st, err := t.e.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Endpoints().List(ctx, "")
}

// Build makes the endpoint POST /v1/endpoints would store for the same
// body, so a document and the local API mean the same by each field.
func (t targetEndpoints) Build(te control.TargetEndpoint) (adapters.Endpoint, error) {
	body, err := json.Marshal(te)
	if err != nil {
		return adapters.Endpoint{}, fmt.Errorf("encode endpoint: %w", err)
	}
	var in httpapi.EndpointInput
	if err := httpx.DecodeStrict(body, &in); err != nil {
		return adapters.Endpoint{}, err
	}
	ep := adapters.Endpoint{UUID: codec.NewUUID().String(), PollIntervalMS: defaultPollMS, Enabled: true}
	if err := fill(in, &ep); err != nil {
		return ep, errors.New(err.Error())
	}
	if len(ep.Connection) == 0 {
		ep.Connection = json.RawMessage("{}")
	}
	if ep.DataPoints == nil {
		ep.DataPoints = []adapters.DataPoint{}
	}
	return ep, t.e.check(ep)
}

func (t targetEndpoints) Put(ctx context.Context, ep adapters.Endpoint, create bool) error {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return err
	}
	if create {
		err = st.Endpoints().Create(ctx, ep)
	} else {
		err = st.Endpoints().Update(ctx, ep)
	}
	if err != nil {
		return err
	}
	e.apply(ep, "applied")
	return nil
}

func (t targetEndpoints) Stopped() bool { return t.e.stopped() }

func (t targetEndpoints) SetStopped(ctx context.Context, stopped bool) error {
	return t.e.setStopped(ctx, stopped)
}

func (t targetEndpoints) Remove(ctx context.Context, ep adapters.Endpoint) error {
	e := t.e
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return err
	}
	e.runner.Remove(ep.UUID)
	if err := st.Endpoints().Delete(ctx, ep.UUID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// targetSettings is reconcile.Settings over the settings service.
type targetSettings struct{ s *settingsService }

func (t targetSettings) CheckSettings(patch []byte) (bool, error) {
	cur := t.s.current()
	merged, ignored, err := mergeSettings(cur, patch, false)
	if err != nil {
		return false, err
	}
	if len(ignored) > 0 {
		slices.Sort(ignored)
		var errs []error
		for _, k := range ignored {
			errs = append(errs, adapters.Fieldf(k, "unknown settings group (this agent has %v)", settingsGroups))
		}
		return false, errors.Join(errs...)
	}
	return !reflect.DeepEqual(merged, cur), nil
}

func (t targetSettings) ApplySettings(ctx context.Context, patch []byte) error {
	st, err := t.s.st.Open()
	if err != nil {
		return err
	}
	return t.s.patch(ctx, st, patch)
}

// targetPublishing is reconcile.Publishing over the publishing
// configuration.
type targetPublishing struct{ p *publishConfig }

func (t targetPublishing) Destinations(ctx context.Context) ([]store.Destination, error) {
	st, err := t.p.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Publishing().Destinations(ctx, true)
}

func (t targetPublishing) Subscriptions(ctx context.Context) ([]store.Subscription, error) {
	st, err := t.p.st.Open()
	if err != nil {
		return nil, err
	}
	return st.Publishing().Subscriptions(ctx, 0, true)
}

func (t targetPublishing) CheckDestination(d store.Destination) error { return validateDestination(d) }

func (t targetPublishing) CheckSubscription(s store.Subscription, destType string) error {
	return subscriptionFields(s, destType, nil)
}

func (t targetPublishing) PutDestination(ctx context.Context, d store.Destination) (store.Destination, error) {
	st, err := t.p.st.Open()
	if err != nil {
		return d, err
	}
	if d.ID == 0 {
		return st.Publishing().CreateDestination(ctx, d)
	}
	return d, st.Publishing().UpdateDestination(ctx, d)
}

func (t targetPublishing) DeleteDestination(ctx context.Context, id int64) error {
	st, err := t.p.st.Open()
	if err != nil {
		return err
	}
	if err := st.Publishing().DeleteDestination(ctx, id); err != nil {
		return err
	}
	t.p.pub.ForgetStopped(ctx, id)
	return nil
}

func (t targetPublishing) CreateSubscription(ctx context.Context, s store.Subscription) error {
	st, err := t.p.st.Open()
	if err != nil {
		return err
	}
	_, err = st.Publishing().CreateSubscription(ctx, s)
	return err
}

func (t targetPublishing) DeleteSubscription(ctx context.Context, id int64) error {
	st, err := t.p.st.Open()
	if err != nil {
		return err
	}
	return st.Publishing().DeleteSubscription(ctx, id)
}

func (t targetPublishing) Reload(ctx context.Context) { t.p.reload(ctx) }

var (
	_ reconcile.Endpoints  = targetEndpoints{}
	_ reconcile.Settings   = targetSettings{}
	_ reconcile.Publishing = targetPublishing{}
)
