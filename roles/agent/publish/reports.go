package publish

import (
	"context"

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
