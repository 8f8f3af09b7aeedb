package api

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/api/jobs"
	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// live relays one agent's real-time values (the pub/sub channel the
// pipeline publishes each batch on) to dashboards as Server-Sent Events.
//
// It is a lifecycle service placed after the HTTP server, so it stops
// first: Stop ends every open stream, and the server's graceful shutdown
// does not sit out its grace period waiting for connections that never end
// by themselves.
type live struct {
	streams   streamstore.Store
	heartbeat time.Duration
	// writeTimeout bounds each write to a client.
	writeTimeout time.Duration
	max          int

	mu     sync.Mutex
	open   int
	done   chan struct{}
	closed bool

	gauge   prometheus.Gauge
	refused prometheus.Counter
	dropped prometheus.Counter
}

func newLive(streams streamstore.Store, max int, reg prometheus.Registerer) *live {
	l := &live{streams: streams, heartbeat: 15 * time.Second, writeTimeout: 30 * time.Second, max: max, done: make(chan struct{}),
		gauge: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_live_streams",
			Help: "Open Server-Sent Event streams of real-time device values."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_live_streams_refused_total",
			Help: "Live stream requests refused because the limit of open streams was reached."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_live_messages_dropped_total",
			Help: "Real-time messages dropped because a live stream's client read too slowly."}),
	}
	if reg != nil {
		reg.MustRegister(l.gauge, l.refused, l.dropped)
	}
	return l
}

func (l *live) Name() string                  { return "api-live" }
func (l *live) Start(context.Context) error   { return nil }
func (l *live) Run(ctx context.Context) error { <-ctx.Done(); return nil }

// Stop ends every open stream and refuses new ones.
func (l *live) Stop(context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		close(l.done)
	}
	return nil
}

func (l *live) acquire() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.open >= l.max {
		return false
	}
	l.open++
	l.gauge.Inc()
	return true
}

func (l *live) release() {
	l.mu.Lock()
	l.open--
	l.mu.Unlock()
	l.gauge.Dec()
}

// openStreams is the number of streams being served.
func (l *live) openStreams() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// stream serves GET /api/v1/agents/:uuid/stream. Each batch the agent
// sends arrives as one "metrics" event whose data is the JSON array of its
// decoded messages; a comment line every heartbeat keeps proxies from
// closing an idle connection. Delivery is best effort, like the channel:
// a client that reads too slowly loses messages rather than slowing the
// pipeline, and the loss is counted.
//
// The agent's status changes come on the same stream as "status" events
// (docs/agents-api.md, section Status events).
func (l *live) stream(c *gin.Context) {
	tenant, agent, ok := agentOf(c)
	if !ok {
		return
	}
	l.relay(c, map[string]string{telemetry.MetricsChannel(tenant, agent): "metrics", statusChannel(tenant, agent): "status"})
}

// tenantEvents serves GET /api/v1/agents/events: every status change of
// the caller's tenant's agents, as "status" events, for dashboards that
// show a whole fleet.
func (l *live) tenantEvents(c *gin.Context) {
	tenant, ok := tenantKey(c)
	if !ok {
		WriteError(c, http.StatusUnauthorized, "unauthorized", "no tenant in the credential")
		return
	}
	l.relay(c, map[string]string{tenantStatusChannel(tenant): "status", jobs.Channel(tenant): "job", fleetChannel(tenant): "fleet",
		anomaly.Channel(tenant): "anomaly"})
}

// relay streams what is published on channels as Server-Sent Events, each
// named by its channel's event name, until the client leaves, its
// credential ends or the service stops.
func (l *live) relay(c *gin.Context, channels map[string]string) {
	if !l.acquire() {
		l.refused.Inc()
		c.Header("Retry-After", "5")
		WriteError(c, http.StatusServiceUnavailable, "too_many_streams", "too many live streams are open; retry later")
		return
	}
	defer l.release()

	ctx := c.Request.Context()
	names := make([]string, 0, len(channels))
	for ch := range channels {
		names = append(names, ch)
	}
	sub, err := l.streams.Subscribe(ctx, names...)
	if err != nil {
		WriteError(c, http.StatusServiceUnavailable, "streamstore_unavailable", "cannot subscribe to the live events")
		return
	}
	defer sub.Close()

	w := c.Writer
	// The server has no write timeout (streams are long), so each write
	// gets its own deadline: a client that stops reading must not hold a
	// slot, a goroutine and a subscription, nor keep Stop waiting, for as
	// long as its socket buffers stay full.
	rc := http.NewResponseController(w)
	writeBy := func() { _ = rc.SetWriteDeadline(time.Now().Add(l.writeTimeout)) }
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	// The stream ends when the caller's credential does; the client
	// reconnects with a fresh one.
	var expired <-chan time.Time
	p, _ := principal(c)
	if !p.ExpiresAt.IsZero() {
		t := time.NewTimer(time.Until(p.ExpiresAt))
		defer t.Stop()
		expired = t.C
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	// nginx buffers responses unless told not to, which would hold events.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	writeBy()
	if _, err := w.WriteString(": connected\nretry: 3000\n\n"); err != nil {
		return
	}
	if rc.Flush() != nil {
		return
	}

	tick := time.NewTicker(l.heartbeat)
	defer tick.Stop()
	var reported uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-l.done:
			return
		case <-expired:
			writeBy()
			_ = writeEvent(w, "expired", []byte(`{"error":{"code":"token_expired","message":"the access token expired; reconnect with a new one"}}`))
			_ = rc.Flush()
			return
		case m, ok := <-sub.C():
			if !ok {
				return
			}
			if d := sub.Dropped(); d > reported {
				l.dropped.Add(float64(d - reported))
				reported = d
			}
			writeBy()
			event, known := channels[m.Channel]
			if !known {
				continue
			}
			if err := writeEvent(w, event, m.Payload); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		case <-tick.C:
			// The session is asked again at each heartbeat (a cached
			// answer, mostly), so a logout or a deactivation ends the
			// stream too. A check that fails for another reason (the
			// database) leaves the stream open.
			if p.Recheck != nil && errors.Is(p.Recheck(ctx), accounts.ErrSessionEnded) {
				writeBy()
				_ = writeEvent(w, "expired", []byte(`{"error":{"code":"session_ended","message":"the session of the access token ended; sign in again"}}`))
				_ = rc.Flush()
				return
			}
			writeBy()
			if _, err := w.WriteString(": keepalive\n\n"); err != nil {
				return
			}
			if rc.Flush() != nil {
				return
			}
		}
	}
}

// writeEvent writes one SSE event. JSON from json.Marshal has no raw
// newlines, but the split keeps the framing right for any payload.
func writeEvent(w gin.ResponseWriter, event string, data []byte) error {
	if _, err := w.WriteString("event: " + event + "\n"); err != nil {
		return err
	}
	for {
		line := data
		i := bytes.IndexByte(data, '\n')
		if i >= 0 {
			line, data = data[:i], data[i+1:]
		}
		if _, err := w.WriteString("data: "); err != nil {
			return err
		}
		if _, err := w.Write(line); err != nil {
			return err
		}
		if _, err := w.WriteString("\n"); err != nil {
			return err
		}
		if i < 0 {
			break
		}
	}
	_, err := w.WriteString("\n")
	return err
}
