package runner

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Connection states of an endpoint (docs/agent.md, section Connection
// states, outages and quality).
const (
	StateConnecting   = "CONNECTING"
	StateConnected    = "CONNECTED"
	StateDisconnected = "DISCONNECTED"
	StateError        = "ERROR"
)

const (
	// backoffMin and backoffMax bound the wait between connection
	// attempts; an outage costs one attempt per backoffMax at most.
	backoffMin = time.Second
	backoffMax = 30 * time.Second
	// opTimeout bounds one Connect or Poll beyond the adapter's own
	// per-request time-outs, so a wedged peer cannot stall the endpoint.
	opTimeout = 30 * time.Second
	// qualityWindow is how many recent polls communicationQuality covers.
	qualityWindow = 20
	// stableConnection is how long a connection must last before the
	// backoff starts again from backoffMin: a peer that accepts and then
	// fails at once (over its connection limit, refusing a subscription)
	// is retried ever more slowly, not every second.
	stableConnection = 10 * time.Second
	// maxTrackedPoints bounds the last values kept per endpoint: MQTT
	// frames name their own metrics, and a publisher with ever-new keys
	// must not grow the agent's memory.
	maxTrackedPoints = 1000
	// defaultPollInterval applies when an endpoint sets none (the admin
	// UI's default of 10 s).
	defaultPollInterval = 10 * time.Second
)

// endpointRun is one running endpoint: its goroutine and its live figures.
type endpointRun struct {
	ep      adapters.Endpoint
	adapter adapters.Adapter
	out     Output
	m       *metrics
	log     *slog.Logger

	cancel context.CancelFunc
	done   chan struct{}

	mu           sync.Mutex
	state        string
	lastSeen     time.Time // last GOOD reading
	lastPoll     time.Time
	lastError    string
	responseTime time.Duration
	outcomes     [qualityWindow]float64 // share of GOOD readings per poll
	nOutcomes    int
	points       map[string]adapters.Reading
	listening    bool
	started      time.Time
	polls        int64
	pollFailures int64
	readsGood    int64
	readsBad     int64
	latencySum   time.Duration
	latencyMax   time.Duration
	connectFails int64     // failed attempts since the last connection
	connectTotal int64     // failed attempts since the endpoint started
	losses       int64     // connections lost since the endpoint started
	connectedAt  time.Time // when the last connection was made
	untracked    int64     // readings of metrics beyond maxTrackedPoints
}

func newEndpointRun(ep adapters.Endpoint, a adapters.Adapter, out Output, m *metrics, log *slog.Logger) *endpointRun {
	e := &endpointRun{ep: ep, adapter: a, out: out, m: m, log: log, state: StateDisconnected,
		points: map[string]adapters.Reading{}, done: make(chan struct{})}
	// Whether the endpoint listens is decided by its configuration, once,
	// so its metrics do not depend on whether it has connected yet.
	if _, ok := a.(adapters.Listener); ok {
		e.listening = true
		if p, ok := a.(adapters.Pusher); ok {
			e.listening = p.Pushes()
		}
	}
	return e
}

func (e *endpointRun) start(base context.Context) {
	ctx, cancel := context.WithCancel(base)
	e.cancel = cancel
	e.mu.Lock()
	e.started = time.Now()
	e.mu.Unlock()
	go e.run(ctx)
}

func (e *endpointRun) stop() {
	e.cancel()
	<-e.done
}

func (e *endpointRun) interval() time.Duration {
	if e.ep.PollIntervalMS > 0 {
		return time.Duration(e.ep.PollIntervalMS) * time.Millisecond
	}
	return defaultPollInterval
}

func (e *endpointRun) run(ctx context.Context) {
	defer close(e.done)
	defer e.out.Stopped(e.ep)
	defer e.setState(StateDisconnected)
	b := newBackoff(backoffMin, backoffMax)
	for ctx.Err() == nil {
		e.setState(StateConnecting)
		cctx, cancel := context.WithTimeout(ctx, opTimeout)
		err := e.adapter.Connect(cctx)
		cancel()
		if err != nil {
			_ = e.adapter.Close()
			if ctx.Err() != nil {
				return
			}
			e.connectFailed(ctx, err)
			if !lifecycle.Sleep(ctx, b.Next()) {
				return
			}
			continue
		}
		e.m.reconnects.WithLabelValues(e.ep.Protocol, "ok").Inc()
		e.setState(StateConnected)
		e.log.Info("endpoint connected")
		connected := time.Now()
		err = e.serve(ctx)
		_ = e.adapter.Close()
		if ctx.Err() != nil {
			return
		}
		stable := time.Since(connected) >= stableConnection
		if stable {
			b.Reset()
		}
		e.lost(ctx, err, stable)
		if !lifecycle.Sleep(ctx, b.Next()) {
			return
		}
	}
}

// serve works one connection: listen when the adapter pushes, else poll
// every interval. It returns the error that ended the connection.
func (e *endpointRun) serve(ctx context.Context) error {
	if l, ok := e.adapter.(adapters.Listener); ok && e.isListening() {
		err := l.Listen(ctx, func(rs []adapters.Reading) { e.deliver(ctx, rs, 0) })
		if !errors.Is(err, adapters.ErrPollOnly) {
			if err == nil && ctx.Err() == nil {
				err = errors.New("listener ended without an error")
			}
			return err
		}
		// The adapter's configuration says poll after all.
		e.setListening(false)
	}
	t := time.NewTicker(e.interval())
	defer t.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, opTimeout)
		t0 := time.Now()
		rs, err := e.adapter.Poll(pctx)
		took := time.Since(t0)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		e.m.polls.WithLabelValues(e.ep.Protocol).Inc()
		e.m.pollTime.WithLabelValues(e.ep.Protocol).Observe(took.Seconds())
		e.deliver(ctx, rs, took)
		if err != nil {
			e.m.pollErrors.WithLabelValues(e.ep.Protocol).Inc()
			e.mu.Lock()
			e.pollFailures++
			e.mu.Unlock()
			return err
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// deliver records readings in the live figures and hands them on. took is
// the poll's duration, zero for pushed readings.
func (e *endpointRun) deliver(ctx context.Context, rs []adapters.Reading, took time.Duration) {
	if len(rs) == 0 && took == 0 {
		return
	}
	now := time.Now()
	good := 0
	e.mu.Lock()
	for _, r := range rs {
		if r.Quality == adapters.Good {
			good++
		} else if r.QualityCode != "" {
			e.lastError = r.QualityCode + ": data point " + r.Metric
		}
		key := pointKey(e.ep.Name, r)
		if _, ok := e.points[key]; !ok && len(e.points) >= maxTrackedPoints {
			e.untracked++
			continue
		}
		e.points[key] = r
	}
	if good > 0 {
		e.lastSeen = now
	}
	e.lastPoll = now
	if took > 0 {
		e.polls++
		e.responseTime = took
		e.latencySum += took
		e.latencyMax = max(e.latencyMax, took)
	}
	e.readsGood += int64(good)
	e.readsBad += int64(len(rs) - good)
	if len(rs) > 0 {
		e.outcomes[e.nOutcomes%qualityWindow] = float64(good) / float64(len(rs))
		e.nOutcomes++
	}
	e.mu.Unlock()
	e.m.readings.WithLabelValues(e.ep.Protocol, adapters.Good).Add(float64(good))
	e.m.readings.WithLabelValues(e.ep.Protocol, adapters.Bad).Add(float64(len(rs) - good))
	if len(rs) > 0 {
		e.out.Readings(ctx, e.ep, rs)
	}
}

// connectFailed reports a failed attempt as BAD readings of every data
// point, so consumers see the outage in the data and not only in health.
func (e *endpointRun) connectFailed(ctx context.Context, err error) {
	e.m.reconnects.WithLabelValues(e.ep.Protocol, "failed").Inc()
	code := adapters.Classify(err)
	e.mu.Lock()
	e.connectFails++
	e.connectTotal++
	first := e.connectFails == 1
	e.lastError = code + ": " + err.Error()
	e.mu.Unlock()
	state := StateDisconnected
	if code == adapters.CodeReadError || code == adapters.CodeBadData {
		state = StateError
	}
	e.setState(state)
	if first {
		e.log.Warn("endpoint connect failed", "code", code, "err", err)
	} else {
		e.log.Debug("endpoint connect failed", "code", code, "err", err)
	}
	if len(e.ep.DataPoints) == 0 {
		return
	}
	now := time.Now()
	rs := make([]adapters.Reading, len(e.ep.DataPoints))
	for i, dp := range e.ep.DataPoints {
		rs[i] = adapters.BadReading(e.ep.Name, e.ep.UUID, dp, now, err)
	}
	e.deliver(ctx, rs, 0)
}

// lost records a connection that ended. A listener's values simply stop
// arriving, so its data points get BAD readings here; a poll that failed
// has returned its own.
func (e *endpointRun) lost(ctx context.Context, err error, stable bool) {
	code := adapters.Classify(err)
	e.mu.Lock()
	if err != nil {
		e.lastError = code + ": " + err.Error()
	}
	e.connectFails = 0
	e.losses++
	first := e.losses == 1
	listening := e.listening
	e.mu.Unlock()
	e.setState(StateDisconnected)
	if stable || first {
		e.log.Warn("endpoint connection lost", "code", code, "err", err)
	} else {
		// A peer that drops every connection at once would flood the log.
		e.log.Debug("endpoint connection lost again", "code", code, "err", err)
	}
	if listening && len(e.ep.DataPoints) > 0 {
		now := time.Now()
		rs := make([]adapters.Reading, len(e.ep.DataPoints))
		for i, dp := range e.ep.DataPoints {
			rs[i] = adapters.BadReading(e.ep.Name, e.ep.UUID, dp, now, err)
		}
		e.deliver(ctx, rs, 0)
	}
	e.out.Disconnected(ctx, e.ep)
}

func (e *endpointRun) setState(s string) {
	e.mu.Lock()
	prev := e.state
	e.state = s
	if s == StateConnected && prev != StateConnected {
		e.connectedAt = time.Now()
	}
	e.mu.Unlock()
	if prev == StateConnected && s != StateConnected {
		e.m.connected.WithLabelValues(e.ep.Protocol).Dec()
	} else if prev != StateConnected && s == StateConnected {
		e.m.connected.WithLabelValues(e.ep.Protocol).Inc()
	}
}

func (e *endpointRun) isListening() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.listening
}

func (e *endpointRun) setListening(on bool) {
	e.mu.Lock()
	e.listening = on
	e.mu.Unlock()
}

// pointKey names a reading's entry among the endpoint's last values: the
// metric, prefixed by the device when a frame named another device than
// the endpoint (an MQTT topic carrying several devices).
func pointKey(endpoint string, r adapters.Reading) string {
	if r.DeviceName != "" && r.DeviceName != endpoint {
		return r.DeviceName + "/" + r.Metric
	}
	return r.Metric
}
