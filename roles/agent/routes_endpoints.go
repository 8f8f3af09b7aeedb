package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/gin-gonic/gin"
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

// endpointInput is the body of POST and PATCH /v1/endpoints. Pointers tell
// a field that was sent from one that was not, so PATCH changes only what
// it names and a poll_interval of 0 is refused rather than defaulted.
type endpointInput struct {
	UUID              *string              `json:"uuid"`
	Health            json.RawMessage      `json:"health"`
	Name              *string              `json:"name"`
	Protocol          *string              `json:"protocol"`
	Connection        json.RawMessage      `json:"connection"`
	PollInterval      *int                 `json:"poll_interval"`
	Enabled           *bool                `json:"enabled"`
	DataPoints        []adapters.DataPoint `json:"data_points"`
	Metadata          map[string]any       `json:"metadata"`
	BufferSize        *int                 `json:"buffer_size"`
	BufferTimeMS      *int                 `json:"buffer_time_ms"`
	BufferCapacity    *int                 `json:"buffer_capacity"`
	MQTTTopic         *string              `json:"mqtt_topic"`
	HeartbeatTopic    *string              `json:"heartbeat_topic"`
	HeartbeatInterval *int                 `json:"heartbeat_interval"`
}

// apply copies the fields that were sent onto ep.
func (in endpointInput) apply(ep *adapters.Endpoint) {
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
	if in.DataPoints != nil {
		ep.DataPoints = in.DataPoints
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
}

func setInt(dst *int, v *int) {
	if v != nil {
		*dst = *v
	}
}

// validateEndpoint checks the fields every protocol shares, then the
// protocol's own through its driver.
func (a *Agent) validateEndpoint(ep adapters.Endpoint) error {
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
		errs = append(errs, adapters.Fieldf("protocol", "is required (supported: %s)", strings.Join(a.runner.Protocols(), ", ")))
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
		errs = append(errs, a.runner.Validate(ep))
	}
	return errors.Join(errs...)
}

// badRequest answers 400 with every validation problem of err (joined
// errors on one line), each naming its field.
func badRequest(c *gin.Context, err error) {
	fail(c, http.StatusBadRequest, "%s", strings.ReplaceAll(err.Error(), "\n", "; "))
}

// endpointView is an endpoint as the API shows it: the stored object with
// the connection password masked and the live health when it runs.
type endpointView struct {
	adapters.Endpoint
	Health *runner.Health `json:"health,omitempty"`
}

func (a *Agent) view(ep adapters.Endpoint) endpointView {
	ep.Connection = redactPassword(ep.Connection)
	v := endpointView{Endpoint: ep}
	if h, ok := a.runner.Health(ep.UUID); ok {
		v.Health = &h
	}
	return v
}

func (a *Agent) listEndpoints(c *gin.Context) {
	s, ok := a.storeFor(c)
	if !ok {
		return
	}
	eps, err := s.Endpoints(c.Request.Context(), strings.ToLower(c.Query("protocol")))
	if err != nil {
		a.internal(c, "list endpoints", err)
		return
	}
	views := make([]endpointView, len(eps))
	for i, ep := range eps {
		views[i] = a.view(ep)
	}
	c.JSON(http.StatusOK, gin.H{"endpoints": views})
}

func (a *Agent) createEndpoint(c *gin.Context) {
	a.endpointsMu.Lock()
	defer a.endpointsMu.Unlock()
	s, ok := a.storeFor(c)
	if !ok {
		return
	}
	var in endpointInput
	if !bind(c, &in) {
		return
	}
	if in.UUID != nil || in.Health != nil {
		fail(c, http.StatusBadRequest, "uuid and health are assigned by the agent; leave them out")
		return
	}
	ep := adapters.Endpoint{UUID: codec.NewUUID().String(), PollIntervalMS: defaultPollMS, Enabled: true}
	in.apply(&ep)
	if len(ep.Connection) == 0 {
		ep.Connection = json.RawMessage("{}")
	}
	if ep.DataPoints == nil {
		ep.DataPoints = []adapters.DataPoint{}
	}
	if err := a.validateEndpoint(ep); err != nil {
		badRequest(c, err)
		return
	}
	if err := s.CreateEndpoint(c.Request.Context(), ep); err != nil {
		a.endpointWriteError(c, ep, "create endpoint", err)
		return
	}
	if err := a.runner.Apply(ep); err != nil {
		a.log.Error("endpoint stored but not started", "endpoint", ep.Name, "err", err)
	}
	a.log.Info("endpoint created", "endpoint", ep.Name, "protocol", ep.Protocol, "enabled", ep.Enabled)
	c.JSON(http.StatusCreated, gin.H{"uuid": ep.UUID, "name": ep.Name, "protocol": ep.Protocol, "enabled": ep.Enabled})
}

