package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// eventsFilter is the agents' events topic (docs/control-channel.md,
// section Events).
const eventsFilter = "i/+/a/+/events"

// agentEvents stores what agents publish on their events topic through
// the anomaly capability. An event the database cannot take for a reason
// that passes (it is down) is not acknowledged, so the broker delivers it
// again; an unusable one is acknowledged and counted, since a redelivery
// cannot fix it.
type agentEvents struct {
	x   *anomaly.Anomaly
	log *slog.Logger
	// received is the pipeline's edgeplat_api_mqtt_messages_received_total.
	received *prometheus.CounterVec
	seen     *lastSeen
}

func (ae *agentEvents) handle(ctx context.Context, msg mqttx.Message) error {
	t, err := envelope.ParseTopic(msg.Topic)
	if err != nil || t.Kind != envelope.Events {
		ae.log.Debug("event on a malformed topic dropped", "topic", msg.Topic, "err", err)
		return nil
	}
	if ae.received != nil {
		ae.received.WithLabelValues("events").Inc()
	}
	if ae.seen != nil {
		ae.seen.touch(t.Tenant, t.AgentUUID)
	}
	_, err = ae.x.StoreEvent(ctx, t.Tenant, t.AgentUUID, msg.Payload)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, anomaly.ErrBadEvent), db.IsDataError(err):
		ae.log.Debug("unusable agent event dropped", "topic", msg.Topic, "err", err)
		return nil
	}
	return fmt.Errorf("agent event: %w", err)
}

// anomalyDeps is what the anomaly capability gets from the role: the
// caller and audit log, the licence for correlation rules, the admin
// limit, the agent guard of /agents/:uuid/events, the mailer and the
// stream store for notifications.
func (a *access) anomalyDeps(agentGuard gin.HandlerFunc) anomaly.Deps {
	d := anomaly.Deps{
		DB:         a.b.DB,
		Caller:     caller,
		WriteError: WriteError,
		Audit:      a.audit,
		Feature:    a.licence.CheckFeature,
		AdminGate:  httpx.RateLimit(a.admin, adminKey, WriteError),
		AgentGuard: agentGuard,
		Streams:    a.b.Streams,
		Registerer: a.r.Metrics,
		Log:        a.r.Component("api-anomaly"),
	}
	if a.mailer != nil {
		d.Mailer = a.mailer
	}
	return d
}
