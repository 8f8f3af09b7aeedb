package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/opcua"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
)

// adapterService is httpapi.Adapters on the endpoint runner.
type adapterService struct{ r *runner.Runner }

// runnerError maps the runner's errors onto statuses.
func runnerError(err error) error {
	var fe *adapters.FieldError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, runner.ErrNotRunning):
		return httpapi.Errorf(http.StatusNotFound, "%v", err)
	case errors.Is(err, runner.ErrUnsupported):
		return httpapi.Errorf(http.StatusNotImplemented, "%v", err)
	case errors.As(err, &fe):
		return httpapi.Errorf(http.StatusBadRequest, "%v", err)
	default:
		// The device refused or could not be reached: a gateway failure,
		// reported with the quality code the read path would give it.
		return httpapi.Errorf(http.StatusBadGateway, "%s: %v", adapters.Classify(err), err)
	}
}

func (s adapterService) Protocols() []string         { return s.r.Protocols() }
func (s adapterService) Devices(protocol string) any { return s.r.Devices(protocol) }

func (s adapterService) Device(protocol, name string) (any, error) {
	d, err := s.r.Device(protocol, name)
	return d, runnerError(err)
}

func (s adapterService) DeviceMetrics(protocol, name string) (any, error) {
	m, err := s.r.DeviceMetrics(protocol, name)
	return m, runnerError(err)
}

func (s adapterService) ProtocolMetrics(protocol string) (any, error) {
	ms, err := s.r.ProtocolMetrics(protocol)
	return ms, runnerError(err)
}

func (s adapterService) Write(ctx context.Context, protocol, device, register string, value any) (any, error) {
	v, err := s.r.Write(ctx, protocol, device, register, value)
	return v, runnerError(err)
}

func (s adapterService) BrowseOPCUA(ctx context.Context, body json.RawMessage) (any, error) {
	var req opcua.BrowseRequest
	if err := httpx.DecodeStrict(body, &req); err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "%v", err)
	}
	if err := req.Validate(); err != nil {
		return nil, httpapi.Errorf(http.StatusBadRequest, "%v", err)
	}
	res, err := opcua.Browse(ctx, req)
	if err != nil {
		return nil, httpapi.Errorf(http.StatusBadGateway, "browse %s: %s: %v", req.EndpointURL, adapters.Classify(err), err)
	}
	return res, nil
}
