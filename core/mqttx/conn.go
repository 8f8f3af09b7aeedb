package mqttx

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/url"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
)

// errRedeliver ends a connection on purpose so the broker redelivers the
// messages whose handlers failed.
var errRedeliver = errors.New("reconnecting so the broker redelivers unacknowledged messages")

// conn is one broker connection: a paho client made for it alone (never
// reused: paho's own reconnect machinery is off, and a fresh client has no
// state left from the last connection), the handler workers and the queue
// flusher of that connection.
type conn struct {
	c  *Client
	pc paho.Client

	// ctx is the handlers' and the flusher's context; halt cancels it.
	ctx    context.Context
	cancel context.CancelFunc
	// closing is closed by halt: stop dispatching, handling and flushing.
	closing  chan struct{}
	haltOnce sync.Once
	// ended is closed by fail: the connection is no longer usable.
	ended   chan struct{}
	endOnce sync.Once
	endErr  error // set before ended is closed
	// lost is set when paho reported the loss itself.
	lost atomic.Bool

	work    []chan paho.Message
	wg      sync.WaitGroup // workers and flusher
	unacked atomic.Int64
	// got counts the messages dispatched, inHand those dispatched and not
	// settled yet, lastAt (Unix ns) when the last one came: what a member
	// leaving its shared group watches for the flow to go quiet.
	got    atomic.Int64
	inHand atomic.Int64
	lastAt atomic.Int64
	// redeliver fires RedeliverAfter after the first message left
	// unacknowledged; redelivering is set by whichever trigger ends the
	// connection for redelivery first.
	redeliver    atomic.Pointer[time.Timer]
	redelivering atomic.Bool

	// subscribed holds the filters made on this connection; Run's
	// goroutine only.
	subscribed map[string]bool

	// dialCancel unhooks the dial's context from the network connection
	// once the CONNACK is in.
	dialMu     sync.Mutex
	dialCancel func() bool
}

// dial makes one connection attempt: it starts the handler workers (a
// persistent session may deliver messages right after the CONNACK), connects,
// and makes every subscription. On error nothing is left running.
func (c *Client) dial(ctx context.Context) (*conn, error) {
	// Detached from Run's ctx: halt ends the handlers, which Run does as
	// its ctx ends, unless the client may leave its shared group and
	// handles on until Stop has drained (leave.go).
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	cn := &conn{
		c: c, ctx: hctx, cancel: cancel,
		closing:    make(chan struct{}),
		ended:      make(chan struct{}),
		subscribed: map[string]bool{},
		work:       make([]chan paho.Message, c.opts.HandlerWorkers),
	}
	for i := range cn.work {
		cn.work[i] = make(chan paho.Message, c.opts.HandlerBuffer)
		cn.wg.Add(1)
		go cn.worker(cn.work[i])
	}
	cn.pc = paho.NewClient(c.pahoOptions(ctx, cn))

	tok := cn.pc.Connect()
	<-tok.Done() // bounded: the dial follows ctx, the handshake ConnectTimeout
	cn.unhookDial()
	if err := tok.Error(); err != nil {
		cn.halt()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("connect %s: %w", c.brokerURL.Redacted(), err)
	}
	if ct, ok := tok.(*paho.ConnectToken); ok {
		c.log.Debug("mqtt connack", "session_present", ct.SessionPresent())
	}
	if err := c.subscribe(ctx, cn); err != nil {
		cn.halt()
		cn.close(c.quiesce(ctx))
		return nil, err
	}
	return cn, nil
}

// pahoOptions configures paho for one connection: our state machine does
// the reconnecting, our handlers acknowledge.
func (c *Client) pahoOptions(ctx context.Context, cn *conn) *paho.ClientOptions {
	o := c.opts
	po := paho.NewClientOptions().
		AddBroker(c.brokerURL.String()).
		SetClientID(o.ClientID).
		SetCleanSession(o.CleanSession).
		SetProtocolVersion(4). // MQTT 3.1.1; no silent fallback to 3.1
		SetAutoReconnect(false).
		SetConnectRetry(false).
		SetResumeSubs(false).
		SetOrderMatters(true). // our callback only hands off; see dispatch
		SetAutoAckDisabled(true).
		SetKeepAlive(o.KeepAlive).
		SetConnectTimeout(o.ConnectTimeout).
		SetWriteTimeout(o.WriteTimeout).
		SetStore(paho.NewMemoryStore()).
		SetDefaultPublishHandler(cn.dispatch).
		SetConnectionLostHandler(func(_ paho.Client, err error) {
			cn.lost.Store(true)
			cn.fail(fmt.Errorf("connection lost: %w", err))
		}).
		SetCustomOpenConnectionFn(func(u *url.URL, _ paho.ClientOptions) (net.Conn, error) {
			return cn.open(ctx, u)
		})
	if o.Username != "" {
		po.SetUsername(o.Username)
	}
	if o.Password.IsSet() {
		po.SetPassword(o.Password.Reveal())
	}
	c.mu.Lock()
	if c.tlsConfig != nil {
		po.SetTLSConfig(c.tlsConfig)
	}
	c.mu.Unlock()
	if o.Will != nil {
		po.SetBinaryWill(o.Will.Topic, o.Will.Payload, o.Will.QoS, o.Will.Retained)
	}
	return po
}

