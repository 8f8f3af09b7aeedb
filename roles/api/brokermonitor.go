package api

import (
	"context"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/api/brokermon"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// subscribeSys feeds the broker monitor from Mosquitto's $SYS topics and
// the drop watch from the one counter it reads, on one subscription: two
// overlapping ones would have the broker send each counter twice.
func subscribeSys(client *mqttx.Client, drops *dropWatch, mon *brokermon.Monitor) error {
	return client.SubscribeOptional(brokermon.SysFilter, 0, func(ctx context.Context, msg mqttx.Message) error {
		if msg.Topic == brokerDroppedTopic {
			_ = drops.handle(ctx, msg) // it never fails: a counter is acknowledged whatever it says
		}
		mon.HandleSys(msg.Topic, msg.Payload)
		return nil
	})
}

// observed counts the messages of a report or event subscription in the
// broker monitor's topic tree, and hands it their decoded payloads as
// schema samples when one is due, before h handles them. Telemetry is
// counted by the pipeline, which decodes it anyway.
func observed(mon *brokermon.Monitor, lim codec.Limits, h mqttx.Handler) mqttx.Handler {
	return func(ctx context.Context, msg mqttx.Message) error {
		if t, err := envelope.ParseTopic(msg.Topic); err == nil && mon.Observe(t.Tenant, msg.Topic, len(msg.Payload)) {
			if dec, err := codec.Decode(msg.Payload, lim); err == nil {
				mon.Sample(msg.Topic, dec.Value)
			}
		}
		return h(ctx, msg)
	}
}
