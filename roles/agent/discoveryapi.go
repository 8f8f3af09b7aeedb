package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/discovery"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// newDiscovery builds the discovery service over the agent's store and
// endpoints; features.discovery switches it (docs/discovery.md).
func newDiscovery(p *parts) (*discovery.Service, error) {
	return discovery.New(discovery.Options{
		Scanners: discovery.DefaultScanners(),
		Store: func() (discovery.Store, error) {
			st, err := p.st.Open()
			if err != nil {
				return nil, err
			}
			return store.DiscoveryOf(st), nil
		},
		Endpoints: discoveryEndpoints{p.endpoints},
		Enabled:   func() bool { return p.settings.current().Features.Discovery },
		Log:       p.log.With("component", "discovery"),
	})
}

// discoveryEndpoints is discovery.Endpoints: an auto-enabled endpoint is
// created exactly as POST /v1/endpoints creates one.
type discoveryEndpoints struct{ e *endpointService }

// Connections implements discovery.Endpoints.
func (d discoveryEndpoints) Connections(ctx context.Context) (map[string][]json.RawMessage, error) {
	st, err := d.e.st.Open()
	if err != nil {
		return nil, err
	}
	eps, err := st.Endpoints().List(ctx, "")
	if err != nil {
		return nil, err
	}
	out := map[string][]json.RawMessage{}
	for _, ep := range eps {
		out[ep.Protocol] = append(out[ep.Protocol], ep.Connection)
	}
	return out, nil
}

// Create implements discovery.Endpoints.
func (d discoveryEndpoints) Create(ctx context.Context, def json.RawMessage) (string, error) {
	var in httpapi.EndpointInput
	if err := httpx.DecodeStrict(def, &in); err != nil {
		return "", err
	}
	ref, err := d.e.Create(ctx, in)
	return ref.UUID, err
}

// CheckTemplate implements discovery.Endpoints: the keys of an endpoint
// object, with the types POST /v1/endpoints takes, but for those the
// agent or the rule sets.
func (d discoveryEndpoints) CheckTemplate(def json.RawMessage) error {
	var in httpapi.EndpointInput
	if err := httpx.DecodeStrict(def, &in); err != nil {
		return err
	}
	var errs []error
	for field, set := range map[string]bool{"uuid": in.UUID != nil, "health": in.Health != nil, "protocol": in.Protocol != nil} {
		if set {
			errs = append(errs, adapters.Fieldf(field, "is set by the agent or the rule; leave it out"))
		}
	}
	if in.Connection != nil && string(in.Connection) != "null" {
		var m map[string]json.RawMessage
		if json.Unmarshal(in.Connection, &m) != nil || m == nil {
			errs = append(errs, adapters.Fieldf("connection", "must be an object"))
		}
	}
	var ep adapters.Endpoint
	if err := fill(in, &ep); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// discoveryAPI is httpapi.Discovery over the discovery service.
type discoveryAPI struct{ s *discovery.Service }

func discoveryError(err error) error {
	var in *discovery.InputError
	var conflict *discovery.ConflictError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &in):
		return httpapi.Invalid(in.Err)
	case errors.As(err, &conflict):
		return httpapi.Errorf(http.StatusConflict, "%s", conflict.Msg)
	case errors.Is(err, discovery.ErrDisabled):
		return httpapi.Errorf(http.StatusConflict, "%v; PATCH /v1/settings {\"features\":{\"discovery\":true}} turns it on", err)
	case errors.Is(err, discovery.ErrNotFound):
		return httpapi.Errorf(http.StatusNotFound, "%v", err)
	}
	return err
}

func (a discoveryAPI) Discover(ctx context.Context, in httpapi.DiscoverInput) (any, error) {
	res, err := a.s.Discover(ctx, discovery.Request{Protocols: in.Protocols, Validate: in.Validate, ForceRun: in.ForceRun, Overrides: in.Overrides})
	return res, discoveryError(err)
}

func (a discoveryAPI) Rules(ctx context.Context) (any, error) {
	rs, err := a.s.Rules(ctx)
	return map[string]any{"rules": rs}, discoveryError(err)
}

func (a discoveryAPI) CreateRule(ctx context.Context, body []byte) (any, error) {
	r, err := a.s.CreateRule(ctx, body)
	return r, discoveryError(err)
}

func (a discoveryAPI) PatchRule(ctx context.Context, uuid string, body []byte) (any, error) {
	r, err := a.s.PatchRule(ctx, uuid, body)
	return r, discoveryError(err)
}

func (a discoveryAPI) DeleteRule(ctx context.Context, uuid string) error {
	return discoveryError(a.s.DeleteRule(ctx, uuid))
}

func (a discoveryAPI) RunRule(ctx context.Context, uuid string) (any, error) {
	r, err := a.s.RunRule(ctx, uuid)
	return r, discoveryError(err)
}

func (a discoveryAPI) RuleRuns(ctx context.Context, uuid string, limit int) (any, error) {
	rs, err := a.s.RuleRuns(ctx, uuid, limit)
	return map[string]any{"runs": rs}, discoveryError(err)
}

func (a discoveryAPI) Runs(ctx context.Context, limit int) (any, error) {
	rs, err := a.s.Runs(ctx, limit)
	return map[string]any{"runs": rs}, discoveryError(err)
}

var (
	_ discovery.Endpoints = discoveryEndpoints{}
	_ httpapi.Discovery   = discoveryAPI{}
)
