package mqttx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"
	"unicode"

	"github.com/edgeplat/edgeplat/config"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options; the configurable ones are listed with their keys
// in docs/configuration.md.
const (
	DefaultQoS                   byte = 1
	DefaultMaxReconnectAttempts       = 20
	DefaultFatalRecoveryCooldown      = 60 * time.Second
	DefaultBackoffBase                = time.Second
	DefaultBackoffMax                 = 8 * time.Second
	DefaultQueueCapacity              = 1000
	DefaultQueueMaxBytes              = 64 << 20
	DefaultMaxInflight                = 32
	DefaultKeepAlive                  = 30 * time.Second
	DefaultConnectTimeout             = 10 * time.Second
	DefaultWriteTimeout               = 10 * time.Second
	DefaultAckTimeout                 = 30 * time.Second
	DefaultHandlerWorkers             = 1
	DefaultHandlerBuffer              = 64
	DefaultHandlerBatch               = 64
	DefaultReconnectAfterUnacked      = 10
	DefaultRedeliverAfter             = 5 * time.Second
	DefaultLeaveQuiet                 = time.Second
	DefaultName                       = "mqtt-client"
)

// Will is the last-will message the broker publishes when the connection
// drops without a DISCONNECT.
type Will struct {
	Topic    string
	Payload  []byte
	QoS      byte
	Retained bool
}

