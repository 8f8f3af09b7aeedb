package api

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// maxClockAgents bounds the agents whose clock counters are kept; past it,
// new agents are counted in the metric only. Far above any fleet one
// serve-api replica serves, far below what could exhaust memory.
const maxClockAgents = 100_000

// clockGuard holds agents' reading times to the acceptance window
// (api.clock_max_future, api.clock_max_past) on both write paths, MQTT
// telemetry and POST /readings, and keeps the count of skewed readings in
// a metric and per agent, where the agent's current state shows it.
type clockGuard struct {
	window envelope.ClockWindow
	now    func() time.Time
	// skewed counts readings outside the window by source (mqtt, http)
	// and direction: future readings are refused, past ones accepted.
	skewed *prometheus.CounterVec

	mu     sync.Mutex
	agents map[clockKey]*agentClock
}

type clockKey struct{ tenant, agent string }

// agentClock is what one agent's readings have shown of its clock since
// this replica started: the device health that GET
// /agents/:uuid/current-state reports as "clock".
type agentClock struct {
	FutureRefused    uint64     `json:"futureRefused"`
	PastAccepted     uint64     `json:"pastAccepted"`
	MaxAheadSeconds  float64    `json:"maxAheadSeconds"`
	MaxBehindSeconds float64    `json:"maxBehindSeconds"`
	LastFutureAt     *time.Time `json:"lastFutureAt,omitempty"`
	LastPastAt       *time.Time `json:"lastPastAt,omitempty"`
}

func newClockGuard(cfg config.API, reg prometheus.Registerer) *clockGuard {
	g := &clockGuard{
		window: envelope.ClockWindow{MaxFuture: cfg.ClockMaxFuture, MaxPast: cfg.ClockMaxPast},
		now:    time.Now,
		skewed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "edgeplat_api_readings_clock_skew_total",
			Help: "Readings whose time lay outside the acceptance window around their receive time, by source (mqtt, http) and direction: future (beyond api.clock_max_future, refused) or past (older than api.clock_max_past, accepted). On http, past readings count once stored; on mqtt a redelivered message (QoS 1) is counted again.",
		}, []string{"source", "direction"}),
		agents: map[clockKey]*agentClock{},
	}
	for _, src := range []string{"mqtt", "http"} {
		for _, dir := range []string{"future", "past"} {
			g.skewed.WithLabelValues(src, dir)
		}
	}
	if reg != nil {
		reg.MustRegister(g.skewed)
	}
	return g
}

// guard applies the window to an MQTT batch of tenant's agent received
// now, and reports whether readings are left to append.
func (g *clockGuard) guard(tenant, agent string, b *envelope.Batch) bool {
	now := g.now()
	if s := envelope.GuardClock(b, now, g.window); s.Any() {
		g.record("mqtt", tenant, agent, s, now)
	}
	return len(b.Messages) > 0
}

// record counts s, the skewed readings of tenant's agent received at now.
func (g *clockGuard) record(source, tenant, agent string, s envelope.Skew, now time.Time) {
	if !s.Any() {
		return
	}
	g.skewed.WithLabelValues(source, "future").Add(float64(s.Future))
	g.skewed.WithLabelValues(source, "past").Add(float64(s.Past))
	g.mu.Lock()
	defer g.mu.Unlock()
	k := clockKey{tenant, agent}
	a := g.agents[k]
	if a == nil {
		if len(g.agents) >= maxClockAgents {
			return
		}
		a = &agentClock{}
		g.agents[k] = a
	}
	at := now.UTC()
	if s.Future > 0 {
		a.FutureRefused += uint64(s.Future)
		a.MaxAheadSeconds = max(a.MaxAheadSeconds, s.Ahead.Seconds())
		a.LastFutureAt = &at
	}
	if s.Past > 0 {
		a.PastAccepted += uint64(s.Past)
		a.MaxBehindSeconds = max(a.MaxBehindSeconds, s.Behind.Seconds())
		a.LastPastAt = &at
	}
}

// report returns the clock counters of tenant's agent, false when none of
// its readings lay outside the window.
func (g *clockGuard) report(tenant, agent string) (agentClock, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, ok := g.agents[clockKey{tenant, agent}]
	if !ok {
		return agentClock{}, false
	}
	return *a, true
}
