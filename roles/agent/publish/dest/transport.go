package dest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// Destination types, the store's publish_destinations.type values.
const (
	TypePlatform = "platform"
	TypeMQTT     = "mqtt"
	TypeTSDB     = "tsdb"
	TypeHubA     = "iot-hub-a" // AWS IoT Core
	TypeHubB     = "iot-hub-b" // Azure IoT Hub
	TypeHubC     = "iot-hub-c" // Alibaba Cloud IoT Platform
)

// Types lists every destination type New accepts.
func Types() []string {
	return []string{TypePlatform, TypeMQTT, TypeTSDB, TypeHubA, TypeHubB, TypeHubC}
}

// SecretKeys are the config_json keys, of any type, whose values are
// credentials; the API masks them when it shows a destination.
var SecretKeys = []string{"password", "token", "sharedAccessKey", "deviceSecret"}

// PlatformCredentials are the device's cloud MQTT credentials from
// provisioning, which the "platform" destination uses.
type PlatformCredentials struct {
	BrokerURL string
	Username  string
	Password  string
	// ClientID must not be the one of another live connection with these
	// credentials: brokers drop the older connection of a client id.
	ClientID string
	// CAFile, when set, replaces the system roots for a TLS broker URL.
	CAFile string
	// TopicPrefix is "i/{tenantId}/a/{agentId}" (docs/broker-auth.md,
	// section The rules).
	TopicPrefix string
}

// Provisioned reports whether the credentials can be used at all.
func (p PlatformCredentials) Provisioned() bool { return p.BrokerURL != "" && p.TopicPrefix != "" }

// Env is what a destination needs from the agent.
type Env struct {
	Logger *slog.Logger
	// Platform holds the device's cloud MQTT credentials; used by type
	// "platform" only. Zero when the device is not provisioned: the
	// platform transport then stays not connected and Send returns
	// ErrNotConnected.
	Platform PlatformCredentials
	// Now is the clock for SAS and HMAC token timestamps; nil is time.Now.
	Now func() time.Time
	// OnCommand, when set, receives every message of the agent's command
	// subtree (control.CommandFilter of Platform.TopicPrefix), which the
	// platform destination subscribes to on every connection. It must
	// return quickly: it runs on the connection's message goroutine.
	OnCommand func(ctx context.Context, topic string, payload []byte)
}

func (e Env) now() time.Time {
	if e.Now != nil {
		return e.Now()
	}
	return time.Now()
}

func (e Env) logger() *slog.Logger {
	if e.Logger != nil {
		return e.Logger
	}
	return slog.New(slog.DiscardHandler)
}

// Transport is the connection of one publish destination. It only sends:
// whatever waits for a connection is the publishing worker's to keep.
type Transport interface {
	// Start begins connecting in the background and returns at once; it
	// fails only on settings that cannot work; TLS files that cannot be
	// read yet are retried in the background, not connected meanwhile.
	Start(ctx context.Context) error
	// Stop disconnects and ends every goroutine of the transport, within
	// ctx.
	Stop(ctx context.Context) error
	// Connected reports whether Send can deliver now.
	Connected() bool
	// Changes is signalled (capacity 1, never blocking) on every change
	// of Connected; receivers read Connected again.
	Changes() <-chan struct{}
	// Send delivers msgs in order. errs[i] is nil only when the peer
	// acknowledged msgs[i] (MQTT: the PUBACK of that exact packet; HTTP:
	// a 2xx). Transient failures wrap ErrNotConnected; a refusal of the
	// message itself is a *RejectedError.
	Send(ctx context.Context, msgs []Message) []error
	// Topic is the topic a batch of the endpoint whose MQTT topic is
	// endpointTopic goes to, given the subscription's route_json.topic
	// (routeTopic, may be ""). See the package README for each type.
	Topic(routeTopic, endpointTopic string) string
	// Status describes the connection for the API and the dashboard.
	Status() Status
}

// Status is a snapshot of a transport's connection.
type Status struct {
	Type      string `json:"type"`
	Connected bool   `json:"connected"`
	// State is the MQTT client's state (stopped, connecting, connected,
	// reconnecting, fatal), or for tsdb stopped, connecting, connected or
	// unreachable; "not-provisioned" for a platform destination without
	// credentials.
	State     string `json:"state"`
	LastError string `json:"lastError,omitempty"`
	// Target is the broker or database address, without credentials.
	Target            string    `json:"target,omitempty"`
	ConnectedSince    time.Time `json:"connectedSince,omitzero"`
	ReconnectAttempts uint64    `json:"reconnectAttempts"`
	// CredentialsExpire is when the credentials in use expire (the SAS
	// token of iot-hub-b; they are renewed before).
	CredentialsExpire time.Time `json:"credentialsExpire,omitzero"`
}

// New validates d's config and builds its transport, without I/O.
func New(d store.Destination, env Env) (Transport, error) {
	cfg, err := parse(d.Type, d.Config)
	if err != nil {
		return nil, fmt.Errorf("destination %d (%s): %w", d.ID, d.Type, err)
	}
	var t Transport
	switch c := cfg.(type) {
	case platformConfig:
		t, err = newPlatform(d.ID, env)
	case tsdbConfig:
		t, err = newTSDB(d.ID, c, env)
	case mqttBuilder:
		t, err = newMQTT(d.ID, d.Type, c, env)
	default:
		panic(fmt.Sprintf("BUG: dest: no transport for config %T", cfg))
	}
	if err != nil {
		return nil, fmt.Errorf("destination %d (%s): %w", d.ID, d.Type, err)
	}
	return t, nil
}

// Validate checks a destination's config_json for its type. Problems are
// *adapters.FieldError values naming "config_json.<field>", joined.
func Validate(typ string, config json.RawMessage) error {
	_, err := parse(typ, config)
	return err
}

// expand replaces the {name} placeholders of topic that vars holds; other
// text, unknown placeholders included, stays as it is.
func expand(topic string, vars map[string]string) string {
	if !strings.Contains(topic, "{") {
		return topic
	}
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(topic)
}

// clientName is the mqttx service name of destination id; unique per
// destination so logs tell them apart.
func clientName(id int64) string { return "publish-dest-" + strconv.FormatInt(id, 10) }

// signal makes a non-blocking send on a capacity-1 channel.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
