package dest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/mqttx"
)

// renewFraction is how far into a credential's lifetime it is replaced:
// early enough that a reconnect during the renewal still has a valid one.
const renewFraction = 0.8

// renewRetry is the wait before trying a failed renewal again.
const renewRetry = time.Minute

// mqttTransport is every MQTT-family destination: platform, mqtt and the
// three hubs. The per-type parts are its builder's.
type mqttTransport struct {
	id     int64
	typ    string
	b      mqttBuilder
	log    *slog.Logger
	now    func() time.Time
	prefix string // platform: the topic prefix
	// onCommand receives the platform's command subtree; nil subscribes
	// to nothing.
	onCommand func(ctx context.Context, topic string, payload []byte)
	changes   chan struct{}
	// notReady, when set, is why the transport never connects (a platform
	// destination of a device that is not provisioned).
	notReady string
	// startErr is why the client could not start yet (retried); mu.
	startErr string
	// tune adjusts every client's options; tests shorten timeouts with it.
	tune func(*mqttx.Options)

	mu      sync.Mutex
	cur     *mqttRun
	started bool
	stopped bool
	cancel  context.CancelFunc // ends the renewal loop
	done    chan struct{}      // closed when the renewal loop ended
}

// mqttRun is one mqttx client and its Run goroutine. Credentials that
// expire are renewed by replacing the whole run: mqttx options are fixed
// for a client's life.
type mqttRun struct {
	c       *mqttx.Client
	target  string
	expires time.Time
	cancel  context.CancelFunc
	done    chan struct{}
}

func newMQTT(id int64, typ string, b mqttBuilder, env Env) (*mqttTransport, error) {
	t := &mqttTransport{
		id: id, typ: typ, b: b, now: env.now, changes: make(chan struct{}, 1),
		log: env.logger().With("destination_id", id, "destination_type", typ),
	}
	// Build a client once to check the options: mqttx.New does no I/O.
	if _, err := mqttx.New(t.options(b.connection(id, t.now()))); err != nil {
		return nil, err
	}
	return t, nil
}

func newPlatform(id int64, env Env) (*mqttTransport, error) {
	if !env.Platform.Provisioned() {
		t := &mqttTransport{
			id: id, typ: TypePlatform, log: env.logger().With("destination_id", id, "destination_type", TypePlatform),
			now: env.now, changes: make(chan struct{}, 1), notReady: "the device is not provisioned: no platform credentials",
		}
		return t, nil
	}
	t, err := newMQTT(id, TypePlatform, platformBuilder{creds: env.Platform}, env)
	if err != nil {
		return nil, err
	}
	t.prefix = env.Platform.TopicPrefix
	t.onCommand = env.OnCommand
	return t, nil
}

func (t *mqttTransport) options(p connParams) mqttx.Options {
	o := mqttx.DefaultOptions()
	o.Name = clientName(t.id)
	o.BrokerURL = p.URL
	o.Username = p.Username
	o.Password = config.Secret(p.Password)
	o.ClientID = p.ClientID
	// A clean session keeps the broker from queueing for us; the
	// publishing worker queues. The platform's one subscription, its
	// command subtree, is made again on every connection; a command sent
	// while the device was away is missed, which the target-state poll
	// makes up for (docs/control-channel.md).
	o.CleanSession = true
	o.CAFile, o.CertFile, o.KeyFile = p.CAFile, p.CertFile, p.KeyFile
	o.QoS = t.b.qos()
	o.MaxReconnectAttempts = 0
	o.Logger = t.log
	// Destinations come and go with the configuration; their clients'
	// metrics would collide on re-registration.
	o.Registerer = nil
	o.OnStateChange = func(from, to mqttx.State) {
		if from == mqttx.StateConnected || to == mqttx.StateConnected {
			signal(t.changes)
		}
	}
	if t.tune != nil {
		t.tune(&o)
	}
	return o
}