// open dials the broker following ctx, so that Stop does not wait out a
// connect timeout; until the CONNACK, ctx ending closes the connection.
func (cn *conn) open(ctx context.Context, u *url.URL) (net.Conn, error) {
	o := cn.c.opts
	d := &net.Dialer{Timeout: o.ConnectTimeout}
	var nc net.Conn
	var err error
	switch u.Scheme {
	case "tcp", "mqtt":
		nc, err = d.DialContext(ctx, "tcp", u.Host)
	case "ssl", "tls", "mqtts":
		cn.c.mu.Lock()
		cfg := cn.c.tlsConfig
		cn.c.mu.Unlock()
		td := &tls.Dialer{NetDialer: d, Config: cfg}
		nc, err = td.DialContext(ctx, "tcp", u.Host)
	case "ws", "wss":
		wu := *u
		wu.User = nil // gorilla refuses URLs with user info (paho #623)
		var cfg *tls.Config
		if u.Scheme == "wss" {
			cn.c.mu.Lock()
			cfg = cn.c.tlsConfig
			cn.c.mu.Unlock()
		}
		// Bounded by the handshake timeout, not ctx: paho's WebSocket
		// dialer takes none.
		nc, err = paho.NewWebsocket(wu.String(), cfg, o.ConnectTimeout, nil, nil)
	default:
		err = fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	if err != nil {
		return nil, err
	}
	cn.dialMu.Lock()
	cn.dialCancel = context.AfterFunc(ctx, func() { _ = nc.Close() })
	cn.dialMu.Unlock()
	return &bufferedConn{Conn: nc, r: bufio.NewReaderSize(nc, readBufferSize)}, nil
}

// readBufferSize holds dozens of typical telemetry PUBLISH packets.
const readBufferSize = 32 << 10

// bufferedConn reads through a buffer. paho reads a packet's type byte and
// each byte of its remaining length with separate Reads, then the rest:
// four system calls for one PUBLISH on a bare socket, where the buffer makes
// one read for many packets. Every read of paho's, the CONNACK's included,
// goes through it, so nothing is left behind in the buffer.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

func (cn *conn) unhookDial() {
	cn.dialMu.Lock()
	defer cn.dialMu.Unlock()
	if cn.dialCancel != nil {
		cn.dialCancel()
		cn.dialCancel = nil
	}
}

// subscribe makes on cn every registered subscription not made there yet,
// in one SUBSCRIBE, and fails if the broker refuses any.
func (c *Client) subscribe(ctx context.Context, cn *conn) error {
	filters := map[string]byte{}
	optional := map[string]bool{}
	var made []string
	for _, s := range c.subscriptions() {
		if !cn.subscribed[s.filter] {
			filters[c.brokerFilter(s.filter)] = s.qos
			optional[c.brokerFilter(s.filter)] = s.optional
			made = append(made, s.filter)
		}
	}
	if len(filters) == 0 {
		return nil
	}
	tok := cn.pc.SubscribeMultiple(filters, nil)
	if err := c.waitToken(ctx, cn, tok); err != nil {
		return fmt.Errorf("subscribe %v: %w", made, err)
	}
	if st, ok := tok.(*paho.SubscribeToken); ok {
		for f, code := range st.Result() {
			if code == 0x80 && optional[f] {
				c.log.Info("mqtt broker refused an optional subscription; going on without it", "filter", f)
			} else if code == 0x80 {
				return fmt.Errorf("subscribe %s: refused by the broker", f)
			}
		}
	}
	for _, f := range made {
		cn.subscribed[f] = true
	}
	c.log.Debug("mqtt subscribed", "filters", made)
	return nil
}

// waitToken waits for tok, bounded by AckTimeout, ctx and the connection.
func (c *Client) waitToken(ctx context.Context, cn *conn, tok paho.Token) error {
	t := time.NewTimer(c.opts.AckTimeout)
	defer t.Stop()
	select {
	case <-tok.Done():
		return tok.Error()
	case <-ctx.Done():
		return ctx.Err()
	case <-cn.ended:
		return cn.err()
	case <-t.C:
		return fmt.Errorf("no answer from the broker within %s", c.opts.AckTimeout)
	}
}

// fail marks the connection unusable; Run's serve tears it down.
func (cn *conn) fail(err error) {
	cn.endOnce.Do(func() {
		cn.endErr = err
		close(cn.ended)
	})
}

// err is why the connection ended; nil while it has not.
func (cn *conn) err() error {
	select {
	case <-cn.ended:
		return cn.endErr
	default:
		return nil
	}
}

// halt stops dispatching, handling and flushing on cn and waits for its
// workers and flusher. Handlers' contexts are cancelled: their acks could
// not reach the broker on a dead connection anyway, and what they leave
// unacknowledged is redelivered. Messages buffered for workers are dropped
// unacknowledged for the same reason.
func (cn *conn) halt() {
	cn.haltOnce.Do(func() {
		close(cn.closing)
		cn.cancel()
	})
	cn.wg.Wait()
	if t := cn.redeliver.Load(); t != nil {
		t.Stop()
	}
}

// close disconnects cleanly, unless paho already saw the connection go.
func (cn *conn) close(quiesce time.Duration) {
	cn.fail(errors.New("closed"))
	if cn.lost.Load() || !cn.pc.IsConnectionOpen() {
		return
	}
	cn.pc.Disconnect(uint(quiesce.Milliseconds()))
}

// dispatch is paho's handler for every message. paho calls it on its router
// goroutine, in order (SetOrderMatters); it only hands the message to a
// worker, so that a slow handler never holds up PUBACKs for our publishes,
// which paho reads on the goroutine that feeds the router. When the worker's
// buffer is full it blocks, which is the back-pressure to the broker.
func (cn *conn) dispatch(_ paho.Client, pm paho.Message) {
	cn.c.m.received.Inc()
	cn.got.Add(1)
	cn.inHand.Add(1)
	cn.lastAt.Store(time.Now().UnixNano())
	ch := cn.work[0]
	if n := len(cn.work); n > 1 {
		h := fnv.New32a()
		_, _ = h.Write([]byte(pm.Topic()))
		ch = cn.work[h.Sum32()%uint32(n)]
	}
	select {
	case ch <- pm:
		return
	default:
	}
	start := time.Now()
	defer func() { cn.c.m.behind.Add(time.Since(start).Seconds()) }()
	slow := time.NewTimer(behindWarnAfter)
	defer slow.Stop()
	for {
		select {
		case ch <- pm:
			return
		case <-cn.closing:
			cn.inHand.Add(-1)
			return
		case <-slow.C:
			if ok, held := cn.c.behindLog.Allow(""); ok {
				cn.c.log.Warn("mqtt subscriber falling behind: its handlers have taken no message for a while, so the broker queues for this client and drops past its limit (Mosquitto: max_queued_messages)",
					"waited", behindWarnAfter, "topic", pm.Topic(), "suppressed", held)
			}
		}
	}
}

// behindWarnAfter is how long dispatch waits for a full worker before it
// warns. Shorter waits are the ordinary back-pressure of a burst.
var behindWarnAfter = time.Second

func (cn *conn) worker(ch <-chan paho.Message) {
	defer cn.wg.Done()
	batch := make([]paho.Message, 0, cn.c.opts.HandlerBatch)
	for {
		select {
		case <-cn.closing:
			return
		case pm := <-ch:
			if cn.ctx.Err() != nil {
				return
			}
			// Take what is already waiting, never wait for more: a batch
			// forms only when handlers fall behind.
			batch = append(batch[:0], pm)
		drain:
			for len(batch) < cap(batch) {
				select {
				case pm := <-ch:
					batch = append(batch, pm)
				default:
					break drain
				}
			}
			cn.c.handleAll(cn, batch)
			cn.inHand.Add(-int64(len(batch)))
			clear(batch) // let the payloads go
		}
	}
}

// handleAll handles pms in order: runs of consecutive messages whose only
// subscription is the same batch subscription go to its BatchHandler
// together, every other message on its own.
func (c *Client) handleAll(cn *conn, pms []paho.Message) {
	for i := 0; i < len(pms); {
		sub := c.batchOf(pms[i].Topic())
		if sub == nil {
			c.handle(cn, pms[i])
			i++
			continue
		}
		j := i + 1
		for j < len(pms) && c.batchOf(pms[j].Topic()) == sub {
			j++
		}
		c.handleBatch(cn, sub, pms[i:j])
		i = j
	}
}

// handleBatch runs sub's BatchHandler on pms and settles each message with
// its own result.
func (c *Client) handleBatch(cn *conn, sub *subscription, pms []paho.Message) {
	ms := make([]Message, len(pms))
	for i, pm := range pms {
		ms[i] = message(pm)
	}
	errs := callBatchHandler(cn.ctx, sub.bh, ms)
	for i, pm := range pms {
		c.settle(cn, pm, ms[i].Topic, errs[i])
	}
}

func message(pm paho.Message) Message {
	return Message{Topic: pm.Topic(), Payload: pm.Payload(), QoS: pm.Qos(), Retained: pm.Retained(),
		Duplicate: pm.Duplicate(), MessageID: pm.MessageID()}
}

// handle runs the handlers matching pm and acknowledges it when all
// returned nil.
func (c *Client) handle(cn *conn, pm paho.Message) {
	m := message(pm)
	subs := c.subscriptionsFor(m.Topic)
	if len(subs) == 0 {
		// A subscription left in the persistent session by an earlier
		// run: nothing here can handle it, so it is dropped rather than
		// held unacknowledged in the broker's inflight window forever.
		c.m.unrouted.Inc()
		pm.Ack()
		return
	}
	var err error
	for _, s := range subs {
		var herr error
		if s.bh != nil {
			herr = callBatchHandler(cn.ctx, s.bh, []Message{m})[0]
		} else {
			herr = callHandler(cn.ctx, s.h, m)
		}
		if herr != nil && err == nil {
			err = herr
		}
	}
	c.settle(cn, pm, m.Topic, err)
}

// settle acknowledges pm when its handling succeeded; otherwise it counts
// and logs the failure and leaves pm to be redelivered.
func (c *Client) settle(cn *conn, pm paho.Message, topic string, err error) {
	if err == nil {
		pm.Ack()
		return
	}
	if cn.ctx.Err() != nil {
		return // torn down under the handler; redelivered, not a failure
	}
	c.m.handlerErrors.Inc()
	if ok, held := c.handlerLog.Allow(""); ok {
		c.log.Warn("mqtt handler failed; message left unacknowledged for redelivery",
			"topic", topic, "err", err, "similar_suppressed", held)
	}
	if pm.Qos() == 0 {
		return
	}
	n := cn.unacked.Add(1)
	if after := c.opts.RedeliverAfter; n == 1 && after > 0 {
		cn.redeliver.Store(time.AfterFunc(after, func() {
			cn.endForRedelivery(fmt.Errorf("a message unacknowledged for %s: %w", after, errRedeliver))
		}))
	}
	if c.opts.ReconnectAfterUnacked > 0 && n == int64(c.opts.ReconnectAfterUnacked) {
		cn.endForRedelivery(fmt.Errorf("%d messages unacknowledged: %w", n, errRedeliver))
	}
}

// endForRedelivery ends cn so that the client reconnects and the broker
// redelivers what cn left unacknowledged; only the first call on a live
// connection counts.
func (cn *conn) endForRedelivery(err error) {
	if cn.err() != nil || !cn.redelivering.CompareAndSwap(false, true) {
		return
	}
	cn.c.m.forcedReconn.Inc()
	cn.fail(err)
}

// callHandler runs h, turning a panic into an error so that one bad message
// cannot take the process down; the message stays unacknowledged.
func callHandler(ctx context.Context, h Handler, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("handler panicked on %s: %v\n%s", m.Topic, r, debug.Stack())
		}
	}()
	return h(ctx, m)
}

// callBatchHandler runs h like callHandler, with one error per message: a
// panic, or a handler that miscounts its results, fails the whole batch,
// which then stays unacknowledged.
func callBatchHandler(ctx context.Context, h BatchHandler, ms []Message) (errs []error) {
	defer func() {
		if r := recover(); r != nil {
			err := fmt.Errorf("batch handler panicked on %d messages (first on %s): %v\n%s", len(ms), ms[0].Topic, r, debug.Stack())
			errs = make([]error, len(ms))
			for i := range errs {
				errs[i] = err
			}
		}
	}()
	errs = h(ctx, ms)
	if len(errs) != len(ms) {
		err := fmt.Errorf("BUG: batch handler returned %d results for %d messages", len(errs), len(ms))
		errs = make([]error, len(ms))
		for i := range errs {
			errs[i] = err
		}
	}
	return errs
}
