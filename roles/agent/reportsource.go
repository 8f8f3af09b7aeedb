package agent

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/report"
)

// stateSource is report.StateSource: the agent's identity, lifecycle
// state, mode, endpoint health and buffer status, as the local API shows
// them.
type stateSource struct {
	p      *parts
	buffer *publishConfig
}

// StateReport implements report.StateSource.
func (s stateSource) StateReport(ctx context.Context) (control.StateReport, error) {
	st, err := s.p.st.Open()
	if err != nil {
		return control.StateReport{}, err
	}
	state, _ := s.p.lc.snapshot()
	r := control.StateReport{Version: version(), State: state, Mode: s.p.cloud.mode(ctx, st), RunState: s.p.endpoints.runState(),
		Health: healthReport(s.p.lc.Health(ctx))}
	if id := s.p.id.Load(); id != nil {
		r.UUID, r.Name = id.UUID, id.Name
	}
	r.Apps, _ = s.appsOnly(ctx)
	eps, err := st.Endpoints().List(ctx, "")
	if err != nil {
		return r, fmt.Errorf("list endpoints: %w", err)
	}
	run := s.p.endpoints.runner
	r.Endpoints = make([]control.EndpointState, 0, len(eps))
	for _, ep := range eps {
		es := control.EndpointState{Name: ep.Name, Protocol: ep.Protocol, Enabled: ep.Enabled, Status: "stopped"}
		if h, ok := run.Health(ep.UUID); ok {
			es.Status, es.Connected, es.CommunicationQuality = h.Status, h.Connected, h.CommunicationQuality
			es.LastSeen, es.LastPoll, es.LastError = h.LastSeen, h.LastPoll, h.LastError
		}
		// Pushed protocols have no poll statistics; their counts stay 0.
		if m, err := run.DeviceMetrics(ep.Protocol, ep.Name); err == nil {
			es.Polls, es.PollFailures, es.ReadsGood, es.ReadsBad = m.Polls, m.PollFailures, m.ReadsGood, m.ReadsBad
		}
		r.Endpoints = append(r.Endpoints, es)
	}
	b, err := s.buffer.BufferStatus(ctx)
	if err != nil {
		return r, fmt.Errorf("buffer status: %w", err)
	}
	// The report carries the object GET /v1/buffer/status answers, field
	// for field.
	raw, err := json.Marshal(b)
	if err != nil {
		return r, fmt.Errorf("encode buffer status: %w", err)
	}
	if err := json.Unmarshal(raw, &r.Buffer); err != nil {
		return r, fmt.Errorf("decode buffer status: %w", err)
	}
	return r, nil
}

// appsOnly is the report's apps: absent unless the agent has apps or a
// configured runtime (docs/apps.md).
func (s stateSource) appsOnly(ctx context.Context) (*control.AppsState, error) {
	if s.p.apps == nil || !s.p.apps.mgr.HasWork() {
		return nil, nil
	}
	st, err := s.p.apps.State(ctx)
	return &st, err
}

// healthReport is the agent's health as its reports to the cloud carry
// it, at provisioning and in every state report.
func healthReport(h httpapi.Health) map[string]any {
	return map[string]any{"overall": h.Overall(), "subsystems": h.Subsystems,
		"unhealthySubsystems": h.Unhealthy, "criticalFailures": h.Critical}
}

var _ report.StateSource = stateSource{}
