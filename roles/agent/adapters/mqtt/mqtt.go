// Package mqtt is the agent's MQTT input adapter: it subscribes to topics
// on a broker and turns the JSON frames devices publish into readings. See
// README.md for the connection settings and how frames map to readings.
//
// The endpoint runner owns reconnection, so the paho client never
// reconnects or retries by itself: Connect dials once and subscribes,
// Listen reports a lost connection as an error, and the runner closes the
// adapter and calls Connect again after its backoff.
package mqtt

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
	"sync"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/eclipse/paho.mqtt.golang/packets"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Protocol is the endpoint "protocol" value this package serves.
const Protocol = "mqtt"

const (
	keepAlive = 30 * time.Second
	// inboxDepth bounds the messages paho has handed over that Listen has
	// not taken yet; past it paho's router waits, which holds back acks
	// and so the broker.
	inboxDepth = 64
	// disconnectQuiesce is how long Close lets a DISCONNECT go out.
	disconnectQuiesce = 250 // ms
)

// Driver builds MQTT adapters.
type Driver struct{}

// Protocol returns "mqtt".
func (Driver) Protocol() string { return Protocol }

// Validate checks the endpoint's connection object and data points
// without any I/O.
func (Driver) Validate(ep adapters.Endpoint) error {
	_, err := parseConfig(ep)
	return err
}

// New builds the adapter of a validated endpoint, without I/O.
func (Driver) New(ep adapters.Endpoint, env adapters.Env) (adapters.Adapter, error) {
	return NewAdapter(ep, env)
}

// NewAdapter is Driver.New with the concrete type, for Stats.
func NewAdapter(ep adapters.Endpoint, env adapters.Env) (*Adapter, error) {
	cfg, err := parseConfig(ep)
	if err != nil {
		return nil, fmt.Errorf("mqtt endpoint %q: %w", ep.Name, err)
	}
	log := env.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Adapter{
		ep:    ep,
		cfg:   cfg,
		log:   log.With("endpoint", ep.Name, "protocol", Protocol),
		dec:   &frameDecoder{device: ep.Name, deviceID: ep.UUID, dataPoints: ep.DataPoints},
		frame: env.Frame,
	}, nil
}

// Adapter is one MQTT endpoint's connection to its broker.
type Adapter struct {
	ep  adapters.Endpoint
	cfg *config
	log *slog.Logger
	dec *frameDecoder
	// frame, when set, sees every frame before it is decoded.
	frame func(frame []byte, received time.Time)

	mu   sync.Mutex
	conn *connection // nil when not connected

	// topics holds the frame buffers of the topics with a partial frame;
	// only the goroutine running Connect and Listen uses it.
	topics *topicBuffers

	stats counters
}

// connection is one paho client from Connect to Close.
type connection struct {
	client paho.Client
	inbox  chan inbound
	lost   chan error    // the first connection-lost error
	done   chan struct{} // closed by Close: paho's handler stops waiting
	once   sync.Once
}

type inbound struct {
	topic    string
	payload  []byte
	received time.Time
}

