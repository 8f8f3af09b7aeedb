// Package broker runs an embedded MQTT broker (mochi-mqtt) as a lifecycle
// service, so all-in-one needs no external broker. Agents and the Cloud API
// connect to it like to any broker.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
	"github.com/edgeplat/edgeplat/core/rt"
	mqtt "github.com/mochi-mqtt/server/v2"
	"github.com/mochi-mqtt/server/v2/hooks/auth"
	"github.com/mochi-mqtt/server/v2/listeners"
)

// Options configures the embedded broker.
type Options struct {
	Bind string
	Port int
	// PortHint names the flag that changes Port, for the port-in-use error.
	PortHint string
	// Auth, when set, decides connects and topic access (auth.go); nil
	// accepts every client, for a broker reachable only from loopback.
	Auth *brokerauth.Authorizer
	// Limits bound packets, connects and per-client queues (limits.go);
	// zero fields take DefaultLimits.
	Limits Limits
	// now is the log rate limiter's clock; tests set it.
	now func() time.Time
}

// Broker is the embedded broker service.
type Broker struct {
	opts   Options
	log    *slog.Logger
	rt     *rt.Runtime
	server *mqtt.Server
	guard  *connectGuard
	addr   string
	closed atomic.Bool
}

// New validates opts; it does no I/O.
func New(opts Options, r *rt.Runtime) (*Broker, error) {
	if opts.Port < 0 || opts.Port > 65535 {
		return nil, fmt.Errorf("broker port must be 0..65535, got %d", opts.Port)
	}
	if net.ParseIP(opts.Bind) == nil {
		return nil, fmt.Errorf("broker bind address must be an IP, got %q", opts.Bind)
	}
	lim, err := opts.Limits.withDefaults()
	if err != nil {
		return nil, err
	}
	opts.Limits = lim
	return &Broker{opts: opts, rt: r, log: r.Component("mqtt-broker")}, nil
}

// Name implements lifecycle.Service.
func (b *Broker) Name() string { return "mqtt-broker" }

// Addr is the listener's address once started.
func (b *Broker) Addr() string { return b.addr }

// Start implements lifecycle.Service: it binds the TCP listener.
func (b *Broker) Start(ctx context.Context) error {
	addr := net.JoinHostPort(b.opts.Bind, strconv.Itoa(b.opts.Port))
	// Bind ourselves and hand mochi the listener: the error for a taken port
	// then names the flag that changes it, and port 0 works in tests.
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return httpx.ListenError(addr, b.opts.PortHint, err)
	}
	b.addr = ln.Addr().String()

	// mochi logs every hook and listener at Info; keep that to Debug runs.
	// Its warnings go through mochiLog, which keeps payloads out of the log.
	mlog := newMochiLog(logging.AtLeast(b.log, slog.LevelWarn).Handler(), b.log.Handler(), &b.closed, b.opts.now)
	server := mqtt.New(&mqtt.Options{
		InlineClient: false,
		Logger:       slog.New(mlog),
		Capabilities: b.opts.Limits.capabilities(),
	})
	// Without an Authorizer the embedded broker accepts every client; it
	// listens on loopback by default for that reason.
	var hook mqtt.Hook = new(auth.AllowHook)
	authMode := "anonymous allowed"
	if b.opts.Auth != nil {
		hook, authMode = newAuthHook(b.opts.Auth), "edgeplat"
	}
	if err := server.AddHook(hook, nil); err != nil {
		_ = ln.Close()
		return fmt.Errorf("add broker auth hook: %w", err)
	}
	guarded := newConnectGuard(ln, b.opts.Limits.ConnectTimeout)
	if err := server.AddListener(listeners.NewNet("tcp", guarded)); err != nil {
		_ = ln.Close()
		return fmt.Errorf("add broker listener %s: %w", b.addr, err)
	}
	if err := server.Serve(); err != nil {
		_ = server.Close()
		return fmt.Errorf("start broker: %w", err)
	}
	b.server, b.guard = server, guarded
	b.rt.Health.Register("mqtt-broker", b.check)
	b.log.Info("mqtt broker listening", "addr", b.addr, "auth", authMode,
		"max_packet_bytes", b.opts.Limits.MaxPacketBytes, "connect_timeout", b.opts.Limits.ConnectTimeout)
	return nil
}

// check reports the in-process broker's state. Dialling it instead would
// make the broker log a dropped connection on every probe.
func (b *Broker) check(context.Context) error {
	if b.closed.Load() {
		return errors.New("broker is stopped")
	}
	return nil
}

// Run implements lifecycle.Service.
func (b *Broker) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}

// Stop implements lifecycle.Service.
func (b *Broker) Stop(ctx context.Context) error {
	// mochi's Close panics when called twice.
	if b.server == nil || !b.closed.CompareAndSwap(false, true) {
		return nil
	}
	if err := b.guard.quiesce(ctx); err != nil {
		// Closing now risks mochi's own race (see connectGuard), but a
		// broker left open would be worse.
		b.log.Warn("closing the broker while connections still attach", "err", err)
	}
	done := make(chan error, 1)
	go func() { done <- b.server.Close() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("close broker: %w", err)
		}
		return nil
	case <-ctx.Done():
		return errors.New("broker did not close within the grace period")
	}
}

var _ lifecycle.Service = (*Broker)(nil)
