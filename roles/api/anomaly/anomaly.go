package anomaly

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// Audit event kinds of the writes.
const (
	AuditRuleCreated     = "anomaly_rule.created"
	AuditRuleUpdated     = "anomaly_rule.updated"
	AuditRuleDeleted     = "anomaly_rule.deleted"
	AuditIncidentResolve = "anomaly_incident.resolved"
	AuditAlertCreated    = "anomaly_alert_rule.created"
	AuditAlertUpdated    = "anomaly_alert_rule.updated"
)

// maxBody caps a request body: a rule or an alert rule is under a
// kilobyte.
const maxBody = 16 << 10

// writerRoles may change rules and resolve incidents; alert rules, which
// send data out of the platform, are for admins.
var writerRoles = []string{accounts.RoleAdmin, accounts.RoleMember}

// Mailer sends an e-mail (the role's SMTP mailer).
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// Publisher publishes on a pub/sub channel (the stream store).
type Publisher interface {
	Publish(ctx context.Context, channel string, payload []byte) error
}

// Deps is what the package needs from the role.
type Deps struct {
	DB *db.DB
	// Caller is the request's authenticated user; the tenant comes from
	// it, never from the request.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	// Feature reports whether the licence grants a feature (nil when it
	// does, as licence.Manager.CheckFeature); nil grants every feature.
	Feature func(name string) error
	// AdminGate is the admin rate limit for the alert-rule writes; nil
	// is none.
	AdminGate gin.HandlerFunc
	// AgentGuard answers 404 for an agent (path parameter uuid) that is
	// not the caller's tenant's.
	AgentGuard gin.HandlerFunc
	Mailer     Mailer
	Streams    Publisher
	Registerer prometheus.Registerer
	Log        *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Anomaly is the capability: its routes, its evaluator and its alert
// dispatcher.
type Anomaly struct {
	d        *Deps
	s        *store
	m        *metrics
	eval     *Evaluator
	dispatch *Dispatcher
}

// New builds the capability without I/O.
func New(d Deps) *Anomaly {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	x := &Anomaly{d: &d, s: &store{db: d.DB, now: d.Now}, m: newMetrics(d.Registerer)}
	x.dispatch = newDispatcher(x.s, x.d, x.m)
	x.eval = newEvaluator(x.s, x.d, x.dispatch, x.m)
	return x
}

// Services are the capability's lifecycle services, the evaluator and the
// alert dispatcher. Notifications still queued when the role stops are
// dropped: delivery is at most once per replica, and a firing rule's
// incident stays open (and listed) however its notification fared.
func (x *Anomaly) Services() []lifecycle.Service { return []lifecycle.Service{x.eval, x.dispatch} }

// Observe hands a publish's messages to the evaluator (Evaluator.Observe).
func (x *Anomaly) Observe(tenantKey string, msgs []telemetry.Message) {
	x.eval.Observe(tenantKey, msgs)
}

// CreateRule validates and stores a rule of tenant (a tenant UUID), as POST
// /anomaly/rules does, for callers without a request (the ingest bench).
func (x *Anomaly) CreateRule(ctx context.Context, tenant string, in RuleInput) (Rule, error) {
	if in.Type == TypeCorrelation && x.d.Feature != nil {
		if err := x.d.Feature(licence.FeatureCorrelationRules); err != nil {
			return Rule{}, err
		}
	}
	r, err := in.normalize()
	if err == nil {
		err = x.s.checkScope(ctx, tenant, r.Scope)
	}
	if err == nil {
		r, err = x.s.createRule(ctx, tenant, r)
	}
	if err != nil {
		return Rule{}, err
	}
	x.eval.Changed()
	return r, nil
}

// Backlog is the number of batches waiting for the evaluator.
func (x *Anomaly) Backlog() int { return len(x.eval.in) }

type handler struct {
	*Deps
	x *Anomaly
	s *store
	// reader returns the request's user, or answers 401.
	reader func(*gin.Context) (accounts.Caller, bool)
	errs   *httpx.ErrorMap
}

// Register adds the anomaly routes to protected, the /api/v1 group behind
// the credential check.
func (x *Anomaly) Register(protected gin.IRoutes) {
	h := &handler{Deps: x.d, x: x, s: x.s, reader: accounts.RequireUser(x.d.Caller, x.d.WriteError),
		errs: httpx.NewErrorMap(x.d.WriteError, x.d.Log, "anomaly request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict))}
	admin := accounts.RequireAdmin(h.Caller, h.WriteError, h.AdminGate)
	writer := accounts.RequireRole(h.Caller, h.WriteError, "anomaly rules and incidents", writerRoles...)
	protected.GET("/anomaly/summary", h.summary)
	protected.GET("/anomaly/hourly", h.hourly)
	protected.GET("/anomaly/daily", h.daily)
	protected.GET("/anomaly/top-metrics", h.topMetrics)
	protected.GET("/anomaly-alerts", h.activeAlerts)
	protected.GET("/anomaly-incidents", h.listIncidents)
	protected.PATCH("/anomaly-incidents/:incidentId/resolve", writer, h.resolve)
	protected.GET("/anomaly/rules", h.listRules)
	protected.POST("/anomaly/rules", writer, h.createRule)
	protected.PUT("/anomaly/rules/:id", writer, h.updateRule)
	protected.DELETE("/anomaly/rules/:id", writer, h.deleteRule)
	protected.GET("/anomaly/incidents", h.listIncidents)
	protected.GET("/anomaly/incidents/:id", h.getIncident)
	protected.GET("/anomaly/alerts", h.listAlerts)
	protected.POST("/anomaly/alerts", admin, h.createAlert)
	protected.PUT("/anomaly/alerts/:id", admin, h.updateAlert)
	guard := x.d.AgentGuard
	if guard == nil {
		guard = func(c *gin.Context) { c.Next() }
	}
	protected.GET("/agents/:uuid/events", guard, h.agentEvents)
}

// fail answers err; a licence refusal (a *licence.Error) answers for
// itself.
func (h *handler) fail(c *gin.Context, err error) { h.errs.Fail(c, err) }

func (h *handler) audit(c *gin.Context, who accounts.Caller, kind, target string, detail map[string]any) {
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: kind, Actor: who.UserID, ActorKind: "user", Target: target, Detail: detail})
	}
}