// Connect dials the broker once, bounded by ctx and timeoutMs, and
// subscribes to the topics. A partial frame from an earlier connection is
// dropped: its rest will not come.
func (a *Adapter) Connect(ctx context.Context) error {
	_ = a.Close()
	tlsCfg, err := a.tlsConfig()
	if err != nil {
		return adapters.WithCode(adapters.CodeReadError, fmt.Errorf("mqtt: %w", err))
	}
	c := &connection{inbox: make(chan inbound, inboxDepth), lost: make(chan error, 1), done: make(chan struct{})}
	a.topics = newTopicBuffers(a.cfg.delimiter(), a.cfg.BufferCapacity)

	timeout := a.cfg.timeout()
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	// abort closes the connection being set up when ctx ends, which also
	// cuts a CONNECT or SUBSCRIBE handshake short.
	var abortMu sync.Mutex
	var stopAbort func() bool
	opts := paho.NewClientOptions().
		AddBroker(a.cfg.broker.String()).
		SetClientID(a.cfg.ClientID).
		SetUsername(a.cfg.Username).
		SetPassword(a.cfg.Password).
		SetCleanSession(*a.cfg.CleanSession).
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetResumeSubs(false).
		SetOrderMatters(true). // frames split over messages must meet in order
		SetProtocolVersion(4). // no silent fallback to 3.1 on a refusal
		SetKeepAlive(keepAlive).
		SetConnectTimeout(timeout).
		SetWriteTimeout(timeout).
		SetTLSConfig(tlsCfg).
		SetDefaultPublishHandler(c.onMessage).
		SetConnectionLostHandler(c.onLost).
		SetCustomOpenConnectionFn(func(u *url.URL, o paho.ClientOptions) (net.Conn, error) {
			nc, err := dial(ctx, u, o.TLSConfig, timeout)
			if err != nil {
				return nil, err
			}
			abortMu.Lock()
			stopAbort = context.AfterFunc(ctx, func() { _ = nc.Close() })
			abortMu.Unlock()
			return nc, nil
		})
	c.client = paho.NewClient(opts)

	// releaseAbort unhooks the abort from ctx and reports whether it had
	// not fired yet: a connection it closed is of no use.
	releaseAbort := func() bool {
		abortMu.Lock()
		defer abortMu.Unlock()
		return stopAbort == nil || stopAbort()
	}
	fail := func(err error) error {
		releaseAbort()
		c.shut()
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return fmt.Errorf("mqtt: connect %s: %w", a.cfg.redactedBroker(), err)
	}
	if err := wait(ctx, c.client.Connect(), timeout); err != nil {
		return fail(classifyConnect(err))
	}
	tok := c.client.SubscribeMultiple(a.filters(), nil)
	if err := wait(ctx, tok, timeout); err != nil {
		return fail(fmt.Errorf("subscribe: %w", err))
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for filter, code := range st.Result() {
			if code > 2 { // 0x80: the broker refused this filter
				return fail(adapters.WithCode(adapters.CodeConnectionRefused, fmt.Errorf("subscription to %q refused", filter)))
			}
		}
	}
	if !releaseAbort() {
		return fail(ctx.Err())
	}
	a.mu.Lock()
	a.conn = c
	a.mu.Unlock()
	a.stats.connects.Add(1)
	a.log.Debug("mqtt connected", "broker", a.cfg.redactedBroker(), "clientId", a.cfg.ClientID, "topics", a.cfg.Topics)
	return nil
}

// wait waits for a paho token, at most timeout, or for the end of ctx.
// On ctx's end the abort hook has closed the network connection, so the
// token completes soon after; it is waited for, within timeout, so that
// paho is done with the connection before it is shut.
func wait(ctx context.Context, tok paho.Token, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-t.C:
		return fmt.Errorf("no answer within %v: %w", timeout, context.DeadlineExceeded)
	case <-ctx.Done():
		tok.WaitTimeout(timeout)
		return ctx.Err()
	}
}

// connackRefusals are the CONNACK return codes paho reports as errors.
var connackRefusals = []error{
	packets.ErrorRefusedBadProtocolVersion, packets.ErrorRefusedIDRejected,
	packets.ErrorRefusedServerUnavailable, packets.ErrorRefusedBadUsernameOrPassword,
	packets.ErrorRefusedNotAuthorised,
}

// classifyConnect gives a broker's CONNACK refusal its quality code; a
// network error keeps its cause for adapters.Classify.
func classifyConnect(err error) error {
	for _, refusal := range connackRefusals {
		if errors.Is(err, refusal) {
			return adapters.WithCode(adapters.CodeConnectionRefused, fmt.Errorf("broker refused the connection: %w", err))
		}
	}
	return err
}

func (a *Adapter) filters() map[string]byte {
	f := make(map[string]byte, len(a.cfg.Topics))
	for _, t := range a.cfg.Topics {
		f[t] = a.cfg.qos()
	}
	return f
}

// onMessage runs on paho's router goroutine, one message at a time. It
// hands the message to Listen, waiting while Listen is behind so the
// broker's flow control holds the backlog, not the agent's memory.
func (c *connection) onMessage(_ paho.Client, m paho.Message) {
	in := inbound{topic: m.Topic(), payload: m.Payload(), received: time.Now()}
	select {
	case c.inbox <- in:
	case <-c.done:
	}
}

func (c *connection) onLost(_ paho.Client, err error) {
	if err == nil {
		err = errors.New("connection lost")
	}
	select {
	case c.lost <- err:
	default:
	}
}

// shut releases the paho client; safe to call more than once.
func (c *connection) shut() {
	c.once.Do(func() {
		close(c.done)
		c.client.Disconnect(disconnectQuiesce)
	})
}

