package mqttx

import (
	"container/list"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
)

// Errors callers can test for with errors.Is.
var (
	// ErrQueued: the message is in the pending publish queue and will be
	// sent, in order, once connected. It is not lost (unless the queue
	// overflows or the process stops), but not yet delivered either.
	ErrQueued = errors.New("mqtt: not connected; message queued")
	// ErrDropped: the message was dropped from a full queue, oldest first.
	ErrDropped = errors.New("mqtt: message dropped from the full publish queue")
	// ErrStopped: the client was stopped.
	ErrStopped = errors.New("mqtt: client stopped")
	// ErrNotConnected is wrapped by Check while the client is not connected.
	ErrNotConnected = errors.New("mqtt: not connected")
)

// Stats is a snapshot of the client's state and counters, for /health.
type Stats struct {
	State State `json:"state"`
	// ReconnectAttempts counts every reconnect attempt since New.
	ReconnectAttempts uint64 `json:"reconnectAttempts"`
	// ConsecutiveFailures counts failed reconnect attempts of the current
	// outage; reset on success and when leaving fatal.
	ConsecutiveFailures int `json:"consecutiveFailures"`
	// ConnectedSince is when the current connection was made; zero unless
	// connected.
	ConnectedSince time.Time `json:"connectedSince,omitzero"`
	// LastError is the last connection error, "" once connected.
	LastError    string `json:"lastError,omitempty"`
	QueueLength  int    `json:"queueLength"`
	QueueDropped uint64 `json:"queueDropped"`
}

// Client is an MQTT client with its own reconnect state machine and pending
// publish queue. It is a lifecycle.Service; build it with New.
type Client struct {
	opts      Options
	brokerURL *url.URL
	log       *slog.Logger
	m         *clientMetrics

	subs        atomic.Pointer[[]*subscription] // copy on write, see Subscribe
	subsChanged chan struct{}                   // cap 1: a subscription was added
	wake        chan struct{}                   // cap 1: the queue has work

	dropLog    *logging.Limiter
	handlerLog *logging.Limiter
	behindLog  *logging.Limiter

	mu             sync.Mutex
	tlsConfig      *tls.Config
	started        bool
	stopped        bool
	mach           machine
	connectedSince time.Time
	lastErr        error
	attempts       uint64
	queue          list.List // of *item, oldest first
	queueBytes     int
	dropped        uint64
	cur            *conn // the live connection, nil when there is none
	ran            bool  // Run was called; it runs once

	// hooks are for tests in this package; set them before Start.
	hooks struct {
		// attempt is called before the wait of each reconnect attempt with
		// its number in the outage (1-based) and the backoff it waits.
		attempt func(n int, delay time.Duration)
	}
}

// New validates opts and builds a client. It does no I/O.
func New(opts Options) (*Client, error) {
	u, err := opts.normalise()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer, opts.Name)
	if err != nil {
		return nil, err
	}
	c := &Client{
		opts:        opts,
		brokerURL:   u,
		log:         opts.Logger.With("component", opts.Name),
		m:           m,
		subsChanged: make(chan struct{}, 1),
		wake:        make(chan struct{}, 1),
		dropLog:     logging.NewLimiter(10*time.Second, nil),
		handlerLog:  logging.NewLimiter(10*time.Second, nil),
		behindLog:   logging.NewLimiter(10*time.Second, nil),
	}
	c.mach.p = policy{base: opts.BackoffBase, max: opts.BackoffMax, maxAttempts: opts.MaxReconnectAttempts, cooldown: opts.FatalRecoveryCooldown}
	return c, nil
}

// Name implements lifecycle.Service.
func (c *Client) Name() string { return c.opts.Name }

// ClientID is the client id: Options.ClientID, or what ResolveClientID
// made of it once Start has run.
func (c *Client) ClientID() string { return c.opts.ClientID }

// QoS is the configured QoS (mqtt.qos) for callers' publishes and
// subscriptions.
func (c *Client) QoS() byte { return c.opts.QoS }

