package agent

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"unicode"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Limits of endpoint fields.
const (
	maxNameLen         = 128
	minPollIntervalMS  = 10
	maxPollIntervalMS  = 24 * 3600 * 1000
	maxBufferSize      = 10000
	maxBufferTimeMS    = 3600 * 1000
	maxBufferCapacity  = 64 << 20
	maxHeartbeatS      = 7 * 24 * 3600
	defaultPollMS      = 10000
	redactedPassword   = "********"
	connectionPassword = "password"
)

// endpointService is httpapi.Endpoints, and the adapters phase: it starts
// the stored endpoints and stops them all.
type endpointService struct {
	st     *storeRef
	runner *runner.Runner
	log    *slog.Logger
	// managed refuses local changes to what the target state manages.
	managed *managedGuard

	// mu makes each endpoint change one step: the store write and the
	// runner change, so the running set always follows the last stored
	// state; and no change starts an endpoint once the phase stopped.
	mu      sync.Mutex
	running bool
	// halted is set while the applied target state's runState is
	// stopped: every endpoint keeps its stored definition and enabled
	// flag, and none runs (docs/target-state.md, section Run state).
	halted bool
}

// Why an enabled endpoint does not run while the run state is stopped.
const (
	stateRunStopped  = "STOPPED"
	reasonRunStopped = "run state stopped by the cloud"
)

// start is the adapters phase: every enabled stored endpoint starts,
// unless halted says the applied target state stopped them. An endpoint
// whose adapter cannot be built (a protocol this build lacks) is logged
// and skipped, not fatal: the others must run. The endpoints run until
// stop, not as long as ctx, so their last batches are flushed by stop.
func (e *endpointService) start(ctx context.Context, halted bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runner.Start(context.WithoutCancel(ctx))
	e.running, e.halted = true, halted
	if halted {
		e.log.Info("endpoints not started: " + reasonRunStopped)
		return nil
	}
	return e.startStored(ctx)
}

// startStored starts every enabled stored endpoint; e.mu is held.
func (e *endpointService) startStored(ctx context.Context) error {
	st, err := e.st.Open()
	if err != nil {
		return err
	}
	eps, err := st.Endpoints().List(ctx, "")
	if err != nil {
		return err
	}
	started := 0
	for _, ep := range eps {
		if !ep.Enabled {
			continue
		}
		if err := e.runner.Apply(ep); err != nil {
			e.log.Error("endpoint not started", "endpoint", ep.Name, "err", err)
			continue
		}
		started++
	}
	e.log.Info("endpoints started", "started", started, "stored", len(eps))
	return nil
}

// stopped reports whether the run state stops the endpoints.
func (e *endpointService) stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.halted
}

// runState is control.RunStopped while the run state stops the
// endpoints, else control.RunRunning.
func (e *endpointService) runState() string {
	if e.stopped() {
		return control.RunStopped
	}
	return control.RunRunning
}

// setStopped stops every endpoint, or starts the enabled stored ones
// again (when the phase runs); no stored definition changes.
func (e *endpointService) setStopped(ctx context.Context, stopped bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.halted == stopped {
		return nil
	}
	e.halted = stopped
	if stopped {
		e.runner.StopAll()
		return nil
	}
	if !e.running {
		return nil
	}
	return e.startStored(ctx)
}

// stop stops every endpoint and waits for them.
func (e *endpointService) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.running = false
	e.runner.StopAll()
}

// apply makes the runner follow ep, while the phase runs and the run
// state does not stop the endpoints.
func (e *endpointService) apply(ep adapters.Endpoint, what string) {
	if !e.running {
		return
	}
	if e.halted {
		if ep.Enabled {
			e.log.Info("endpoint "+what+" but not started: "+reasonRunStopped, "endpoint", ep.Name)
		}
		return
	}
	if err := e.runner.Apply(ep); err != nil {
		e.log.Error("endpoint "+what+" but not started", "endpoint", ep.Name, "err", err)
	}
}

