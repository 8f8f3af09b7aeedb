package readings

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

// Deps is what the endpoints need from the API role.
type Deps struct {
	// DB is the cloud database, open before the routes serve.
	DB *db.DB
	// Tenant returns the caller's tenant id as the readings table stores
	// it, set by the authentication middleware; false makes the handler
	// answer 401. The tenant never comes from the request itself.
	Tenant func(*gin.Context) (string, bool)
	// WriteError renders the API's error shape.
	WriteError httpx.ErrorWriter
	// Limits bound queries; zero fields take query.DefaultLimits.
	Limits query.Limits
	// Now is the clock for default time ranges and inserted readings
	// without a time; time.Now when nil.
	Now func() time.Time
	// Log receives database failures; discarded when nil.
	Log *slog.Logger
	// AgentRegistered returns which of agents (canonical lowercase UUIDs,
	// each once) are in the agent registry of the caller's tenant, the
	// others being absent or false. POST /readings writes only for such
	// agents: ownership comes from the registry, never from the readings
	// already stored, which anyone could have written first. It is called
	// once per request with every agent of the body, so that a batch of
	// many agents costs one lookup, not one per agent.
	AgentRegistered func(c *gin.Context, agents []string) (map[string]bool, error)
	// Clock is the acceptance window of the times of POST /readings:
	// readings beyond Clock.MaxFuture after now are refused, those older
	// than Clock.MaxPast accepted; both are reported to ClockSkew, when
	// set, by tenant and agent. The zero window bounds nothing.
	Clock     envelope.ClockWindow
	ClockSkew func(tenant, agent string, s envelope.Skew, now time.Time)
	// AgentGuard, when set, runs before the routes that name an agent
	// (:agent_uuid) and answers 404 for an agent the caller's tenant does
	// not have, so another tenant's agent looks like no agent at all.
	AgentGuard gin.HandlerFunc
}

// Register adds the telemetry endpoints to g, the /api/v1 group, whose
// middleware has authenticated the caller.
func Register(g *gin.RouterGroup, d Deps) {
	if d.DB == nil || d.Tenant == nil || d.WriteError == nil || d.AgentRegistered == nil {
		panic("BUG: readings.Register needs DB, Tenant, WriteError and AgentRegistered")
	}
	h := &handler{Deps: d, lim: d.Limits.WithDefaults()}
	if h.Now == nil {
		h.Now = time.Now
	}
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	g.GET("/readings/latest", h.latest)
	g.GET("/readings/catalog", h.catalog)
	g.GET("/readings/hourly", h.hourly)
	g.GET("/readings/daily", h.daily)
	g.POST("/readings/query", h.query)
	guard := d.AgentGuard
	if guard == nil {
		guard = func(c *gin.Context) { c.Next() }
	}
	g.GET("/readings/:agent_uuid/latest", guard, h.agentLatest)
	g.GET("/readings/:agent_uuid/timeseries", guard, h.timeseries)
	g.GET("/readings/:agent_uuid/aggregate", guard, h.aggregate)
	g.POST("/readings", h.insert)
	g.GET("/metrics", h.metricNames)
	g.GET("/profiles", h.profiles)
}

type handler struct {
	Deps
	lim query.Limits
}

// tenant returns the caller's tenant, or answers 401 and false.
func (h *handler) tenant(c *gin.Context) (string, bool) {
	t, ok := h.Tenant(c)
	if !ok || t == "" {
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "no authenticated tenant")
		return "", false
	}
	return t, true
}

// limitError is a cap a request exceeds: past it the whole request fails
// rather than returning a truncated answer that looks complete. msg is
// worded like the query package's *query.LimitError.
type limitError struct{ msg string }

func (e *limitError) Error() string { return e.msg }

// fail answers err: 400 for a bad parameter, 422 for a limit, 499 when the
// client has gone, and 503 for anything else, which is a database failure
// (logged; the client learns nothing about the SQL).
func (h *handler) fail(c *gin.Context, op string, err error) {
	var pe *paramError
	var le *limitError
	var qle *query.LimitError
	switch {
	case errors.As(err, &pe):
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", pe.msg)
	case errors.As(err, &le):
		h.WriteError(c, http.StatusUnprocessableEntity, "limit_exceeded", le.msg)
	case errors.As(err, &qle):
		h.WriteError(c, http.StatusUnprocessableEntity, "limit_exceeded", qle.Error())
	case errors.Is(err, context.Canceled) || httpx.ClientGone(c):
		// The client went away and its query was cancelled with it:
		// nothing is wrong with the database.
		h.Log.Debug("readings request abandoned by its client", "op", op, "route", c.FullPath(), "err", err)
		h.WriteError(c, httpx.StatusClientClosedRequest, "client_closed_request", "the client closed the request")
	default:
		h.Log.Warn("readings query failed", "op", op, "route", c.FullPath(), "err", err)
		h.WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the database is not available; try again later")
	}
}
