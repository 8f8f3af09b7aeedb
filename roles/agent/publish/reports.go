package publish

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/publish/outbound"
)

// reportTopics is the platform transport's side of the agent's reports:
// they go next to its telemetry, on {prefix}/{name}, not under
// endpoints/ where SendEphemeral's heartbeats go.
type reportTopics interface {
	ReportTopic(name string) string
}

// PlatformConnected reports whether a platform destination could take an
// ephemeral message now: connected and not buffering. The report service
// watches it to send a report at once when the cloud comes back.
func (p *Router) PlatformConnected() bool {
	for _, r := range p.platformRuns() {
		if r.t.Connected() && r.w.Mode() != outbound.ModeBufferOnly {
			return true
		}
	}
	return false
}

// SendReport offers body as the agent report name (control.ReportState,
// control.ReportMetrics) to every platform destination that is connected
// and not buffering, never queueing it, as SendEphemeral does. It reports
// whether one destination took it.
func (p *Router) SendReport(ctx context.Context, name string, body []byte) bool {
	sent := false
	for _, r := range p.platformRuns() {
		rt, ok := r.t.(reportTopics)
		if !ok || !r.t.Connected() || r.w.Mode() == outbound.ModeBufferOnly {
			continue
		}
		topic := rt.ReportTopic(name)
		if topic == "" {
			continue
		}
		if err := r.w.Offer(ctx, outbound.Item{Topic: topic, Payload: body, Ephemeral: true}); err != nil {
			p.log.Debug("report not sent", "report", name, "destination", r.row.Name, "err", err)
			continue
		}
		sent = true
	}
	return sent
}

// SendEvent offers e on control.ReportEvents to every provisioned platform
// destination as a critical record: sent at once when connected, queued
// otherwise, replayed after an outage, and evicted from a full queue only
// after every ordinary reading (docs/control-channel.md, section Events).
// It reports how many destinations took it; zero with a nil error means
// there is no provisioned platform destination, so no cloud to tell.
func (p *Router) SendEvent(ctx context.Context, e control.Event) (int, error) {
	if err := e.Validate(); err != nil {
		return 0, err
	}
	body, err := json.Marshal(e)
	if err != nil {
		return 0, fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	// The msgId is no v2 identifier, so the record is delivered at QoS 1
	// and never waits for a telemetry receipt the cloud does not send.
	msgID := "ev_" + e.Kind + "_" + e.ID
	took := 0
	var errs []error
	for _, r := range p.platformRuns() {
		rt, ok := r.t.(reportTopics)
		if !ok {
			continue
		}
		topic := rt.ReportTopic(control.ReportEvents)
		if topic == "" {
			continue
		}
		if err := r.w.Offer(ctx, outbound.Item{MsgID: msgID, Topic: topic, Payload: body, Critical: true}); err != nil {
			errs = append(errs, fmt.Errorf("event %s to %s: %w", e.ID, r.row.Name, err))
			continue
		}
		took++
	}
	return took, errors.Join(errs...)
}