// --- rules ---

func (h *handler) listRules(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	list, err := h.s.rules(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"rules": list})
}

func (h *handler) createRule(c *gin.Context) { h.saveRule(c, "") }

func (h *handler) updateRule(c *gin.Context) { h.saveRule(c, c.Param("id")) }

func (h *handler) saveRule(c *gin.Context, id string) {
	who, _ := h.Caller(c)
	var in RuleInput
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	ctx := c.Request.Context()
	if id != "" {
		if _, err := h.s.rule(ctx, who.TenantUUID, id); err != nil {
			h.fail(c, err)
			return
		}
	}
	// A correlation rule is a premium feature: refused before its body is
	// judged, so the answer says what is missing (docs/licence.md).
	if in.Type == TypeCorrelation && h.Feature != nil {
		if err := h.Feature(licence.FeatureCorrelationRules); err != nil {
			h.fail(c, err)
			return
		}
	}
	r, err := in.normalize()
	if err == nil {
		err = h.s.checkScope(ctx, who.TenantUUID, r.Scope)
	}
	if err == nil {
		if id == "" {
			r, err = h.s.createRule(ctx, who.TenantUUID, r)
		} else {
			r, err = h.s.updateRule(ctx, who.TenantUUID, id, r)
		}
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	h.x.eval.Changed()
	kind, status := AuditRuleCreated, http.StatusCreated
	if id != "" {
		kind, status = AuditRuleUpdated, http.StatusOK
	}
	h.audit(c, who, kind, r.ID, map[string]any{"name": r.Name, "type": r.Type})
	c.JSON(status, r)
}

func (h *handler) deleteRule(c *gin.Context) {
	who, _ := h.Caller(c)
	if err := h.s.deleteRule(c.Request.Context(), who.TenantUUID, c.Param("id")); err != nil {
		h.fail(c, err)
		return
	}
	h.x.eval.Changed()
	h.audit(c, who, AuditRuleDeleted, c.Param("id"), nil)
	c.Status(http.StatusNoContent)
}

// --- incidents ---

// Incident paging.
const (
	DefaultIncidentLimit = 100
	MaxIncidentLimit     = 1000
)

// listIncidents serves GET /anomaly/incidents and /anomaly-incidents:
// newest first, filtered by status (open, closed), ruleId, agentUuid and
// since.
func (h *handler) listIncidents(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	f := incidentFilter{tenant: who.TenantUUID, status: c.Query("status"), limit: DefaultIncidentLimit}
	if f.status != "" && f.status != "open" && f.status != "closed" {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "status must be open or closed, got "+quote(f.status))
		return
	}
	for _, p := range []struct {
		name string
		dst  *string
	}{{"ruleId", &f.rule}, {"agentUuid", &f.agent}} {
		if v := c.Query(p.name); v != "" {
			u, err := parseUUID(v)
			if err != nil {
				h.WriteError(c, http.StatusBadRequest, "invalid_parameter", p.name+" must be a hyphenated UUID, got "+quote(v))
				return
			}
			*p.dst = u
		}
	}
	if !h.pageParams(c, &f.since, &f.limit, MaxIncidentLimit) {
		return
	}
	list, err := h.s.incidents(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"incidents": list})
}

