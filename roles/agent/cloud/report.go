package cloud

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// ReportState publishes a state report on the agent's state topic
// ({topicPrefix}/state) with the device's MQTT credentials, at QoS 1, and
// returns once the broker acknowledged it. It proves the broker
// credentials as much as it reports.
func ReportState(ctx context.Context, cr Credentials, state any) error {
	payload, err := json.Marshal(state)
	if err != nil {
		return fmt.Errorf("report state: %w", err)
	}
	deadline := requestTimeout
	if d, ok := ctx.Deadline(); ok {
		deadline = min(deadline, time.Until(d))
	}
	opts := paho.NewClientOptions().AddBroker(cr.MQTT.BrokerURL).SetClientID(cr.MQTT.ClientID).
		SetUsername(cr.MQTT.Username).SetPassword(cr.MQTT.Password).SetCleanSession(true).
		SetAutoReconnect(false).SetConnectRetry(false).SetConnectTimeout(deadline).SetProtocolVersion(4)
	cl := paho.NewClient(opts)
	if err := wait(ctx, cl.Connect()); err != nil {
		return fmt.Errorf("report state: connect to %s: %w", cr.MQTT.BrokerURL, err)
	}
	defer cl.Disconnect(250)
	topic := strings.TrimSuffix(cr.MQTT.TopicPrefix, "/") + "/state"
	if err := wait(ctx, cl.Publish(topic, 1, false, payload)); err != nil {
		return fmt.Errorf("report state: publish on %s: %w", topic, err)
	}
	return nil
}

func wait(ctx context.Context, t paho.Token) error {
	select {
	case <-t.Done():
		return t.Error()
	case <-ctx.Done():
		return ctx.Err()
	}
}