// Start implements lifecycle.Service. It reads the TLS files and moves to
// connecting; it does not dial: Run makes the first attempt at once, so a
// broker that is down at start-up is retried like a lost connection instead
// of failing the process. Start fails only on invalid settings.
func (c *Client) Start(ctx context.Context) error {
	tlsConfig, err := c.opts.loadTLS(c.brokerURL)
	if err != nil {
		return err
	}
	if c.opts.ClientID == "" && c.opts.ResolveClientID != nil {
		id, err := c.opts.ResolveClientID(ctx)
		if err != nil {
			return fmt.Errorf("mqtt client id: %w", err)
		}
		if id == "" || len(id) > 65535 {
			return fmt.Errorf("mqtt client id: resolved to %d bytes, want 1 to 65535", len(id))
		}
		c.opts.ClientID = id
	}
	c.mu.Lock()
	if c.started || c.stopped {
		c.mu.Unlock()
		return errors.New("mqtt client: Start called twice")
	}
	c.started = true
	c.tlsConfig = tlsConfig
	c.mu.Unlock()
	c.transition(evStart, nil)
	c.log.Info("mqtt client starting", "broker", c.brokerURL.Redacted(), "client_id", c.opts.ClientID,
		"clean_session", c.opts.CleanSession, "shared_group", c.opts.SharedGroup)
	return nil
}

// Run implements lifecycle.Service: it drives the state machine until ctx
// ends. When it returns, message handling and the queue flush have stopped
// (unless the client may leave its shared group: then they go on until
// Stop has decided); an established connection stays open for Stop to
// drain and close.
func (c *Client) Run(ctx context.Context) error {
	c.mu.Lock()
	if !c.started || c.stopped || c.ran {
		c.mu.Unlock()
		return errors.New("mqtt client: Run needs Start, and runs once")
	}
	c.ran = true
	c.mu.Unlock()

	for ctx.Err() == nil {
		c.mu.Lock()
		state, wait, failures, cn := c.mach.state, c.mach.wait(), c.mach.failures, c.cur
		c.mu.Unlock()

		switch state {
		case StateConnected:
			c.serve(ctx, cn)
		case StateFatal:
			if lifecycle.Sleep(ctx, wait) {
				c.transition(evCooldownElapsed, nil)
			}
		case StateConnecting, StateReconnecting:
			if state == StateReconnecting {
				if h := c.hooks.attempt; h != nil {
					h(failures+1, wait)
				}
				if !lifecycle.Sleep(ctx, wait) {
					continue
				}
				c.mu.Lock()
				c.attempts++
				c.mu.Unlock()
				c.m.reconnects.Inc()
			}
			cn, err := c.dial(ctx)
			if err != nil {
				if ctx.Err() == nil {
					c.transition(evAttemptFailed, err)
				}
				continue
			}
			c.mu.Lock()
			c.cur = cn
			c.mu.Unlock()
			c.transition(evConnected, nil)
			cn.startFlusher()
		default:
			return fmt.Errorf("mqtt client: Run in state %s", state)
		}
	}

	// Stop handling messages and flushing; leave the connection to Stop.
	// A member that may leave its shared group keeps handling: the broker
	// goes on sending it its share until Stop unsubscribes, and what it
	// sent or queued until then is this member's to handle (leave.go).
	c.mu.Lock()
	cn := c.cur
	c.mu.Unlock()
	if cn != nil && !c.mayLeave() {
		cn.halt()
		c.markQueued()
	}
	return nil
}

// serve waits while connected: for the connection to end, for new
// subscriptions to make, or for ctx.
func (c *Client) serve(ctx context.Context, cn *conn) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-cn.ended:
			cn.halt()
			cn.close(c.quiesce(ctx))
			c.mu.Lock()
			c.cur = nil
			c.mu.Unlock()
			c.markQueued()
			c.transition(evConnectionLost, cn.err())
			return
		case <-c.subsChanged:
			if err := c.subscribe(ctx, cn); err != nil && ctx.Err() == nil {
				cn.fail(err)
			}
		}
	}
}