// endpointWriteError answers a failed store write: a taken name is the
// client's 400, anything else ours.
func (a *Agent) endpointWriteError(c *gin.Context, ep adapters.Endpoint, what string, err error) {
	if errors.Is(err, store.ErrDuplicate) {
		fail(c, http.StatusBadRequest, "name: an endpoint named %q exists already", ep.Name)
		return
	}
	a.internal(c, what, err)
}

// findEndpoint resolves :ref (a UUID or a name) or answers 404.
func (a *Agent) findEndpoint(c *gin.Context, s *store.Store) (adapters.Endpoint, bool) {
	ep, err := s.Endpoint(c.Request.Context(), c.Param("ref"))
	if errors.Is(err, store.ErrNotFound) {
		fail(c, http.StatusNotFound, "no endpoint with uuid or name %q", c.Param("ref"))
		return ep, false
	}
	if err != nil {
		a.internal(c, "read endpoint", err)
		return ep, false
	}
	return ep, true
}

func (a *Agent) patchEndpoint(c *gin.Context) {
	a.endpointsMu.Lock()
	defer a.endpointsMu.Unlock()
	s, ok := a.storeFor(c)
	if !ok {
		return
	}
	ep, ok := a.findEndpoint(c, s)
	if !ok {
		return
	}
	var in endpointInput
	if !bind(c, &in) {
		return
	}
	if in.UUID != nil || in.Health != nil || in.Protocol != nil {
		fail(c, http.StatusBadRequest, "uuid, protocol and health cannot be changed; create a new endpoint instead")
		return
	}
	in.apply(&ep)
	if err := a.validateEndpoint(ep); err != nil {
		badRequest(c, err)
		return
	}
	if err := s.UpdateEndpoint(c.Request.Context(), ep); err != nil {
		a.endpointWriteError(c, ep, "update endpoint", err)
		return
	}
	if err := a.runner.Apply(ep); err != nil {
		a.log.Error("endpoint updated but not started", "endpoint", ep.Name, "err", err)
	}
	c.JSON(http.StatusOK, gin.H{"uuid": ep.UUID, "name": ep.Name, "enabled": ep.Enabled})
}

func (a *Agent) deleteEndpoint(c *gin.Context) {
	a.endpointsMu.Lock()
	defer a.endpointsMu.Unlock()
	s, ok := a.storeFor(c)
	if !ok {
		return
	}
	ep, ok := a.findEndpoint(c, s)
	if !ok {
		return
	}
	// Polling stops before the row goes, so no reading of a deleted
	// endpoint is produced after the answer.
	a.runner.Remove(ep.UUID)
	if err := s.DeleteEndpoint(c.Request.Context(), ep.UUID); err != nil && !errors.Is(err, store.ErrNotFound) {
		a.internal(c, "delete endpoint", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"message": fmt.Sprintf("endpoint %s deleted", ep.Name)})
}

func (a *Agent) deleteAllEndpoints(c *gin.Context) {
	a.endpointsMu.Lock()
	defer a.endpointsMu.Unlock()
	s, ok := a.storeFor(c)
	if !ok {
		return
	}
	// Every endpoint stops (in parallel) before the rows go.
	a.runner.StopAll()
	removed, err := s.DeleteAllEndpoints(c.Request.Context())
	if err != nil {
		a.internal(c, "delete endpoints", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"message": fmt.Sprintf("%d endpoints deleted", len(removed)), "removed": len(removed)})
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
