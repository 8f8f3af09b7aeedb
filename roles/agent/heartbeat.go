package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/publish"
	"github.com/edgeplat/edgeplat/roles/agent/publish/payload"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
)

// defaultHeartbeatInterval applies to an endpoint with a heartbeat topic
// and no interval (docs/agent.md, section Publishing).
const defaultHeartbeatInterval = 300 * time.Second

// heartbeatTick is how often heartbeats are considered; an endpoint's
// heartbeat goes out at the first tick after its interval passed.
const heartbeatTick = time.Second

// heartbeatLoop publishes each endpoint's heartbeat to the
// platform destinations: only for endpoints with a heartbeat topic, only
// while the endpoint is connected, and only on a destination that is
// connected and not buffering. A heartbeat is never queued: one that
// cannot go out is dropped, so an outage silences heartbeats instead of
// replaying stale ones.
func heartbeatLoop(ctx context.Context, out *output, run *runner.Runner, pub *publish.Router, log *slog.Logger) {
	last := map[string]time.Time{} // endpoint UUID -> last heartbeat
	t := time.NewTicker(heartbeatTick)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			seen := map[string]bool{}
			for _, eo := range out.running() {
				seen[eo.ep.UUID] = true
				if heartbeat(ctx, run, pub, log, eo, last[eo.ep.UUID], now) {
					last[eo.ep.UUID] = now
				}
			}
			for id := range last {
				if !seen[id] {
					delete(last, id)
				}
			}
		}
	}
}

// heartbeat sends eo's heartbeat when it is due, and reports whether it
// went to at least one destination.
func heartbeat(ctx context.Context, run *runner.Runner, pub *publish.Router, log *slog.Logger, eo *endpointOut, prev, now time.Time) bool {
	ep := eo.ep
	if ep.HeartbeatTopic == "" {
		return false
	}
	every := defaultHeartbeatInterval
	if ep.HeartbeatIntervalS > 0 {
		every = time.Duration(ep.HeartbeatIntervalS) * time.Second
	}
	if !prev.IsZero() && now.Sub(prev) < every {
		return false
	}
	conn, ok := run.Connection(ep.UUID)
	if !ok || conn.State != runner.StateConnected {
		return false
	}
	var lastOut time.Time
	if ms := eo.lastOut.Load(); ms > 0 {
		lastOut = time.UnixMilli(ms)
	}
	body, err := payload.EncodeHeartbeat(payload.Heartbeat{
		Endpoint: ep.Name, Timestamp: now, State: conn.State,
		Stats: payload.HeartbeatStats{
			MessagesReceived: eo.framesIn.Load(), MessagesPublished: eo.batchesOut.Load(),
			BytesReceived: eo.bytesIn.Load(), BytesPublished: eo.bytesOut.Load(),
			ReconnectAttempts: conn.ReconnectAttempts, LastPublishTime: lastOut,
			LastHeartbeatTime: prev, LastConnectedTime: conn.LastConnected,
		},
	})
	if err != nil {
		log.Warn("heartbeat not built", "endpoint", ep.Name, "err", err)
		return false
	}
	return pub.SendEphemeral(ctx, ep.HeartbeatTopic, body)
}