// Stop implements lifecycle.Service, called once Run has returned (or
// never ran): it leaves the shared group when Options.LeaveShared says so
// (leave.go), sends what is queued while ctx and the connection allow,
// disconnects cleanly and fails what remains in the queue with ErrStopped.
func (c *Client) Stop(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil
	}
	c.stopped = true
	c.mu.Unlock()

	c.mu.Lock()
	cn := c.cur
	c.cur = nil
	c.mu.Unlock()
	if cn != nil {
		removeSession := c.mayLeave() && c.leave(ctx, cn)
		cn.halt() // Run halted it already, unless it left that to leave; harmless
		if err := c.flush(ctx, cn, true); err != nil {
			// What is left is counted and logged below; not a failure to stop.
			c.log.Warn("mqtt could not send the queue before stopping", "err", err)
		}
		cn.close(c.quiesce(ctx))
		if removeSession {
			c.removeSession(ctx)
		}
	}

	c.mu.Lock()
	left := c.queue.Len()
	for e := c.queue.Front(); e != nil; e = e.Next() {
		e.Value.(*item).notify(ErrStopped)
	}
	c.queue.Init()
	c.queueBytes = 0
	c.mu.Unlock()
	c.m.queueLength.Set(0)
	if left > 0 {
		c.log.Warn("mqtt client stopped with unsent messages; they are lost", "count", left)
	}
	c.transition(evStop, nil)
	return nil
}

// quiesce is how long a clean disconnect may wait for the DISCONNECT to be
// written: up to 250 ms, less when ctx ends sooner.
func (c *Client) quiesce(ctx context.Context) time.Duration {
	q := 250 * time.Millisecond
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) / 2; left < q {
			q = max(left, 0)
		}
	}
	return q
}

// transition applies ev, records err as the last error (nil clears it on
// connect), updates metrics and logs, and calls OnStateChange.
func (c *Client) transition(ev event, err error) {
	c.mu.Lock()
	from, to := c.mach.apply(ev)
	failures := c.mach.failures
	switch {
	case to == StateConnected:
		c.lastErr = nil
		if from != to {
			c.connectedSince = time.Now()
		}
	case err != nil:
		c.lastErr = err
		c.connectedSince = time.Time{}
	default:
		c.connectedSince = time.Time{}
	}
	wait := c.mach.wait()
	c.mu.Unlock()

	c.m.failures.Set(float64(failures))
	switch ev {
	case evAttemptFailed:
		c.log.Warn("mqtt connection attempt failed", "err", err, "state", to, "consecutive_failures", failures, "next_in", wait)
	case evConnectionLost:
		if errors.Is(err, errRedeliver) {
			c.log.Info("mqtt reconnecting so the broker redelivers unacknowledged messages", "reason", err, "reconnect_in", wait)
		} else {
			c.log.Warn("mqtt connection lost", "err", err, "reconnect_in", wait)
		}
	}
	if from == to {
		return
	}
	c.m.setState(to)
	switch to {
	case StateConnected:
		c.log.Info("mqtt connected", "broker", c.brokerURL.Redacted())
	case StateFatal:
		c.log.Error("mqtt client fatal: reconnect attempts exhausted", "attempts", failures, "cooldown", wait, "err", err)
	case StateReconnecting:
		if from == StateFatal {
			c.log.Info("mqtt fatal cooldown over; reconnecting with counters reset")
		}
	}
	if c.opts.OnStateChange != nil {
		c.opts.OnStateChange(from, to)
	}
}

// State returns the current state.
func (c *Client) State() State {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mach.state
}

// Stats returns the state and counters.
func (c *Client) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := Stats{
		State:               c.mach.state,
		ReconnectAttempts:   c.attempts,
		ConsecutiveFailures: c.mach.failures,
		ConnectedSince:      c.connectedSince,
		QueueLength:         c.queue.Len(),
		QueueDropped:        c.dropped,
	}
	if c.lastErr != nil {
		s.LastError = c.lastErr.Error()
	}
	return s
}

// Check is a health.Check: nil only while connected.
func (c *Client) Check(context.Context) error {
	s := c.Stats()
	if s.State == StateConnected {
		return nil
	}
	if s.LastError != "" {
		return fmt.Errorf("%w: %s (%d failed reconnects): %s", ErrNotConnected, s.State, s.ConsecutiveFailures, s.LastError)
	}
	return fmt.Errorf("%w: %s", ErrNotConnected, s.State)
}

// signal makes a non-blocking send on a capacity-1 channel.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

var (
	_ lifecycle.Service = (*Client)(nil)
	_ health.Check      = (*Client)(nil).Check
)