// Options configures a Client. Start from DefaultOptions or
// OptionsFromConfig: New fills zero timeouts and sizes with their defaults,
// but takes QoS, MaxReconnectAttempts, FatalRecoveryCooldown,
// ReconnectAfterUnacked and RedeliverAfter literally, because zero means
// something for them.
type Options struct {
	// Name is the service name (kebab-case). It labels logs, the metrics'
	// "client" label and lifecycle; processes with two clients (all-in-one:
	// API and agent) give them different names. DefaultName when empty.
	Name string

	// BrokerURL is tcp:// or mqtt:// (plain), ssl://, tls:// or mqtts://
	// (TLS), ws:// or wss:// (WebSocket). A missing port takes the scheme's
	// usual one (1883, 8883, 80, 443).
	BrokerURL string
	Username  string
	Password  config.Secret
	// ClientID must be stable across restarts for the persistent session to
	// be resumed; required unless CleanSession or ResolveClientID.
	ClientID string
	// ResolveClientID, when ClientID is empty, names the client at Start:
	// for ids derived from what only I/O can read, such as an
	// installation id kept in a database.
	ResolveClientID func(ctx context.Context) (string, error)
	// CleanSession false (the default) keeps a persistent session: the
	// broker remembers subscriptions and unacknowledged messages while the
	// client is away. Throwaway clients (tests, probes) set it.
	CleanSession bool

	// CAFile, CertFile and KeyFile configure TLS for ssl/tls/mqtts/wss:
	// CAFile replaces the system roots; CertFile and KeyFile (both or
	// neither) are the client certificate for mutual TLS. They are read at
	// Start. TLS is at least 1.2.
	CAFile, CertFile, KeyFile string

	// QoS is the QoS callers should use (QoS()); mqtt.qos, 1 by default.
	QoS byte
	// SharedGroup, when set, makes every subscription a shared one,
	// $share/<group>/<filter>, so replicas split the messages.
	SharedGroup string
	// LeaveShared, with SharedGroup set, is asked by Stop whether this
	// member leaves the group for good: true unsubscribes the shared
	// filters, handles what the broker had already sent or queued for the
	// session until the flow is quiet, disconnects and removes the
	// persistent session. nil or false keeps the session and its share,
	// queued for the same client id's return. See docs/mqtt-client.md,
	// section Leaving a shared group.
	LeaveShared func(ctx context.Context) bool
	// LeaveQuiet is how long no message may arrive, with every handler
	// done, before a leaving member takes its session's queue for drained;
	// 1 s.
	LeaveQuiet time.Duration
	// Will is published by the broker if the connection drops uncleanly.
	Will *Will

	KeepAlive      time.Duration // MQTT keepalive; 30 s
	ConnectTimeout time.Duration // dial plus CONNECT/CONNACK; 10 s
	WriteTimeout   time.Duration // one packet write; 10 s
	// AckTimeout bounds the wait for a PUBACK or SUBACK; a broker that
	// does not answer within it is treated as a failed connection. 30 s.
	AckTimeout time.Duration

	// MaxReconnectAttempts consecutive failed reconnects turn the client
	// fatal; 0 is unlimited.
	MaxReconnectAttempts int
	// FatalRecoveryCooldown is the wait in the fatal state before
	// reconnecting with counters reset; 0 reconnects at once.
	FatalRecoveryCooldown time.Duration
	// BackoffBase and BackoffMax shape the reconnect delays: base, 2·base,
	// 4·base, ... capped at max; 1 s and 8 s. Tests shorten them.
	BackoffBase, BackoffMax time.Duration

	// QueueCapacity bounds the pending publish queue in messages (1000) and
	// QueueMaxBytes in payload bytes (64 MiB); past either the oldest are
	// dropped.
	QueueCapacity int
	QueueMaxBytes int
	// MaxInflight is how many publishes may await their PUBACK at once; 32.
	// They are written in queue order on one connection, so order holds.
	MaxInflight int

	// HandlerWorkers is how many message handlers may run at once. 1 (the
	// default) handles messages one at a time in arrival order; with more,
	// messages are spread over workers by topic, so messages of one topic
	// keep their order. HandlerBuffer bounds each worker's backlog (64);
	// when it is full the client stops reading from the broker.
	HandlerWorkers int
	HandlerBuffer  int
	// HandlerBatch is the most messages a worker hands to a BatchHandler
	// at once (64). A worker takes only what is already waiting in its
	// buffer, so batching adds no delay: batches grow only when handlers
	// fall behind, which is when one round trip for many messages helps.
	HandlerBatch int
	// ReconnectAfterUnacked: when this many QoS>0 messages of one
	// connection were left unacknowledged (their handler failed), the client
	// reconnects so that the broker redelivers them. 0 never does. 10 by
	// default. See the package documentation.
	ReconnectAfterUnacked int
	// RedeliverAfter: when a QoS>0 message of one connection has been left
	// unacknowledged this long, the client reconnects so that the broker
	// redelivers it, however few are held. Without it a lone failed
	// message would wait for ReconnectAfterUnacked failures or an ordinary
	// reconnect, which on a healthy connection may never come. 0 never
	// does. 5 s by default.
	RedeliverAfter time.Duration

	Logger     *slog.Logger
	Registerer prometheus.Registerer
	// OnStateChange, when set, is called after every state change, in
	// order, from the goroutine that made it. It must not block and must
	// not call Stop.
	OnStateChange func(from, to State)
}

// DefaultOptions returns Options with every default of docs/mqtt-client.md set; the
// caller fills in BrokerURL and ClientID.
func DefaultOptions() Options {
	return Options{
		Name:                  DefaultName,
		QoS:                   DefaultQoS,
		KeepAlive:             DefaultKeepAlive,
		ConnectTimeout:        DefaultConnectTimeout,
		WriteTimeout:          DefaultWriteTimeout,
		AckTimeout:            DefaultAckTimeout,
		MaxReconnectAttempts:  DefaultMaxReconnectAttempts,
		FatalRecoveryCooldown: DefaultFatalRecoveryCooldown,
		BackoffBase:           DefaultBackoffBase,
		BackoffMax:            DefaultBackoffMax,
		QueueCapacity:         DefaultQueueCapacity,
		QueueMaxBytes:         DefaultQueueMaxBytes,
		MaxInflight:           DefaultMaxInflight,
		HandlerWorkers:        DefaultHandlerWorkers,
		HandlerBuffer:         DefaultHandlerBuffer,
		HandlerBatch:          DefaultHandlerBatch,
		ReconnectAfterUnacked: DefaultReconnectAfterUnacked,
		RedeliverAfter:        DefaultRedeliverAfter,
	}
}