// fill copies the fields of in that were sent onto ep.
func fill(in httpapi.EndpointInput, ep *adapters.Endpoint) error {
	if in.Name != nil {
		ep.Name = strings.TrimSpace(*in.Name)
	}
	if in.Protocol != nil {
		ep.Protocol = strings.ToLower(strings.TrimSpace(*in.Protocol))
	}
	if in.Connection != nil {
		ep.Connection = keepRedactedPassword(in.Connection, ep.Connection)
	}
	if in.PollInterval != nil {
		ep.PollIntervalMS = *in.PollInterval
	}
	if in.Enabled != nil {
		ep.Enabled = *in.Enabled
	}
	if in.DataPoints != nil && string(in.DataPoints) != "null" {
		var dps []adapters.DataPoint
		if err := httpx.DecodeStrict(in.DataPoints, &dps); err != nil {
			return httpapi.Errorf(http.StatusBadRequest, "data_points: %s", strings.TrimPrefix(err.Error(), "body: "))
		}
		ep.DataPoints = dps
	}
	if in.Metadata != nil {
		ep.Metadata = in.Metadata
	}
	setInt(&ep.BufferSize, in.BufferSize)
	setInt(&ep.BufferTimeMS, in.BufferTimeMS)
	setInt(&ep.BufferCapacity, in.BufferCapacity)
	setInt(&ep.HeartbeatIntervalS, in.HeartbeatInterval)
	if in.MQTTTopic != nil {
		ep.MQTTTopic = *in.MQTTTopic
	}
	if in.HeartbeatTopic != nil {
		ep.HeartbeatTopic = *in.HeartbeatTopic
	}
	return nil
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

// validate checks the fields every protocol shares, then the protocol's
// own through its driver.
func (e *endpointService) validate(ep adapters.Endpoint) error {
	if err := e.check(ep); err != nil {
		return httpapi.Invalid(err)
	}
	return nil
}

// check is validate's joined field errors, one per line.
func (e *endpointService) check(ep adapters.Endpoint) error {
	var errs []error
	switch {
	case ep.Name == "":
		errs = append(errs, adapters.Fieldf("name", "is required"))
	case len(ep.Name) > maxNameLen:
		errs = append(errs, adapters.Fieldf("name", "must be at most %d characters", maxNameLen))
	case strings.ContainsFunc(ep.Name, func(r rune) bool { return r == '/' || unicode.IsControl(r) }):
		// The name is a path segment of the device routes.
		errs = append(errs, adapters.Fieldf("name", "must not contain '/' or control characters"))
	}
	if ep.Protocol == "" {
		errs = append(errs, adapters.Fieldf("protocol", "is required (supported: %s)", strings.Join(e.runner.Protocols(), ", ")))
	}
	if ep.PollIntervalMS < minPollIntervalMS || ep.PollIntervalMS > maxPollIntervalMS {
		errs = append(errs, adapters.Fieldf("poll_interval", "must be %d..%d milliseconds, got %d", minPollIntervalMS, maxPollIntervalMS, ep.PollIntervalMS))
	}
	for _, r := range []struct {
		field    string
		v, limit int
	}{
		{"buffer_size", ep.BufferSize, maxBufferSize},
		{"buffer_time_ms", ep.BufferTimeMS, maxBufferTimeMS},
		{"buffer_capacity", ep.BufferCapacity, maxBufferCapacity},
		{"heartbeat_interval", ep.HeartbeatIntervalS, maxHeartbeatS},
	} {
		if r.v < 0 || r.v > r.limit {
			errs = append(errs, adapters.Fieldf(r.field, "must be 0..%d, got %d", r.limit, r.v))
		}
	}
	if len(ep.Connection) == 0 || string(ep.Connection) == "null" {
		ep.Connection = json.RawMessage("{}")
	}
	if ep.Protocol != "" {
		errs = append(errs, e.runner.Validate(ep))
	}
	return errors.Join(errs...)
}

// endpointView is an endpoint as the API shows it: the stored object with
// the connection password masked and the live health when it runs.
type endpointView struct {
	adapters.Endpoint
	Health *runner.Health `json:"health,omitempty"`
}

// List implements httpapi.Endpoints.
func (e *endpointService) List(ctx context.Context, protocol string) (any, error) {
	st, err := e.st.Open()
	if err != nil {
		return nil, err
	}
	eps, err := st.Endpoints().List(ctx, protocol)
	if err != nil {
		return nil, err
	}
	halted := e.stopped()
	views := make([]endpointView, len(eps))
	for i, ep := range eps {
		ep.Connection = redactPassword(ep.Connection)
		views[i] = endpointView{Endpoint: ep}
		if h, ok := e.runner.Health(ep.UUID); ok {
			views[i].Health = &h
		} else if ep.Enabled && halted {
			views[i].Health = &runner.Health{Status: strings.ToLower(stateRunStopped), State: stateRunStopped, Reason: reasonRunStopped}
		}
	}
	return views, nil
}

func ref(ep adapters.Endpoint) httpapi.EndpointRef {
	return httpapi.EndpointRef{UUID: ep.UUID, Name: ep.Name, Protocol: ep.Protocol, Enabled: ep.Enabled}
}

// Create implements httpapi.Endpoints.
func (e *endpointService) Create(ctx context.Context, in httpapi.EndpointInput) (httpapi.EndpointRef, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return httpapi.EndpointRef{}, err
	}
	ep := adapters.Endpoint{UUID: codec.NewUUID().String(), PollIntervalMS: defaultPollMS, Enabled: true}
	if err := fill(in, &ep); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := e.managed.item(ctx, reconcile.KindEndpoint, ep.Name); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if len(ep.Connection) == 0 {
		ep.Connection = json.RawMessage("{}")
	}
	if ep.DataPoints == nil {
		ep.DataPoints = []adapters.DataPoint{}
	}
	if err := e.validate(ep); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := st.Endpoints().Create(ctx, ep); err != nil {
		return httpapi.EndpointRef{}, writeError(ep, err)
	}
	e.apply(ep, "stored")
	e.log.Info("endpoint created", "endpoint", ep.Name, "protocol", ep.Protocol, "enabled", ep.Enabled)
	return ref(ep), nil
}