// launch builds, starts and runs a client with credentials made now.
func (t *mqttTransport) launch(ctx context.Context) (*mqttRun, error) {
	p := t.b.connection(t.id, t.now())
	c, err := mqttx.New(t.options(p))
	if err != nil {
		return nil, err
	}
	if err := t.subscribeCommands(c); err != nil {
		return nil, err
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("start mqtt client: %w", err)
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &mqttRun{c: c, target: redactURL(p.URL), expires: p.Expires, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		if err := c.Run(rctx); err != nil {
			t.log.Error("mqtt destination client ended", "err", err)
		}
	}()
	return r, nil
}

// subscribeCommands subscribes a platform client to the agent's command
// subtree, before it connects, so the first connection already has it.
func (t *mqttTransport) subscribeCommands(c *mqttx.Client) error {
	if t.typ != TypePlatform || t.onCommand == nil || t.prefix == "" {
		return nil
	}
	on := t.onCommand
	err := c.Subscribe(control.CommandFilter(t.prefix), t.b.qos(), func(ctx context.Context, m mqttx.Message) error {
		on(ctx, m.Topic, m.Payload)
		return nil // a command that fails is the dispatcher's to count, never redelivered
	})
	if err != nil {
		return fmt.Errorf("subscribe to the command subtree: %w", err)
	}
	return nil
}

// stopRun ends r's Run and disconnects it within ctx.
func (t *mqttTransport) stopRun(ctx context.Context, r *mqttRun) error {
	r.cancel()
	select {
	case <-r.done:
	case <-ctx.Done():
		return fmt.Errorf("stop mqtt destination client: %w", ctx.Err())
	}
	if err := r.c.Stop(ctx); err != nil {
		return fmt.Errorf("stop mqtt destination client: %w", err)
	}
	return nil
}

// Start implements Transport.
func (t *mqttTransport) Start(ctx context.Context) error {
	t.mu.Lock()
	if t.started || t.stopped {
		t.mu.Unlock()
		return errors.New("dest: Start called twice or after Stop")
	}
	t.started = true
	t.mu.Unlock()
	if t.notReady != "" {
		t.log.Warn("publish destination cannot connect", "reason", t.notReady)
		return nil
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	r, err := t.launch(ctx)
	t.mu.Lock()
	t.cur, t.cancel, t.done = r, cancel, done
	if err != nil {
		t.startErr = err.Error()
	}
	t.mu.Unlock()
	if err != nil {
		// TLS files that cannot be read now (a volume not mounted yet, a
		// certificate being rotated) may be readable later: the
		// destination stays not connected, so its worker queues, and the
		// start is retried instead of failing for good.
		t.log.Error("publish destination cannot start; retrying", "err", err)
		go func() {
			if t.retryStart(lctx) {
				t.renewLoop(lctx, done)
				return
			}
			close(done)
		}()
		return nil
	}
	go t.renewLoop(lctx, done)
	return nil
}

// retryStart launches the client with backoff until it starts or ctx
// ends, and reports whether it started.
func (t *mqttTransport) retryStart(ctx context.Context) bool {
	delay := time.Second
	for lifecycle.Sleep(ctx, delay) {
		r, err := t.launch(ctx)
		t.mu.Lock()
		if err == nil {
			t.cur, t.startErr = r, ""
		} else {
			t.startErr = err.Error()
		}
		t.mu.Unlock()
		if err == nil {
			t.log.Info("publish destination started after earlier failures")
			return true
		}
		delay = min(2*delay, 30*time.Second)
	}
	return false
}

// renewLoop replaces the client before its credentials expire. It stops
// the old client before the new one dials: brokers allow one connection
// per client id and would drop one of the two anyway. A Send on the old
// client meanwhile fails with ErrNotConnected and is retried by the
// caller, so no message counts as delivered without its PUBACK.
func (t *mqttTransport) renewLoop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		t.mu.Lock()
		r := t.cur
		t.mu.Unlock()
		if r == nil || r.expires.IsZero() {
			return
		}
		now := t.now()
		life := r.expires.Sub(now)
		wait := time.Duration(float64(life) * renewFraction)
		if !lifecycle.Sleep(ctx, wait) {
			return
		}
		t.renew(ctx, r)
	}
}

func (t *mqttTransport) renew(ctx context.Context, old *mqttRun) {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err := t.stopRun(sctx, old)
	cancel()
	if err != nil {
		t.log.Warn("stop mqtt destination client for credential renewal", "err", err)
	}
	for {
		r, err := t.launch(ctx)
		if err == nil {
			t.mu.Lock()
			t.cur = r
			t.mu.Unlock()
			t.log.Info("mqtt destination credentials renewed", "expires", r.expires)
			return
		}
		t.log.Error("renew mqtt destination credentials", "err", err, "retry_in", renewRetry)
		if !lifecycle.Sleep(ctx, renewRetry) {
			return
		}
	}
}

