package licence

import (
	"context"
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// Usage is what the deployment uses of its licence, as the agent registry
// counts it.
type Usage struct {
	// Agents is the number of registered agents.
	Agents int
}

// UsageReport is the usage answer: what is used against what the licence
// allows.
type UsageReport struct {
	State     string `json:"state"`
	Agents    int    `json:"agents"`
	MaxAgents int    `json:"maxAgents"`
	// AgentsRemaining is null when agents are unlimited, 0 when restricted.
	AgentsRemaining *int `json:"agentsRemaining"`
	// Features are the features in effect: none while restricted.
	Features []string `json:"features"`
}

// licenceResponse is GET /license: the status with the usage when the
// registry could count it.
type licenceResponse struct {
	Status
	Usage *UsageReport `json:"usage,omitempty"`
}

// Routes adds the licence endpoints to g, the authenticated /api/v1 group:
// GET /license (status and usage), POST /billing/refresh-license (reload
// the licence, admin only) and GET /billing/usage. usage counts what the
// licence limits; adminOnly guards the reload; write renders errors.
func (m *Manager) Routes(g *gin.RouterGroup, usage func(ctx context.Context) (Usage, error), adminOnly gin.HandlerFunc, write httpx.ErrorWriter) {
	if usage == nil || adminOnly == nil || write == nil {
		panic("BUG: licence Routes needs usage, adminOnly and write")
	}
	h := &handler{m: m, usage: usage, write: write}
	g.GET("/license", h.licence)
	g.POST("/billing/refresh-license", adminOnly, h.refresh)
	g.GET("/billing/usage", h.usageReport)
}

type handler struct {
	m     *Manager
	usage func(ctx context.Context) (Usage, error)
	write httpx.ErrorWriter
}

func (h *handler) licence(c *gin.Context) {
	st := h.m.Status()
	resp := licenceResponse{Status: st}
	// The licence status lives in memory and stays worth showing when the
	// registry's database is down, so a failed count only drops usage.
	if u, err := h.usage(c.Request.Context()); err == nil {
		r := report(st, u)
		resp.Usage = &r
	} else {
		h.m.log.WarnContext(c.Request.Context(), "count agents for the licence status", "err", err)
	}
	c.JSON(http.StatusOK, resp)
}

func (h *handler) refresh(c *gin.Context) {
	st := h.m.Load(c.Request.Context())
	h.m.logOutcome(c.Request.Context(), st)
	c.JSON(http.StatusOK, st)
}

func (h *handler) usageReport(c *gin.Context) {
	u, err := h.usage(c.Request.Context())
	if err != nil {
		h.m.log.WarnContext(c.Request.Context(), "count agents for the licence usage", "err", err)
		h.write(c, http.StatusServiceUnavailable, "usage_unavailable", "agent usage cannot be counted right now")
		return
	}
	c.JSON(http.StatusOK, report(h.m.Status(), u))
}

func report(st Status, u Usage) UsageReport {
	r := UsageReport{State: st.State, Agents: u.Agents, MaxAgents: st.MaxAgents, Features: []string{}}
	if !st.Valid() {
		zero := 0
		r.AgentsRemaining = &zero
		return r
	}
	r.Features = st.Features
	if st.MaxAgents > 0 {
		left := max(st.MaxAgents-u.Agents, 0)
		r.AgentsRemaining = &left
	}
	return r
}

// RequireFeature returns middleware that lets a request through only when
// the licence grants feature, for the routes of premium features.
func (m *Manager) RequireFeature(feature string, write httpx.ErrorWriter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if err := m.CheckFeature(feature); err != nil {
			WriteError(c, write, err)
			return
		}
		c.Next()
	}
}

// WriteError answers a CheckRegistration or CheckFeature error in the
// role's error shape. Anything that is not an *Error is a 500.
func WriteError(c *gin.Context, write httpx.ErrorWriter, err error) {
	var le *Error
	if errors.As(err, &le) {
		write(c, le.HTTPStatus(), le.Code, le.Message)
	} else {
		write(c, http.StatusInternalServerError, "internal", "internal error")
	}
	c.Abort()
}

var _ httpx.CodedError = (*Error)(nil)
