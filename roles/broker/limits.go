package broker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/config"
	mqtt "github.com/mochi-mqtt/server/v2"
)

// Limits bound what one client can make the broker hold. mochi's own
// defaults leave packets unbounded (a client announcing 100 MiB got 100 MiB
// buffered before it had even authenticated) and never time out a
// connection that does not send CONNECT. A zero field takes its default.
type Limits struct {
	// MaxPacketBytes caps one packet (fixed header byte and body, as
	// MQTT 5's Maximum Packet Size counts it); a larger one closes the
	// connection as soon as its header announces the size.
	MaxPacketBytes int
	// ConnectTimeout is how long a new connection may take to deliver its
	// CONNECT packet. From CONNECT on, the client's keep-alive applies.
	ConnectTimeout time.Duration
	// ReceiveMaximum is how many QoS 1 and 2 publishes a client may have
	// unacknowledged towards the broker.
	ReceiveMaximum int
	// MaxInflight is how many QoS 1 and 2 messages the broker keeps for
	// one client (including an offline persistent session) awaiting its ack.
	MaxInflight int
	// MaxQueued is how many packets may wait to be written to one client;
	// past it, messages to that client are dropped.
	MaxQueued int
	// SessionExpiry caps how long a disconnected persistent session is
	// kept, with its subscriptions and inflight messages.
	SessionExpiry time.Duration
}

// DefaultMaxPacketBytes is the largest telemetry payload the API decodes
// (codec.DefaultMaxInputSize, 4 MiB) plus 128 KiB for what surrounds it in
// a PUBLISH: the topic (at most 64 KiB), the packet id and MQTT 5
// properties. all_in_one.mqtt_max_packet_bytes has the same default;
// TestConfigDefaultsAreTheBrokerDefaults keeps the two together.
const DefaultMaxPacketBytes = 4<<20 + 128<<10

// DefaultLimits are the limits a zero Limits field takes.
var DefaultLimits = Limits{
	MaxPacketBytes: DefaultMaxPacketBytes,
	ConnectTimeout: 10 * time.Second,
	ReceiveMaximum: 1024,
	MaxInflight:    4096,
	MaxQueued:      4096,
	SessionExpiry:  24 * time.Hour,
}

// maxConnectBytes caps the CONNECT packet, which the broker reads before it
// knows who the client is. Its fields (client id, username, password, will
// topic and payload) are each at most 64 KiB long by the protocol's
// two-byte length prefixes; real clients send well under 1 KiB. So an
// unauthenticated connection costs at most this much, not MaxPacketBytes.
const maxConnectBytes = 320 << 10

// LimitsFromConfig reads the broker's limits from the all_in_one section.
func LimitsFromConfig(c config.AllInOne) Limits {
	return Limits{
		MaxPacketBytes: c.MQTTMaxPacketBytes,
		ConnectTimeout: time.Duration(c.MQTTConnectTimeoutSeconds) * time.Second,
		ReceiveMaximum: c.MQTTReceiveMaximum,
		MaxInflight:    c.MQTTMaxInflight,
		MaxQueued:      c.MQTTMaxQueued,
		SessionExpiry:  time.Duration(c.MQTTSessionExpirySeconds) * time.Second,
	}
}

// withDefaults fills zero fields and checks the rest fits mochi's types.
func (l Limits) withDefaults() (Limits, error) {
	d := DefaultLimits
	pick := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	pick(&l.MaxPacketBytes, d.MaxPacketBytes)
	pick(&l.ReceiveMaximum, d.ReceiveMaximum)
	pick(&l.MaxInflight, d.MaxInflight)
	pick(&l.MaxQueued, d.MaxQueued)
	if l.ConnectTimeout == 0 {
		l.ConnectTimeout = d.ConnectTimeout
	}
	if l.SessionExpiry == 0 {
		l.SessionExpiry = d.SessionExpiry
	}
	var errs []error
	check := func(name string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("broker %s must be %d..%d, got %d", name, lo, hi, v))
		}
	}
	// A CONNECT must fit, or no client could ever connect.
	check("max packet bytes", l.MaxPacketBytes, 1024, 256<<20)
	check("receive maximum", l.ReceiveMaximum, 1, 65535)
	check("max inflight", l.MaxInflight, 1, 65535)
	check("max queued", l.MaxQueued, 1, 1<<20)
	if l.ConnectTimeout < 0 {
		errs = append(errs, fmt.Errorf("broker connect timeout must be positive, got %s", l.ConnectTimeout))
	}
	if l.SessionExpiry < time.Second || l.SessionExpiry > (1<<31-1)*time.Second {
		errs = append(errs, fmt.Errorf("broker session expiry must be 1s..2^31-1s, got %s", l.SessionExpiry))
	}
	return l, errors.Join(errs...)
}