// OptionsFromConfig maps the mqtt config section onto DefaultOptions.
// cfg.ClientID wins when set; otherwise clientID is used (see
// DefaultClientID). Logger, Registerer, Name and hooks are left for the
// caller.
func OptionsFromConfig(cfg config.MQTT, clientID string) Options {
	o := DefaultOptions()
	o.BrokerURL = cfg.BrokerURL
	o.Username = cfg.Username
	o.Password = cfg.Password
	o.ClientID = cfg.ClientID
	if o.ClientID == "" {
		o.ClientID = clientID
	}
	if cfg.QoS >= 0 && cfg.QoS <= 2 {
		o.QoS = byte(cfg.QoS)
	} else {
		o.QoS = 255 // rejected by New, naming the value
	}
	o.SharedGroup = cfg.SharedSubscriptionGroup
	o.MaxReconnectAttempts = cfg.MaxReconnectAttempts
	o.FatalRecoveryCooldown = config.Millis(cfg.FatalRecoveryCooldownMS)
	o.CAFile, o.CertFile, o.KeyFile = cfg.CAFile, cfg.CertFile, cfg.KeyFile
	return o
}

// DefaultClientID derives a client id that stays the same across restarts
// on one host, "<prefix>-<hostname>", for when mqtt.client_id is empty.
// Replicas on one host must set mqtt.client_id themselves.
func DefaultClientID(prefix string) string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	host = strings.Map(func(r rune) rune {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '.') {
			return r
		}
		return '-'
	}, host)
	return prefix + "-" + host
}

