package brokermon

import (
	"log/slog"
	"math"
	"net/http"
	"runtime"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Deps is what the routes need from the role.
type Deps struct {
	Monitor *Monitor
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// AdminGate is the admin rate limit, run after the admin check; nil
	// runs none.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
}

type handler struct {
	Deps
	reader func(*gin.Context) (accounts.Caller, bool)
}

// topTopics is how many topics the dashboard lists.
const topTopics = 10

// Register adds the /broker routes to protected, an /api/v1 group behind
// the credential check. The broker is shared by every tenant: its own
// figures (status, rates, totals, system) are for admins, as the licence's
// installation-wide usage is; the topic tree and the schemas are every
// user's, scoped to the topics under i/{their tenant}/.
func Register(protected gin.IRoutes, d Deps) {
	if d.Monitor == nil {
		panic("BUG: brokermon.Register without a Monitor")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{Deps: d, reader: accounts.RequireUser(d.Caller, d.WriteError)}
	admin := accounts.RequireAdmin(d.Caller, d.WriteError, d.AdminGate)
	protected.GET("/broker/status", admin, h.status)
	protected.GET("/broker/metrics", admin, h.figures(true, h.metricsBody))
	protected.GET("/broker/stats", admin, h.figures(false, h.statsBody))
	protected.GET("/broker/system-stats", admin, h.figures(false, h.systemBody))
	protected.GET("/broker/dashboard", h.dashboard)
	protected.GET("/broker/topics", h.topics)
	// A topic has slashes: the catch-all takes it whole, written as it is
	// or with %2F (docs/broker-monitoring.md, section Schemas).
	protected.GET("/broker/topics/*topic", h.schema)
}

// tenant returns the caller and the 22-character tenant id of its
// topics, or answers 401.
func (h *handler) tenant(c *gin.Context) (accounts.Caller, string, bool) {
	who, ok := h.reader(c)
	if !ok {
		return who, "", false
	}
	u, err := codec.ParseUUID(who.TenantUUID)
	if err != nil {
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "the credential names no tenant")
		return who, "", false
	}
	return who, codec.EncodeID(u), true
}

func (h *handler) status(c *gin.Context) { c.JSON(http.StatusOK, h.statusBody(h.Monitor.view())) }

// figures answers body of the broker's figures, or 503 while there are
// none (or, when rated, too few for a rate).
func (h *handler) figures(rated bool, body func(sysView) gin.H) gin.HandlerFunc {
	return func(c *gin.Context) {
		v := h.Monitor.view()
		if !v.seen || rated && !v.rated {
			h.unavailable(c)
			return
		}
		c.JSON(http.StatusOK, body(v))
	}
}

func (h *handler) unavailable(c *gin.Context) {
	msg := "no broker figures yet: they come every sys_interval from the broker's $SYS topics, which it may not offer to the API's user"
	if h.Monitor.poll != nil {
		msg = "no broker figures yet: the embedded broker is read every second"
	}
	h.WriteError(c, http.StatusServiceUnavailable, "broker_stats_unavailable", msg)
}

func (h *handler) statusBody(v sysView) gin.H {
	m := h.Monitor
	connected := m.opts.Connected()
	now := m.opts.Now()
	body := gin.H{"source": m.source(), "connected": connected, "statsAvailable": v.seen}
	// Figures older than three reporting intervals (a minute while the
	// interval is unknown) mean the broker stopped reporting.
	staleAfter := time.Minute
	if v.interval > 0 {
		staleAfter = max(3*v.interval, 5*time.Second)
	}
	stale := !v.seen || now.Sub(v.latest.At) > staleAfter
	switch {
	case !connected:
		body["status"] = "down"
	case stale:
		body["status"] = "degraded"
	default:
		body["status"] = "ok"
	}
	if v.seen {
		body["updatedAt"], body["stale"] = v.latest.At.UTC(), stale
		if v.latest.Version != "" {
			body["version"] = v.latest.Version
		}
		for _, name := range []string{UptimeSeconds, ClientsConnected, Subscriptions} {
			if x, ok := v.latest.Values[name]; ok {
				body[camel(name)] = x
			}
		}
	}
	return body
}

func (h *handler) metricsBody(v sysView) gin.H {
	per := gin.H{}
	for name, r := range v.rates.PerSec {
		per[camel(name)] = round(r)
	}
	body := gin.H{"source": h.Monitor.source(), "from": v.rates.From.UTC(), "to": v.rates.To.UTC(),
		"windowSeconds": round(v.rates.To.Sub(v.rates.From).Seconds()), "perSecond": per}
	if x, ok := v.latest.Values[ClientsConnected]; ok {
		body["clientsConnected"] = x
	}
	return body
}

func (h *handler) statsBody(v sysView) gin.H {
	m := h.Monitor
	totals, gauges := gin.H{}, gin.H{}
	for name, x := range v.latest.Values {
		switch {
		case name == platformMessages:
		case isCounter(name):
			totals[camel(name)] = x
		default:
			gauges[camel(name)] = x
		}
	}
	m.schemaMu.Lock()
	schemaTopics := len(m.schemas)
	m.schemaMu.Unlock()
	m.tree.mu.RLock()
	levels, tenants := m.tree.nodes, len(m.tree.tenants)
	m.tree.mu.RUnlock()
	return gin.H{"source": m.source(), "at": v.latest.At.UTC(), "totals": totals, "gauges": gauges,
		"platform": gin.H{
			"since":               m.started.UTC(),
			"messagesReceived":    m.tree.messages.Load(),
			"bytesReceived":       m.tree.bytes.Load(),
			"tenants":             tenants,
			"topicLevels":         levels,
			"messagesUntracked":   m.tree.refused.Load(),
			"schemaTopics":        schemaTopics,
			"schemaTopicsRefused": m.schemaRefused.Load(),
		}}
}

func (h *handler) systemBody(v sysView) gin.H {
	m := h.Monitor
	broker := gin.H{"at": v.latest.At.UTC()}
	if v.latest.Version != "" {
		broker["version"] = v.latest.Version
	}
	for _, name := range []string{UptimeSeconds, HeapCurrent, HeapMaximum, Threads} {
		if x, ok := v.latest.Values[name]; ok {
			broker[camel(name)] = x
		}
	}
	if v.raw != nil {
		load := gin.H{}
		for k, s := range v.raw {
			if rest, ok := strings.CutPrefix(k, sysLoad); ok {
				load[rest] = s
			}
		}
		broker["load"], broker["sys"] = load, v.raw
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	api := gin.H{"goroutines": runtime.NumGoroutine(), "heapAllocBytes": ms.HeapAlloc, "sysBytes": ms.Sys,
		"gomaxprocs": runtime.GOMAXPROCS(0), "uptimeSeconds": round(m.opts.Now().Sub(m.started).Seconds())}
	return gin.H{"source": m.source(), "broker": broker, "api": api}
}

func (h *handler) dashboard(c *gin.Context) {
	who, tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	root, levels, _ := h.Monitor.tree.subtree(tenant)
	body := gin.H{"topics": gin.H{"levels": levels, "messages": root.Messages, "top": orEmpty(leaves(root, topTopics))}}
	if who.Role == accounts.RoleAdmin {
		// The broker's own figures are installation-wide: admins only,
		// as on their routes.
		v := h.Monitor.view()
		body["status"] = h.statusBody(v)
		body["metrics"], body["stats"], body["systemStats"] = nil, nil, nil
		if v.rated {
			body["metrics"] = h.metricsBody(v)
		}
		if v.seen {
			body["stats"], body["systemStats"] = h.statsBody(v), h.systemBody(v)
		}
	}
	c.JSON(http.StatusOK, body)
}

func (h *handler) topics(c *gin.Context) {
	_, tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	root, levels, found := h.Monitor.tree.subtree(tenant)
	if !found {
		root = TopicNode{Name: "i/" + tenant, Topic: "i/" + tenant}
	}
	c.JSON(http.StatusOK, gin.H{"root": root.Topic, "levels": levels, "tree": root})
}

func (h *handler) schema(c *gin.Context) {
	_, tenant, ok := h.tenant(c)
	if !ok {
		return
	}
	topic, ok := strings.CutSuffix(strings.TrimPrefix(c.Param("topic"), "/"), "/schema")
	if !ok {
		h.WriteError(c, http.StatusNotFound, "not_found", "no such route: a topic's schema is /broker/topics/{topic}/schema")
		return
	}
	if topic == "" {
		h.WriteError(c, http.StatusBadRequest, "validation_failed", "topic: must name a topic, as i/{tenant}/a/{agent}/...")
		return
	}
	// Another tenant's topic and a topic never sampled get the same
	// answer.
	var doc map[string]any
	if strings.HasPrefix(topic, "i/"+tenant+"/") {
		doc, ok = h.Monitor.schema(topic)
	} else {
		ok = false
	}
	if !ok {
		h.WriteError(c, http.StatusNotFound, "not_found", "no samples of topic "+topic)
		return
	}
	c.JSON(http.StatusOK, gin.H{"topic": topic, "samples": doc["x-samples"], "schema": doc})
}

func isCounter(name string) bool {
	for _, c := range counters {
		if c == name {
			return true
		}
	}
	return false
}

// camel turns a figure name into its JSON key: publish_received →
// publishReceived.
func camel(name string) string {
	var b strings.Builder
	up := false
	for _, r := range name {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteString(strings.ToUpper(string(r)))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func round(f float64) float64 { return math.Round(f*1000) / 1000 }

func orEmpty(l []TopicNode) []TopicNode {
	if l == nil {
		return []TopicNode{}
	}
	return l
}