// Listen hands on the readings of every frame received until ctx ends
// (nil) or the connection is lost (an error; the runner reconnects).
// emit is called once per frame object, from this goroutine only.
func (a *Adapter) Listen(ctx context.Context, emit func([]adapters.Reading)) error {
	a.mu.Lock()
	c := a.conn
	a.mu.Unlock()
	if c == nil {
		return errors.New("mqtt: listen: not connected")
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case in := <-c.inbox:
			a.handle(in, emit)
		case <-c.done:
			return errors.New("mqtt: listen: adapter closed")
		case err := <-c.lost:
			// What arrived before the loss is still good.
			for {
				select {
				case in := <-c.inbox:
					a.handle(in, emit)
					continue
				default:
				}
				break
			}
			a.log.Warn("mqtt connection lost", "broker", a.cfg.redactedBroker(), "err", err)
			return fmt.Errorf("mqtt: connection to %s lost: %w", a.cfg.redactedBroker(), err)
		}
	}
}

// handle frames one MQTT message and emits the readings of its frames.
func (a *Adapter) handle(in inbound, emit func([]adapters.Reading)) {
	a.stats.messages.Add(1)
	a.stats.bytes.Add(uint64(len(in.payload)))
	a.stats.lastMessage.Store(in.received.UnixNano())
	overflowed := a.topics.write(in.topic, in.payload, func(frame []byte) {
		a.stats.frames.Add(1)
		if a.frame != nil {
			a.frame(frame, in.received)
		}
		d := a.dec.decode(frame, in.received)
		if d.invalid > 0 {
			a.stats.invalidFrames.Add(uint64(d.invalid))
			a.log.Debug("invalid mqtt frame", "topic", in.topic, "bytes", len(frame))
		}
		for _, rs := range d.messages {
			if len(rs) > 0 {
				a.stats.readings.Add(uint64(len(rs)))
				emit(rs)
			}
		}
	})
	if overflowed > 0 {
		a.stats.overflows.Add(uint64(overflowed))
		a.log.Warn("mqtt frame over buffer capacity discarded", "topic", in.topic,
			"capacity", a.cfg.BufferCapacity, "delimiter", fmt.Sprintf("%q", *a.cfg.Delimiter))
	}
	a.stats.pendingTopics.Store(int64(a.topics.pending()))
}

// Poll is not used: the runner listens to a Listener that does not return
// ErrPollOnly, and MQTT never does. It returns nil, nil.
func (a *Adapter) Poll(context.Context) ([]adapters.Reading, error) { return nil, nil }

// Close disconnects from the broker. It is safe to call more than once,
// after a failed Connect and after the connection was lost.
func (a *Adapter) Close() error {
	a.mu.Lock()
	c := a.conn
	a.conn = nil
	a.mu.Unlock()
	if c != nil {
		c.shut()
	}
	return nil
}

// tlsConfig reads the certificate files of an ssl://, tls:// or wss://
// broker; nil for the others.
func (a *Adapter) tlsConfig() (*tls.Config, error) {
	if !a.cfg.tls() {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: a.cfg.InsecureSkipVerify} //nolint:gosec // opted into by the endpoint's configuration
	if a.cfg.CAFile != "" {
		pem, err := os.ReadFile(a.cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("caFile %s: no PEM certificate", a.cfg.CAFile)
		}
		cfg.RootCAs = pool
	}
	if a.cfg.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(a.cfg.CertFile, a.cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("certFile/keyFile: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// dial opens the network connection for paho, bounded by ctx; paho's own
// dialer cannot be cancelled.
func dial(ctx context.Context, u *url.URL, tlsCfg *tls.Config, timeout time.Duration) (net.Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	switch u.Scheme {
	case "tcp":
		return d.DialContext(ctx, "tcp", u.Host)
	case "ssl", "tls":
		return (&tls.Dialer{NetDialer: d, Config: tlsCfg}).DialContext(ctx, "tcp", u.Host)
	case "ws", "wss":
		if u.Scheme == "ws" {
			tlsCfg = nil
		}
		return paho.NewWebsocket(u.String(), tlsCfg, timeout, nil, nil)
	}
	return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
}

// Interface guards.
var (
	_ adapters.Driver    = Driver{}
	_ adapters.Adapter   = (*Adapter)(nil)
	_ adapters.Listener  = (*Adapter)(nil)
	_ adapters.Diagnoser = (*Adapter)(nil)
)
