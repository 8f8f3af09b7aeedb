package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// Endpoints keeps the protocol endpoints: the stored definitions and the
// running set, which follows every change at once.
type Endpoints interface {
	// List returns the endpoints (of protocol, all when empty) as the
	// API shows them: passwords masked, live health added.
	List(ctx context.Context, protocol string) (any, error)
	Create(ctx context.Context, in EndpointInput) (EndpointRef, error)
	// Update changes the endpoint ref (a UUID or a name) names.
	Update(ctx context.Context, ref string, in EndpointInput) (EndpointRef, error)
	Delete(ctx context.Context, ref string) (EndpointRef, error)
	// DeleteAll deletes every endpoint and reports how many.
	DeleteAll(ctx context.Context) (int, error)
}

// EndpointInput is the body of POST and PATCH /v1/endpoints. Pointers tell
// a field that was sent from one that was not, so PATCH changes only what
// it names and a poll_interval of 0 is refused rather than defaulted.
// data_points is kept raw for the adapters to read.
type EndpointInput struct {
	UUID              *string         `json:"uuid"`
	Health            json.RawMessage `json:"health"`
	Name              *string         `json:"name"`
	Protocol          *string         `json:"protocol"`
	Connection        json.RawMessage `json:"connection"`
	PollInterval      *int            `json:"poll_interval"`
	Enabled           *bool           `json:"enabled"`
	DataPoints        json.RawMessage `json:"data_points"`
	Metadata          map[string]any  `json:"metadata"`
	BufferSize        *int            `json:"buffer_size"`
	BufferTimeMS      *int            `json:"buffer_time_ms"`
	BufferCapacity    *int            `json:"buffer_capacity"`
	MQTTTopic         *string         `json:"mqtt_topic"`
	HeartbeatTopic    *string         `json:"heartbeat_topic"`
	HeartbeatInterval *int            `json:"heartbeat_interval"`
}

// EndpointRef names an endpoint in answers.
type EndpointRef struct {
	UUID     string
	Name     string
	Protocol string
	Enabled  bool
}

// Adapters are the protocol adapters of the running endpoints: one
// endpoint is one device.
type Adapters interface {
	// Protocols lists the protocols the agent has an adapter for.
	Protocols() []string
	Devices(protocol string) any
	Device(protocol, name string) (any, error)
	DeviceMetrics(protocol, name string) (any, error)
	ProtocolMetrics(protocol string) (any, error)
	// Write writes value (JSON numbers as json.Number) to a register of
	// a device and returns the value written.
	Write(ctx context.Context, protocol, device, register string, value any) (any, error)
	// BrowseOPCUA browses an OPC-UA server's address space; req is the
	// request body.
	BrowseOPCUA(ctx context.Context, req json.RawMessage) (any, error)
}

// endpointRoutes are the handlers of one resource group.
type endpointRoutes struct{ routes }

// RegisterEndpoints adds the endpoint, device and adapter routes.
func RegisterEndpoints(g *gin.RouterGroup, d Deps) {
	r := endpointRoutes{routes{Deps: d}}
	g.GET("/endpoints", r.listEndpoints)
	g.POST("/endpoints", r.createEndpoint)
	g.PATCH("/endpoints/:ref", r.patchEndpoint)
	g.DELETE("/endpoints/:ref", r.deleteEndpoint)
	g.DELETE("/endpoints", r.deleteAllEndpoints)
	g.GET("/devices", r.listDevices)
	g.GET("/adapters/:protocol/devices", r.adapterDevices)
	g.GET("/adapters/:protocol/devices/:device", r.adapterDevice)
	g.GET("/adapters/:protocol/devices/:device/metrics", r.adapterDeviceMetrics)
	g.GET("/adapters/:protocol/metrics", r.adapterMetrics)
	g.POST("/adapters/:protocol/devices/:device/write", r.adapterWrite)
	g.POST("/discover/opcua/browse", r.browseOPCUA)
}

func (r endpointRoutes) listEndpoints(c *gin.Context) {
	eps, err := r.Endpoints.List(c.Request.Context(), strings.ToLower(c.Query("protocol")))
	r.reply(c, http.StatusOK, "list endpoints", gin.H{"endpoints": eps}, err)
}

func (r endpointRoutes) createEndpoint(c *gin.Context) {
	var in EndpointInput
	if !bind(c, &in) {
		return
	}
	if in.UUID != nil || in.Health != nil {
		fail(c, http.StatusBadRequest, "uuid and health are assigned by the agent; leave them out")
		return
	}
	ep, err := r.Endpoints.Create(c.Request.Context(), in)
	r.reply(c, http.StatusCreated, "create endpoint", gin.H{"uuid": ep.UUID, "name": ep.Name, "protocol": ep.Protocol, "enabled": ep.Enabled}, err)
}

