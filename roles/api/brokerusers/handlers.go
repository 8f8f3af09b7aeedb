package brokerusers

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Deps is what the handlers need from the role.
type Deps struct {
	Store *Store
	// Caller returns the request's authenticated user; false for a
	// request without one.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; nil records
	// nothing.
	Audit func(*gin.Context, accounts.Event)
	// Invalidate is called with a username whose rules, password or
	// existence changed, so the broker's authorizer drops what it cached
	// for it (brokerauth.Authorizer.Invalidate). Required: without it a
	// deleted user could connect until the cache expires.
	Invalidate func(username string)
	// AdminGate runs after the admin check (the admin rate limit); nil
	// runs nothing.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
}

// Audit event kinds of this package.
const (
	AuditBrokerUserCreated = "broker_user.created"
	AuditBrokerUserUpdated = "broker_user.updated"
	AuditBrokerUserDeleted = "broker_user.deleted"
)

// maxBody caps a request body: up to MaxRules patterns of at most 512
// bytes each, with their JSON.
const maxBody = 64 << 10

type handler struct {
	Deps
	adminOnly gin.HandlerFunc
	errs      *httpx.ErrorMap
}

// Register adds the admin routes for broker users to protected (the
// /api/v1 group behind a user's credential). Every route is for the
// tenant's admins. It panics when a required dependency is missing.
func Register(protected gin.IRoutes, deps Deps) {
	if deps.Store == nil || deps.Caller == nil || deps.WriteError == nil || deps.Invalidate == nil {
		panic("BUG: brokerusers.Register needs Store, Caller, WriteError and Invalidate")
	}
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	h := &handler{Deps: deps, adminOnly: accounts.RequireAdmin(deps.Caller, deps.WriteError, deps.AdminGate),
		errs: httpx.NewErrorMap(deps.WriteError, deps.Log, "broker user request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict))}
	protected.GET("/broker-auth/user", h.adminOnly, h.list)
	protected.GET("/broker-auth/user/:username", h.adminOnly, h.get)
	protected.PUT("/broker-auth/user/:username", h.adminOnly, h.put)
	protected.DELETE("/broker-auth/user/:username", h.adminOnly, h.delete)
	protected.GET("/broker-auth/acl", h.adminOnly, h.acl)
}

func (h *handler) fail(c *gin.Context, err error) { h.errs.Fail(c, err) }

func (h *handler) audit(c *gin.Context, who accounts.Caller, kind, username string, detail map[string]any) {
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: kind, Actor: who.UserID, ActorKind: "user", Target: username, Detail: detail})
	}
}

func (h *handler) list(c *gin.Context) {
	who, _ := h.Caller(c)
	users, err := h.Store.Users(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"users": users})
}

func (h *handler) get(c *gin.Context) {
	who, _ := h.Caller(c)
	u, err := h.Store.User(c.Request.Context(), who.TenantUUID, c.Param("username"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

// ruleIn is a rule as requests give it.
type ruleIn struct {
	Pattern   string `json:"pattern"`
	Publish   bool   `json:"publish"`
	Subscribe bool   `json:"subscribe"`
}

// issued is a user with the password it was just given, shown once.
type issued struct {
	User
	Password string `json:"password,omitempty"`
}

// put creates the broker user named by the path (201, with its password)
// or updates the caller's tenant's user of that name (200): rules and
// description are replaced when given, and resetPassword issues a new
// password. A name another tenant uses is 409.
func (h *handler) put(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Description   *string   `json:"description"`
		Rules         *[]ruleIn `json:"rules"`
		ResetPassword bool      `json:"resetPassword"`
	}
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	var rules *[]Rule
	if in.Rules != nil {
		rs := make([]Rule, len(*in.Rules))
		for i, r := range *in.Rules {
			rs[i] = Rule{Pattern: r.Pattern, Publish: r.Publish, Subscribe: r.Subscribe}
		}
		rules = &rs
	}
	ctx, name := c.Request.Context(), c.Param("username")
	_, err := h.Store.User(ctx, who.TenantUUID, name)
	switch {
	case errors.Is(err, ErrNotFound):
		h.create(c, who, name, in.Description, rules)
		return
	case err != nil:
		h.fail(c, err)
		return
	}
	u, password, err := h.Store.Update(ctx, who.TenantUUID, name, Change{Description: in.Description, Rules: rules, ResetPassword: in.ResetPassword})
	if err != nil {
		h.fail(c, err)
		return
	}
	rulesChanged := u.RulesChanged
	if rulesChanged || password != "" {
		h.Invalidate(name)
	}
	h.audit(c, who, AuditBrokerUserUpdated, name, map[string]any{"rules": len(u.Rules), "rulesChanged": rulesChanged, "passwordReset": password != ""})
	c.JSON(http.StatusOK, issued{User: u, Password: password})
}

func (h *handler) create(c *gin.Context, who accounts.Caller, name string, desc *string, rules *[]Rule) {
	if rules == nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: rules (a list, possibly empty) is required to create a broker user")
		return
	}
	n := NewUser{Username: name, Rules: *rules}
	if desc != nil {
		n.Description = *desc
	}
	u, password, err := h.Store.Create(c.Request.Context(), who.TenantUUID, who.UserID, n)
	if err != nil {
		h.fail(c, err)
		return
	}
	// Nothing should be cached for a name that did not exist, but a name
	// deleted and created again must not meet an answer about the old one.
	h.Invalidate(name)
	h.audit(c, who, AuditBrokerUserCreated, name, map[string]any{"rules": len(u.Rules)})
	c.JSON(http.StatusCreated, issued{User: u, Password: password})
}

func (h *handler) delete(c *gin.Context) {
	who, _ := h.Caller(c)
	name := c.Param("username")
	if err := h.Store.Delete(c.Request.Context(), who.TenantUUID, name); err != nil {
		h.fail(c, err)
		return
	}
	h.Invalidate(name)
	h.audit(c, who, AuditBrokerUserDeleted, name, nil)
	c.Status(http.StatusNoContent)
}

// aclEntry is one rule in the tenant's rule listing.
type aclEntry struct {
	Username string `json:"username"`
	Rule
}

// acl lists the rules of the caller's tenant's broker users, or of one
// (?username=).
func (h *handler) acl(c *gin.Context) {
	who, _ := h.Caller(c)
	ctx := c.Request.Context()
	var users []User
	if name, ok := c.GetQuery("username"); ok {
		u, err := h.Store.User(ctx, who.TenantUUID, name)
		if err != nil {
			h.fail(c, err)
			return
		}
		users = []User{u}
	} else {
		var err error
		if users, err = h.Store.Users(ctx, who.TenantUUID); err != nil {
			h.fail(c, err)
			return
		}
	}
	prefix, err := brokerauth.TenantTopicPrefix(who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	entries := []aclEntry{}
	for _, u := range users {
		for _, r := range u.Rules {
			entries = append(entries, aclEntry{Username: u.Username, Rule: r})
		}
	}
	c.JSON(http.StatusOK, gin.H{"topicPrefix": prefix, "rules": entries})
}