// normalise fills defaults and checks o, returning every problem at once.
// It does no I/O: certificate files are read at Start.
func (o *Options) normalise() (*url.URL, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.KeepAlive == 0 {
		o.KeepAlive = DefaultKeepAlive
	}
	if o.ConnectTimeout == 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.AckTimeout == 0 {
		o.AckTimeout = DefaultAckTimeout
	}
	if o.BackoffBase == 0 {
		o.BackoffBase = DefaultBackoffBase
	}
	if o.BackoffMax == 0 {
		o.BackoffMax = DefaultBackoffMax
	}
	if o.QueueCapacity == 0 {
		o.QueueCapacity = DefaultQueueCapacity
	}
	if o.QueueMaxBytes == 0 {
		o.QueueMaxBytes = DefaultQueueMaxBytes
	}
	if o.MaxInflight == 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.HandlerWorkers == 0 {
		o.HandlerWorkers = DefaultHandlerWorkers
	}
	if o.HandlerBuffer == 0 {
		o.HandlerBuffer = DefaultHandlerBuffer
	}
	if o.HandlerBatch == 0 {
		o.HandlerBatch = DefaultHandlerBatch
	}
	if o.LeaveQuiet == 0 {
		o.LeaveQuiet = DefaultLeaveQuiet
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}

	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	u, err := parseBrokerURL(o.BrokerURL)
	if err != nil {
		errs = append(errs, err)
	}
	tlsScheme := u != nil && (u.Scheme == "ssl" || u.Scheme == "tls" || u.Scheme == "mqtts" || u.Scheme == "wss")
	if !tlsScheme && u != nil && (o.CAFile != "" || o.CertFile != "" || o.KeyFile != "") {
		bad("mqtt: ca, cert and key files need a TLS broker URL (ssl://, tls://, mqtts://, wss://), got %s://", u.Scheme)
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		bad("mqtt: client certificate and key files go together (cert %q, key %q)", o.CertFile, o.KeyFile)
	}
	if o.ClientID == "" && o.ResolveClientID == nil && !o.CleanSession {
		bad("mqtt: a client id is required for a persistent session")
	}
	if len(o.ClientID) > 65535 {
		bad("mqtt: client id is longer than 65535 bytes")
	}
	if o.Password.IsSet() && o.Username == "" {
		bad("mqtt: a password needs a username (MQTT 3.1.1)")
	}
	if o.QoS > 2 {
		bad("mqtt: qos must be 0..2, got %d", o.QoS)
	}
	if o.SharedGroup != "" && strings.ContainsAny(o.SharedGroup, "/+#") {
		bad("mqtt: shared subscription group must not contain '/', '+' or '#', got %q", o.SharedGroup)
	}
	if o.Will != nil {
		if err := validTopic(o.Will.Topic); err != nil {
			bad("mqtt: will: %w", err)
		}
		if o.Will.QoS > 2 {
			bad("mqtt: will qos must be 0..2, got %d", o.Will.QoS)
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"keepalive", o.KeepAlive}, {"connect timeout", o.ConnectTimeout}, {"write timeout", o.WriteTimeout},
		{"ack timeout", o.AckTimeout}, {"backoff base", o.BackoffBase}, {"backoff max", o.BackoffMax},
		{"leave quiet", o.LeaveQuiet}} {
		if d.v < 0 {
			bad("mqtt: %s must be positive, got %s", d.name, d.v)
		}
	}
	if o.KeepAlive > 0 && o.KeepAlive < time.Second {
		bad("mqtt: keepalive must be at least 1s, got %s", o.KeepAlive)
	}
	if o.BackoffMax < o.BackoffBase {
		bad("mqtt: backoff max %s is below backoff base %s", o.BackoffMax, o.BackoffBase)
	}
	if o.MaxReconnectAttempts < 0 {
		bad("mqtt: max reconnect attempts must be >= 0, got %d", o.MaxReconnectAttempts)
	}
	if o.FatalRecoveryCooldown < 0 {
		bad("mqtt: fatal recovery cooldown must be >= 0, got %s", o.FatalRecoveryCooldown)
	}
	for _, n := range []struct {
		name string
		v    int
	}{{"queue capacity", o.QueueCapacity}, {"queue max bytes", o.QueueMaxBytes}, {"max inflight", o.MaxInflight},
		{"handler workers", o.HandlerWorkers}, {"handler buffer", o.HandlerBuffer}, {"handler batch", o.HandlerBatch}} {
		if n.v < 1 {
			bad("mqtt: %s must be >= 1, got %d", n.name, n.v)
		}
	}
	if o.MaxInflight > 65535 {
		bad("mqtt: max inflight must be <= 65535 (packet ids), got %d", o.MaxInflight)
	}
	if o.RedeliverAfter < 0 {
		bad("mqtt: redeliver after must be >= 0, got %s", o.RedeliverAfter)
	}
	if o.ReconnectAfterUnacked < 0 {
		bad("mqtt: reconnect after unacked must be >= 0, got %d", o.ReconnectAfterUnacked)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return u, nil
}

var defaultPorts = map[string]string{
	"tcp": "1883", "mqtt": "1883",
	"ssl": "8883", "tls": "8883", "mqtts": "8883",
	"ws": "80", "wss": "443",
}

// parseBrokerURL checks the scheme and host and adds the scheme's port when
// the URL has none (paho dials host:port as given).
func parseBrokerURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("mqtt: broker url is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("mqtt: broker url: %w", err)
	}
	u.Scheme = strings.ToLower(u.Scheme)
	port, ok := defaultPorts[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("mqtt: broker url %s: scheme must be tcp, mqtt, ssl, tls, mqtts, ws or wss, got %q", u.Redacted(), u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("mqtt: broker url %s has no host", u.Redacted())
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), port)
	}
	return u, nil
}

// loadTLS builds the TLS configuration from the files; it is nil for plain
// schemes.
func (o *Options) loadTLS(u *url.URL) (*tls.Config, error) {
	switch u.Scheme {
	case "ssl", "tls", "mqtts", "wss":
	default:
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("read mqtt ca file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("mqtt ca file %s holds no PEM certificate", o.CAFile)
		}
		cfg.RootCAs = pool
	}
	if o.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("load mqtt client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// BrokerAddr returns the host:port a broker URL dials: its own port, or
// the scheme's usual one (1883, 8883, 80, 443) when it names none.
func BrokerAddr(raw string) (string, error) {
	u, err := parseBrokerURL(raw)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}
