package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// AuditUpdated is the audit event of a system config change; its detail
// holds each key's old and new value.
const AuditUpdated = "system_config.updated"

// maxBody caps a PUT: a handful of short keys and values.
const maxBody = 16 << 10

// Deps is what the package needs from the role.
type Deps struct {
	// Config is the system config service; Health the probes.
	Config *SystemConfig
	Health Probes
	// Caller is the request's authenticated user.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	// AdminGate is the admin rate limit, run after the role check.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

type handler struct {
	Deps
	errs *httpx.ErrorMap
}

// Register adds GET /admin/health and GET, PUT /admin/system-config to
// protected, an /api/v1 group behind the user credential check. All three
// are for admins: members get 403.
func Register(protected gin.IRoutes, d Deps) {
	if d.Config == nil || d.Caller == nil || d.WriteError == nil || d.Health.DB == nil || d.Health.Streams == nil {
		panic("BUG: admin.Register needs Config, Caller, WriteError and the database and stream store probes")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	h := &handler{Deps: d, errs: httpx.NewErrorMap(d.WriteError, d.Log, "admin request failed",
		httpx.Case(http.StatusBadRequest, "invalid_body", ErrInvalid))}
	admin := accounts.RequireAdmin(d.Caller, d.WriteError, d.AdminGate)
	protected.GET("/admin/health", admin, h.health)
	protected.GET("/admin/system-config", admin, h.getConfig)
	protected.PUT("/admin/system-config", admin, h.putConfig)
}

// getConfig serves GET /admin/system-config. It reads the table first,
// so any replica answers what is stored (and applies it).
func (h *handler) getConfig(c *gin.Context) {
	if err := h.Config.Refresh(c.Request.Context()); err != nil {
		h.unavailable(c, err)
		return
	}
	c.JSON(http.StatusOK, h.Config.View())
}

// putConfig serves PUT /admin/system-config: the named keys are stored
// (null resets one to its configured value), applied and audited with
// their old and new values.
func (h *handler) putConfig(c *gin.Context) {
	who, _ := h.Caller(c) // RequireAdmin let only a user through
	body, ok := httpx.ReadBody(c, maxBody, h.WriteError)
	if !ok {
		return
	}
	changes, err := DecodeChanges(body)
	if err != nil {
		h.errs.Fail(c, err)
		return
	}
	ups, err := h.Config.Put(c.Request.Context(), changes, who.UserID, h.Now())
	switch {
	case errors.Is(err, ErrInvalid), errors.Is(err, context.Canceled):
		h.errs.Fail(c, err)
		return
	case err != nil:
		h.unavailable(c, err)
		return
	}
	if h.Audit != nil {
		detail := map[string]any{}
		for _, u := range ups {
			detail[u.Key] = map[string]any{"old": u.Old, "new": u.New}
		}
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: AuditUpdated, Actor: who.UserID, ActorKind: "user",
			Target: "system-config", Detail: map[string]any{"changes": detail}})
	}
	c.JSON(http.StatusOK, h.Config.View())
}

func (h *handler) unavailable(c *gin.Context, err error) {
	h.Log.Error("system config unavailable", "err", err)
	h.WriteError(c, http.StatusServiceUnavailable, "database_unavailable", "the system config cannot be read or written now; retry")
}