// capabilities are mochi's defaults with l applied.
func (l Limits) capabilities() *mqtt.Capabilities {
	c := mqtt.NewDefaultServerCapabilities()
	c.MaximumPacketSize = uint32(l.MaxPacketBytes)
	c.ReceiveMaximum = uint16(l.ReceiveMaximum)
	c.MaximumInflight = uint16(l.MaxInflight)
	c.MaximumClientWritesPending = int32(l.MaxQueued)
	c.MaximumSessionExpiryInterval = uint32(l.SessionExpiry / time.Second)
	return c
}

// connectGuard is the listener the broker hands mochi. mochi sets no
// deadline until it has read CONNECT and then sets one from the client's
// keep-alive; the guard sets the first one, so a connection that stays
// silent (or trickles its CONNECT) is closed after the timeout. It also
// refuses a first packet larger than maxConnectBytes.
//
// It also tells Stop when mochi is done taking connections: mochi's Close
// waits on a WaitGroup that each new connection's goroutine adds to, and
// an Add racing that Wait is a data race in mochi. quiesce closes the
// listener and waits until every accepted connection has been read from,
// which mochi does only after its Add, so Close finds no Add to come.
type connectGuard struct {
	net.Listener
	timeout time.Duration

	stopped   chan struct{} // closed once Accept has failed: no more connections
	stopOnce  sync.Once
	attaching *attaching
}

func newConnectGuard(ln net.Listener, timeout time.Duration) *connectGuard {
	return &connectGuard{Listener: ln, timeout: timeout, stopped: make(chan struct{}), attaching: newAttaching()}
}

// Accept implements net.Listener.
func (g *connectGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			g.stopOnce.Do(func() { close(g.stopped) })
			return nil, err
		}
		// An error here is about this connection (closed already); an
		// error returned would stop mochi's accept loop for good.
		if err := c.SetDeadline(time.Now().Add(g.timeout)); err != nil {
			_ = c.Close()
			continue
		}
		g.attaching.add()
		return &firstPacketConn{Conn: c, attached: g.attaching.done}, nil
	}
}

// quiesce stops accepting and waits, within ctx, until mochi's accept
// loop has ended and has started reading every connection it accepted.
func (g *connectGuard) quiesce(ctx context.Context) error {
	if err := g.Listener.Close(); err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("close broker listener: %w", err)
	}
	select {
	case <-g.stopped:
	case <-ctx.Done():
		return fmt.Errorf("broker accept loop still running: %w", ctx.Err())
	}
	return g.attaching.wait(ctx)
}

// attaching counts the connections accepted but not read from yet.
type attaching struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed while n is 0
}

func newAttaching() *attaching {
	a := &attaching{idle: make(chan struct{})}
	close(a.idle)
	return a
}

func (a *attaching) add() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n == 0 {
		a.idle = make(chan struct{})
	}
	a.n++
}

func (a *attaching) done() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.n--
	if a.n == 0 {
		close(a.idle)
	}
}

func (a *attaching) wait(ctx context.Context) error {
	a.mu.Lock()
	idle := a.idle
	a.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker connections still attaching: %w", ctx.Err())
	}
}

func (c *firstPacketConn) markAttached() {
	if c.attached != nil {
		c.attachedOnce.Do(c.attached)
	}
}

// Close implements net.Conn.
func (c *firstPacketConn) Close() error {
	c.markAttached()
	return c.Conn.Close()
}

// errConnectTooLarge ends a connection whose first packet announces more
// than maxConnectBytes.
var errConnectTooLarge = fmt.Errorf("first packet larger than %d bytes", maxConnectBytes)

// firstPacketConn watches the bytes of the first packet's fixed header (a
// type byte, then a variable-length integer of up to 4 bytes) as mochi
// reads them, and fails the read that completes a header announcing too
// much, before mochi allocates the body. Only mochi's read loop calls Read.
type firstPacketConn struct {
	net.Conn
	// attached, when set, is called once, at the first Read or at Close.
	attached     func()
	attachedOnce sync.Once
	done         bool
	seen         int // header bytes seen, type byte included
	remaining    int
	mult         int
}

func (c *firstPacketConn) Read(p []byte) (int, error) {
	c.markAttached()
	n, err := c.Conn.Read(p)
	if c.done {
		return n, err
	}
	for i := 0; i < n && !c.done; i++ {
		b := p[i]
		c.seen++
		if c.seen == 1 {
			c.mult = 1
			continue
		}
		c.remaining += int(b&0x7f) * c.mult
		c.mult *= 128
		if b&0x80 != 0 && c.seen < 5 {
			continue
		}
		// The header is complete (or malformed, which mochi refuses).
		c.done = true
		if c.remaining+1 > maxConnectBytes {
			return 0, errConnectTooLarge
		}
	}
	return n, err
}
