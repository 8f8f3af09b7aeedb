package extdash

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// AuditThresholdUpdated is the audit event of a threshold change; its
// detail holds the rule and the old and new values.
const AuditThresholdUpdated = "external_dashboards.threshold_updated"

// maxBody caps a threshold update: a uid and a number.
const maxBody = 4 << 10

// maxUIDLen is Grafana's longest rule uid.
const maxUIDLen = 40

// Deps is what the package needs from the role.
type Deps struct {
	// Grafana is the client; nil when api.grafana_url is not set, and
	// every route answers 503.
	Grafana *Client
	// Caller is the request's authenticated user.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	// AdminGate is the admin rate limit, run after the role check.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
}

type handler struct {
	Deps
	reader func(*gin.Context) (accounts.Caller, bool)
	errs   *httpx.ErrorMap
}

// errInvalid is a request body out of the rules; the message names the
// field.
var errInvalid = errors.New("invalid request")

// Register adds the /external-dashboards routes to protected, an /api/v1
// group behind the user credential check: the two lists for every user,
// the threshold update for admins.
func Register(protected gin.IRoutes, d Deps) {
	if d.Caller == nil || d.WriteError == nil {
		panic("BUG: extdash.Register needs Caller and WriteError")
	}
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{Deps: d, reader: accounts.RequireUser(d.Caller, d.WriteError),
		errs: httpx.NewErrorMap(d.WriteError, d.Log, "external dashboards request failed",
			httpx.Case(http.StatusBadRequest, "invalid_body", errInvalid),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrNoThreshold),
			httpx.Case(http.StatusBadGateway, "upstream_error", ErrUpstream))}
	protected.GET("/external-dashboards/dashboards", h.dashboards)
	protected.GET("/external-dashboards/alert-rules", h.alertRules)
	protected.POST("/external-dashboards/update-alert-threshold", accounts.RequireAdmin(d.Caller, d.WriteError, d.AdminGate), h.updateThreshold)
}

// configured answers 503 and false without a Grafana.
func (h *handler) configured(c *gin.Context) bool {
	if h.Grafana == nil {
		h.WriteError(c, http.StatusServiceUnavailable, "not_configured",
			"external dashboards are not configured: set api.grafana_url (GRAFANA_URL) and api.grafana_token (GRAFANA_TOKEN)")
		return false
	}
	return true
}

// fail logs an upstream failure once, then answers it.
func (h *handler) fail(c *gin.Context, err error) {
	if errors.Is(err, ErrUpstream) {
		h.Log.Warn("grafana request failed", "path", c.FullPath(), "err", err)
	}
	h.errs.Fail(c, err)
}

func (h *handler) dashboards(c *gin.Context) {
	if _, ok := h.reader(c); !ok || !h.configured(c) {
		return
	}
	ds, truncated, err := h.Grafana.Dashboards(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"dashboards": ds, "truncated": truncated})
}

func (h *handler) alertRules(c *gin.Context) {
	if _, ok := h.reader(c); !ok || !h.configured(c) {
		return
	}
	rules, err := h.Grafana.AlertRules(c.Request.Context())
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"alertRules": rules})
}

// ThresholdUpdate is the body of POST /update-alert-threshold.
type ThresholdUpdate struct {
	RuleUID   string   `json:"ruleUid"`
	Threshold *float64 `json:"threshold"`
}

// DecodeThresholdUpdate reads and checks an update body, naming the field
// at fault.
func DecodeThresholdUpdate(body []byte) (ThresholdUpdate, error) {
	var u ThresholdUpdate
	if err := httpx.DecodeStrict(body, &u); err != nil {
		return u, fmt.Errorf("%w: %v", errInvalid, err)
	}
	u.RuleUID = strings.TrimSpace(u.RuleUID)
	switch {
	case u.RuleUID == "":
		return u, fmt.Errorf("%w: ruleUid is required", errInvalid)
	case len(u.RuleUID) > maxUIDLen || strings.ContainsAny(u.RuleUID, "/?#%"):
		return u, fmt.Errorf("%w: ruleUid must be a Grafana rule uid (at most %d characters, no / ? # %%)", errInvalid, maxUIDLen)
	case u.Threshold == nil:
		return u, fmt.Errorf("%w: threshold is required", errInvalid)
	case math.IsNaN(*u.Threshold) || math.IsInf(*u.Threshold, 0):
		return u, fmt.Errorf("%w: threshold must be a finite number", errInvalid)
	}
	return u, nil
}

// updateThreshold serves POST /update-alert-threshold: the rule's
// one-value threshold is set in Grafana and the change audited.
func (h *handler) updateThreshold(c *gin.Context) {
	who, _ := h.Caller(c) // RequireAdmin let only a user through
	if !h.configured(c) {
		return
	}
	body, ok := httpx.ReadBody(c, maxBody, h.WriteError)
	if !ok {
		return
	}
	u, err := DecodeThresholdUpdate(body)
	if err != nil {
		h.errs.Fail(c, err)
		return
	}
	rule, old, err := h.Grafana.UpdateThreshold(c.Request.Context(), u.RuleUID, *u.Threshold)
	if err != nil {
		if !errors.Is(err, context.Canceled) && h.Audit != nil && errors.Is(err, ErrUpstream) {
			h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: AuditThresholdUpdated, Actor: who.UserID, ActorKind: "user",
				Target: u.RuleUID, Outcome: "failure", Detail: map[string]any{"new": *u.Threshold}})
		}
		h.fail(c, err)
		return
	}
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: AuditThresholdUpdated, Actor: who.UserID, ActorKind: "user",
			Target: u.RuleUID, Detail: map[string]any{"title": rule.Title, "old": old, "new": *u.Threshold}})
	}
	c.JSON(http.StatusOK, gin.H{"alertRule": rule, "previousThreshold": old})
}