// writeError makes a failed store write a taken name, the client's 400,
// or ours.
func writeError(ep adapters.Endpoint, err error) error {
	if errors.Is(err, store.ErrDuplicate) {
		return httpapi.Errorf(http.StatusBadRequest, "name: an endpoint named %q exists already", ep.Name)
	}
	return err
}

// find resolves ref (a UUID or a name) or answers 404.
func find(ctx context.Context, st *store.Store, ref string) (adapters.Endpoint, error) {
	ep, err := st.Endpoints().Get(ctx, ref)
	if errors.Is(err, store.ErrNotFound) {
		return ep, httpapi.Errorf(http.StatusNotFound, "no endpoint with uuid or name %q", ref)
	}
	return ep, err
}

// Update implements httpapi.Endpoints.
func (e *endpointService) Update(ctx context.Context, name string, in httpapi.EndpointInput) (httpapi.EndpointRef, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return httpapi.EndpointRef{}, err
	}
	ep, err := find(ctx, st, name)
	if err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := e.managed.item(ctx, reconcile.KindEndpoint, ep.Name); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := fill(in, &ep); err != nil {
		return httpapi.EndpointRef{}, err
	}
	// Nor may a local endpoint take a managed one's name.
	if err := e.managed.item(ctx, reconcile.KindEndpoint, ep.Name); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := e.validate(ep); err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := st.Endpoints().Update(ctx, ep); err != nil {
		return httpapi.EndpointRef{}, writeError(ep, err)
	}
	e.apply(ep, "updated")
	return ref(ep), nil
}

// Delete implements httpapi.Endpoints.
func (e *endpointService) Delete(ctx context.Context, name string) (httpapi.EndpointRef, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return httpapi.EndpointRef{}, err
	}
	ep, err := find(ctx, st, name)
	if err != nil {
		return httpapi.EndpointRef{}, err
	}
	if err := e.managed.item(ctx, reconcile.KindEndpoint, ep.Name); err != nil {
		return httpapi.EndpointRef{}, err
	}
	// Polling stops before the row goes, so no reading of a deleted
	// endpoint is produced after the answer.
	e.runner.Remove(ep.UUID)
	if err := st.Endpoints().Delete(ctx, ep.UUID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return httpapi.EndpointRef{}, err
	}
	return ref(ep), nil
}

// DeleteAll implements httpapi.Endpoints.
func (e *endpointService) DeleteAll(ctx context.Context) (int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	st, err := e.st.Open()
	if err != nil {
		return 0, err
	}
	eps, err := st.Endpoints().List(ctx, "")
	if err != nil {
		return 0, err
	}
	for _, ep := range eps {
		if err := e.managed.item(ctx, reconcile.KindEndpoint, ep.Name); err != nil {
			return 0, err
		}
	}
	// Every endpoint stops (in parallel) before the rows go.
	e.runner.StopAll()
	removed, err := st.Endpoints().DeleteAll(ctx)
	return len(removed), err
}

// forget stops every endpoint and runs fn (a factory reset) while no
// endpoint can start.
func (e *endpointService) forget(fn func() error) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runner.StopAll()
	return fn()
}

// redactPassword masks connection.password so GET never shows it.
func redactPassword(conn json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(conn, &m) != nil {
		return conn
	}
	if _, ok := m[connectionPassword]; !ok {
		return conn
	}
	m[connectionPassword], _ = json.Marshal(redactedPassword)
	out, err := json.Marshal(m)
	if err != nil {
		return conn
	}
	return out
}

// keepRedactedPassword lets a client send back the masked connection it
// read: the mask stands for the stored password.
func keepRedactedPassword(in, stored json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(in, &m) != nil {
		return in
	}
	var pw string
	if json.Unmarshal(m[connectionPassword], &pw) != nil || pw != redactedPassword {
		return in
	}
	var old map[string]json.RawMessage
	if json.Unmarshal(stored, &old) != nil || old[connectionPassword] == nil {
		delete(m, connectionPassword)
	} else {
		m[connectionPassword] = old[connectionPassword]
	}
	out, err := json.Marshal(m)
	if err != nil {
		return in
	}
	return out
}