func (h *handler) getIncident(c *gin.Context) {
	who, ok := h.reader(c)
	if !ok {
		return
	}
	inc, err := h.s.incident(c.Request.Context(), who.TenantUUID, c.Param("id"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, inc)
}

// resolve serves PATCH /anomaly-incidents/:incidentId/resolve: closes an
// open incident by hand (409 when it is closed already).
func (h *handler) resolve(c *gin.Context) {
	who, _ := h.Caller(c)
	inc, err := h.s.resolveIncident(c.Request.Context(), who.TenantUUID, c.Param("incidentId"), who.UserID)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.x.dispatch.Incident(inc, "resolved")
	h.audit(c, who, AuditIncidentResolve, inc.ID, map[string]any{"ruleId": inc.RuleID, "metric": inc.Metric})
	c.JSON(http.StatusOK, inc)
}

func parseUUID(s string) (string, error) {
	u, err := codec.ParseUUID(s)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

// --- metrics ---

type metrics struct {
	batches       *prometheus.CounterVec
	incidents     *prometheus.CounterVec
	deliveries    *prometheus.CounterVec
	events        *prometheus.CounterVec
	rules         prometheus.Gauge
	series        prometheus.Gauge
	samples       prometheus.Gauge
	seriesDropped prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_anomaly_batches_total",
			Help: "Telemetry batches handed to the anomaly evaluator, by outcome (evaluated, dropped: its queue was full)."}, []string{"outcome"}),
		incidents: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_anomaly_incidents_total",
			Help: "Anomaly incidents the evaluator opened and closed on recovery, by event (opened, recovered)."}, []string{"event"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_anomaly_alert_deliveries_total",
			Help: "Alert notifications by target type and outcome (delivered, retried, failed, dropped)."}, []string{"target", "outcome"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "edgeplat_api_agent_events_total",
			Help: "Agent events received, by outcome (stored, repeat_or_unknown_agent, invalid)."}, []string{"outcome"}),
		rules: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_anomaly_rules",
			Help: "Anomaly rules the evaluator runs."}),
		series: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_anomaly_series",
			Help: "Series (rule, agent and metric) the evaluator keeps a window or state for."}),
		samples: prometheus.NewGauge(prometheus.GaugeOpts{Name: "edgeplat_api_anomaly_window_samples",
			Help: "Samples the evaluator's windows hold together, at most 8 Mi (16 bytes each)."}),
		seriesDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "edgeplat_api_anomaly_series_dropped_total",
			Help: "Readings not evaluated because the evaluator tracks as many series as it may."}),
	}
	if reg != nil {
		reg.MustRegister(m.batches, m.incidents, m.deliveries, m.events, m.rules, m.series, m.samples, m.seriesDropped)
	}
	return m
}
