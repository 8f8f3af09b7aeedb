package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/opcua"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
	"github.com/gin-gonic/gin"
)

// GET /v1/devices lists the devices the agent knows: every running
// endpoint with its status. (Discovered but unconfigured hardware joins
// this list with discovery.)
func (a *Agent) listDevices(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"devices": a.runner.Devices(strings.ToLower(c.Query("protocol")))})
}

// protocolFor answers 404 when no adapter serves :protocol.
func (a *Agent) protocolFor(c *gin.Context) (string, bool) {
	p := strings.ToLower(c.Param("protocol"))
	if !a.runner.HasProtocol(p) {
		fail(c, http.StatusNotFound, "no adapter for protocol %q (supported: %s)", p, strings.Join(a.runner.Protocols(), ", "))
		return "", false
	}
	return p, true
}

func (a *Agent) adapterDevices(c *gin.Context) {
	p, ok := a.protocolFor(c)
	if !ok {
		return
	}
	c.JSON(http.StatusOK, gin.H{"devices": a.runner.Devices(p)})
}

// runnerError maps the runner's errors onto statuses.
func runnerError(c *gin.Context, err error) {
	var fe *adapters.FieldError
	switch {
	case errors.Is(err, runner.ErrNotRunning):
		fail(c, http.StatusNotFound, "%v", err)
	case errors.Is(err, runner.ErrUnsupported):
		fail(c, http.StatusNotImplemented, "%v", err)
	case errors.As(err, &fe):
		fail(c, http.StatusBadRequest, "%v", err)
	default:
		// The device refused or could not be reached: a gateway failure,
		// reported with the quality code the read path would give it.
		fail(c, http.StatusBadGateway, "%s: %v", adapters.Classify(err), err)
	}
}

func (a *Agent) adapterDevice(c *gin.Context) {
	p, ok := a.protocolFor(c)
	if !ok {
		return
	}
	d, err := a.runner.Device(p, c.Param("device"))
	if err != nil {
		runnerError(c, err)
		return
	}
	c.JSON(http.StatusOK, d)
}

func (a *Agent) adapterDeviceMetrics(c *gin.Context) {
	p, ok := a.protocolFor(c)
	if !ok {
		return
	}
	m, err := a.runner.DeviceMetrics(p, c.Param("device"))
	if err != nil {
		runnerError(c, err)
		return
	}
	c.JSON(http.StatusOK, m)
}

func (a *Agent) adapterMetrics(c *gin.Context) {
	p, ok := a.protocolFor(c)
	if !ok {
		return
	}
	ms, err := a.runner.ProtocolMetrics(p)
	if err != nil {
		runnerError(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"protocol": p, "devices": ms})
}

type writeRequest struct {
	Register string          `json:"register"`
	Value    json.RawMessage `json:"value"`
}

func (a *Agent) adapterWrite(c *gin.Context) {
	p, ok := a.protocolFor(c)
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
	written, err := a.runner.Write(c.Request.Context(), p, device, req.Register, value)
	if err != nil {
		runnerError(c, err)
		return
	}
	a.log.Info("value written", "protocol", p, "device", device, "register", req.Register)
	c.JSON(http.StatusOK, gin.H{"success": true, "deviceName": device, "register": req.Register, "value": written})
}

func (a *Agent) browseOPCUA(c *gin.Context) {
	var req opcua.BrowseRequest
	if !bind(c, &req) {
		return
	}
	if err := req.Validate(); err != nil {
		fail(c, http.StatusBadRequest, "%v", err)
		return
	}
	res, err := opcua.Browse(c.Request.Context(), req)
	if err != nil {
		fail(c, http.StatusBadGateway, "browse %s: %s: %v", req.EndpointURL, adapters.Classify(err), err)
		return
	}
	c.JSON(http.StatusOK, res)
}