// Stop implements Transport.
func (t *mqttTransport) Stop(ctx context.Context) error {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return nil
	}
	t.stopped = true
	cancel, done := t.cancel, t.done
	t.mu.Unlock()
	var errs []error
	if cancel != nil {
		cancel()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, fmt.Errorf("credential renewal did not end: %w", ctx.Err()))
		}
	}
	t.mu.Lock()
	r := t.cur
	t.mu.Unlock()
	if r != nil {
		errs = append(errs, t.stopRun(ctx, r))
	}
	return errors.Join(errs...)
}

func (t *mqttTransport) run() *mqttRun {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.cur
}

// Connected implements Transport.
func (t *mqttTransport) Connected() bool {
	r := t.run()
	return r != nil && r.c.State() == mqttx.StateConnected
}

// Changes implements Transport.
func (t *mqttTransport) Changes() <-chan struct{} { return t.changes }

// Send implements Transport with mqttx's Send: published on the current
// connection only, acknowledged per packet.
func (t *mqttTransport) Send(ctx context.Context, msgs []Message) []error {
	errs := make([]error, len(msgs))
	r := t.run()
	if r == nil {
		reason := "not started"
		if t.notReady != "" {
			reason = t.notReady
		}
		for i := range errs {
			errs[i] = fmt.Errorf("%s: %w: %s", t.typ, ErrNotConnected, reason)
		}
		return errs
	}
	out := make([]mqttx.Outgoing, 0, len(msgs))
	idx := make([]int, 0, len(msgs)) // msgs index of each of out
	qos, limit := t.b.qos(), t.b.maxPayload()
	for i, m := range msgs {
		if limit > 0 && len(m.Payload) > limit {
			errs[i] = Rejectedf("%s: a payload of %d bytes is over the hub's limit of %d; use a smaller buffer size or a deflate compression", t.typ, len(m.Payload), limit)
			continue
		}
		out = append(out, mqttx.Outgoing{Topic: m.Topic, QoS: qos, Payload: m.Payload})
		idx = append(idx, i)
	}
	for j, err := range r.c.Send(ctx, out) {
		i := idx[j]
		switch {
		case err == nil:
		case errors.Is(err, mqttx.ErrNotConnected), errors.Is(err, mqttx.ErrNotDelivered), errors.Is(err, mqttx.ErrStopped):
			errs[i] = fmt.Errorf("%s: %w: %w", t.typ, ErrNotConnected, err)
		default:
			// What mqttx refuses before writing (an invalid topic) is the
			// message's fault: sending it again cannot help.
			errs[i] = &RejectedError{Reason: err.Error()}
		}
	}
	return errs
}

// ReportTopic is the topic of the agent report name on a platform
// destination ("" elsewhere, or before provisioning): reports are the
// platform's, not a third-party broker's.
func (t *mqttTransport) ReportTopic(name string) string {
	if t.typ != TypePlatform || t.prefix == "" {
		return ""
	}
	return control.ReportTopic(t.prefix, name)
}

// Topic implements Transport.
func (t *mqttTransport) Topic(routeTopic, endpointTopic string) string {
	if t.typ == TypePlatform {
		if t.prefix == "" {
			return "" // not provisioned: there is no topic yet
		}
		return t.prefix + "/endpoints/" + endpointTopic
	}
	if t.b == nil {
		return ""
	}
	if routeTopic == "" {
		routeTopic = t.b.canonicalTopic()
	}
	vars := map[string]string{"mqttTopic": endpointTopic}
	for k, v := range t.b.topicVars() {
		vars[k] = v
	}
	return expand(routeTopic, vars)
}

// Status implements Transport.
func (t *mqttTransport) Status() Status {
	s := Status{Type: t.typ}
	if t.notReady != "" {
		s.State, s.LastError = "not-provisioned", t.notReady
		return s
	}
	r := t.run()
	if r == nil {
		s.State = mqttx.StateStopped.String()
		t.mu.Lock()
		s.LastError = t.startErr
		t.mu.Unlock()
		return s
	}
	st := r.c.Stats()
	s.Connected = st.State == mqttx.StateConnected
	s.State = st.State.String()
	s.LastError = st.LastError
	s.Target = r.target
	s.ConnectedSince = st.ConnectedSince
	s.ReconnectAttempts = st.ReconnectAttempts
	s.CredentialsExpire = r.expires
	return s
}

var _ Transport = (*mqttTransport)(nil)