func (r endpointRoutes) patchEndpoint(c *gin.Context) {
	var in EndpointInput
	if !bind(c, &in) {
		return
	}
	if in.UUID != nil || in.Health != nil || in.Protocol != nil {
		fail(c, http.StatusBadRequest, "uuid, protocol and health cannot be changed; create a new endpoint instead")
		return
	}
	ep, err := r.Endpoints.Update(c.Request.Context(), c.Param("ref"), in)
	r.reply(c, http.StatusOK, "update endpoint", gin.H{"uuid": ep.UUID, "name": ep.Name, "enabled": ep.Enabled}, err)
}

func (r endpointRoutes) deleteEndpoint(c *gin.Context) {
	ep, err := r.Endpoints.Delete(c.Request.Context(), c.Param("ref"))
	r.reply(c, http.StatusOK, "delete endpoint", gin.H{"message": fmt.Sprintf("endpoint %s deleted", ep.Name)}, err)
}

func (r endpointRoutes) deleteAllEndpoints(c *gin.Context) {
	n, err := r.Endpoints.DeleteAll(c.Request.Context())
	r.reply(c, http.StatusOK, "delete endpoints", gin.H{"message": fmt.Sprintf("%d endpoints deleted", n), "removed": n}, err)
}

// GET /v1/devices lists the devices the agent knows: every running
// endpoint with its status. (Discovered but unconfigured hardware joins
// this list with discovery.)
func (r endpointRoutes) listDevices(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"devices": r.Adapters.Devices(strings.ToLower(c.Query("protocol")))})
}

// protocolFor answers 404 when no adapter serves :protocol.
func (r endpointRoutes) protocolFor(c *gin.Context) (string, bool) {
	p := strings.ToLower(c.Param("protocol"))
	if ps := r.Adapters.Protocols(); !slices.Contains(ps, p) {
		fail(c, http.StatusNotFound, "no adapter for protocol %q (supported: %s)", p, strings.Join(ps, ", "))
		return "", false
	}
	return p, true
}

func (r endpointRoutes) adapterDevices(c *gin.Context) {
	p, ok := r.protocolFor(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, gin.H{"devices": r.Adapters.Devices(p)})
}

func (r endpointRoutes) adapterDevice(c *gin.Context) {
	p, ok := r.protocolFor(c)
	if !ok {
		return
	}
	d, err := r.Adapters.Device(p, c.Param("device"))
	r.reply(c, http.StatusOK, "read device", d, err)
}

func (r endpointRoutes) adapterDeviceMetrics(c *gin.Context) {
	p, ok := r.protocolFor(c)
	if !ok {
		return
	}
	m, err := r.Adapters.DeviceMetrics(p, c.Param("device"))
	r.reply(c, http.StatusOK, "read device metrics", m, err)
}

func (r endpointRoutes) adapterMetrics(c *gin.Context) {
	p, ok := r.protocolFor(c)
	if !ok {
		return
	}
	ms, err := r.Adapters.ProtocolMetrics(p)
	r.reply(c, http.StatusOK, "read protocol metrics", gin.H{"protocol": p, "devices": ms}, err)
}

type writeRequest struct {
	Register string          `json:"register"`
	Value    json.RawMessage `json:"value"`
}

func (r endpointRoutes) adapterWrite(c *gin.Context) {
	p, ok := r.protocolFor(c)
	if !ok {
		return
	}
	var req writeRequest
	if !bind(c, &req) {
		return
	}
	if req.Register == "" {
		fail(c, http.StatusBadRequest, "register: is required")
		return
	}
	if len(req.Value) == 0 || string(req.Value) == "null" {
		fail(c, http.StatusBadRequest, "value: is required")
		return
	}
	var value any
	dec := json.NewDecoder(strings.NewReader(string(req.Value)))
	dec.UseNumber() // so a 64-bit integer reaches the adapter exactly
	if err := dec.Decode(&value); err != nil {
		fail(c, http.StatusBadRequest, "value: %v", err)
		return
	}
	device := c.Param("device")
	written, err := r.Adapters.Write(c.Request.Context(), p, device, req.Register, value)
	if err != nil {
		r.respond(c, "write", err)
		return
	}
	r.Log.Info("value written", "protocol", p, "device", device, "register", req.Register)
	c.JSON(http.StatusOK, gin.H{"success": true, "deviceName": device, "register": req.Register, "value": written})
}

func (r endpointRoutes) browseOPCUA(c *gin.Context) {
	body, ok := readBody(c)
	if !ok {
		return
	}
	res, err := r.Adapters.BrowseOPCUA(c.Request.Context(), body)
	r.reply(c, http.StatusOK, "browse", res, err)
}
