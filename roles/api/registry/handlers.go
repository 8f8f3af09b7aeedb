package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Deps is what the handlers need from the role.
type Deps struct {
	Store      *Store
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address.
	Audit func(*gin.Context, accounts.Event)
	// Admit is the licence check of a new agent, given the installation's
	// count; nil admits every agent.
	Admit func(agents int) error
	// Revoked is told the key ids that stopped working, so cached broker
	// answers for them are dropped at once.
	Revoked func(kids []string)
	// BrokerURL is handed to registering agents.
	BrokerURL string
	// AdminGate runs after the admin check of admin-only routes (the
	// admin rate limit); nil runs nothing.
	AdminGate gin.HandlerFunc
	Log       *slog.Logger
}

const maxBody = 64 << 10

type handler struct {
	Deps
	// tenant returns the request's user, or answers 401.
	tenant    func(*gin.Context) (accounts.Caller, bool)
	adminOnly gin.HandlerFunc
	errs      *httpx.ErrorMap
}

// Register adds the routes: self-registration to public (it carries its
// own credential, the provisioning key), the rest to protected.
func Register(public, protected gin.IRoutes, deps Deps) {
	h := &handler{Deps: deps, tenant: accounts.RequireUser(deps.Caller, deps.WriteError),
		adminOnly: accounts.RequireAdmin(deps.Caller, deps.WriteError, deps.AdminGate),
		errs: httpx.NewErrorMap(deps.WriteError, deps.Log, "registry request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict),
			httpx.Case(http.StatusUnauthorized, "provisioning_key_refused", ErrKeyRefused))}
	if h.Revoked == nil {
		h.Revoked = func([]string) {}
	}
	public.POST("/provisioning/register", h.register)
	public.POST("/provision/agent", h.register)

	protected.GET("/agents", h.listAgents)
	protected.POST("/agents", h.adminOnly, h.createAgent)
	protected.GET("/agents/locations", h.locations)
	protected.POST("/agents/query", h.query)
	protected.GET("/agents/:uuid", h.getAgent)
	protected.PATCH("/agents/:uuid", h.adminOnly, h.updateAgent)
	protected.DELETE("/agents/:uuid", h.adminOnly, h.deleteAgent)
	protected.PATCH("/agents/:uuid/active", h.adminOnly, h.setActive)
	protected.GET("/agents/:uuid/target-state", h.getTargetState)
	protected.POST("/agents/:uuid/target-state", h.adminOnly, h.putTargetState(true))
	protected.PUT("/agents/:uuid/target-state", h.adminOnly, h.putTargetState(false))
	protected.DELETE("/agents/:uuid/target-state", h.adminOnly, h.clearTargetState)
	protected.GET("/agents/:uuid/target-state/history", h.targetStateHistory)
	protected.GET("/agents/:uuid/target-state/history/:version", h.targetStateVersion)
	registerDevices(protected, h)
	registerSecrets(protected, h)
	registerFleets(protected, h)
	protected.GET("/agents/:uuid/keys", h.adminOnly, h.listDeviceKeys)
	protected.DELETE("/agents/:uuid/keys/:kid", h.adminOnly, h.revokeDeviceKey)
	protected.GET("/agents/:uuid/tags", h.getTags)
	protected.POST("/agents/:uuid/tags", h.adminOnly, h.setTags)
	for _, base := range []string{"/provisioning/keys", "/provision/keys"} {
		protected.GET(base, h.adminOnly, h.listKeys)
		protected.POST(base, h.adminOnly, h.createKey)
		protected.DELETE(base+"/:id", h.adminOnly, h.deleteKey)
	}
	protected.POST("/provisioning/keys/generate", h.adminOnly, h.createKey)
	protected.POST("/auth/api-keys", h.adminOnly, h.issueDeviceKey)
}

// fail answers err; a licence refusal (a *licence.Error) answers for
// itself.
func (h *handler) fail(c *gin.Context, err error) { h.errs.Fail(c, err) }

func (h *handler) bind(c *gin.Context, dst any) bool {
	return httpx.BindStrict(c, maxBody, dst, h.WriteError)
}

func (h *handler) audit(c *gin.Context, who accounts.Caller, kind, target string, detail map[string]any) {
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: kind, Actor: who.UserID, ActorKind: "user", Target: target, Detail: detail})
	}
}

// Audit event kinds of this package.
const (
	AuditAgentCreated       = "agent.created"
	AuditAgentUpdated       = "agent.updated"
	AuditAgentDeleted       = "agent.deleted"
	AuditAgentRegistered    = "agent.registered"
	AuditRegistrationFailed = "agent.registration_failed"
	AuditProvisioningKey    = "provisioning_key.created"
	AuditProvisioningDelete = "provisioning_key.deleted"
	AuditDeviceKeyCreated   = "device_key.created"
	AuditDeviceKeyRevoked   = "device_key.revoked"
	AuditTargetState        = "agent.target_state"
)

func (h *handler) listAgents(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	agents, err := h.Store.Agents(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agents": agents})
}

func (h *handler) createAgent(c *gin.Context) {
	who, _ := h.Caller(c)
	var in NewAgent
	if !h.bind(c, &in) {
		return
	}
	in.By = who.UserID
	a, err := h.Store.CreateAgent(c.Request.Context(), who.TenantUUID, in, h.Admit)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditAgentCreated, a.UUID, map[string]any{"name": a.Name})
	c.JSON(http.StatusCreated, a)
}

func (h *handler) getAgent(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	a, err := h.Store.Agent(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, a)
}

func (h *handler) updateAgent(c *gin.Context) {
	who, _ := h.Caller(c)
	var in AgentUpdate
	if !h.bind(c, &in) {
		return
	}
	in.By = who.UserID
	var before map[string]string
	if in.Fleet != nil {
		before = h.fleetsOf(c, who.TenantUUID, []string{c.Param("uuid")})
	}
	a, err := h.Store.UpdateAgent(c.Request.Context(), who.TenantUUID, c.Param("uuid"), in)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditAgentUpdated, a.UUID, nil)
	if from, ok := before[a.UUID]; ok {
		h.auditMove(c, who, a.UUID, from, a.FleetID)
	}
	c.JSON(http.StatusOK, a)
}

func (h *handler) deleteAgent(c *gin.Context) {
	who, _ := h.Caller(c)
	kids, err := h.Store.DeleteAgent(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	h.Revoked(kids)
	h.audit(c, who, AuditAgentDeleted, c.Param("uuid"), nil)
	c.Status(http.StatusNoContent)
}

func (h *handler) setActive(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Active *bool `json:"active"`
	}
	if !h.bind(c, &in) {
		return
	}
	if in.Active == nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: active (a boolean) is required")
		return
	}
	a, err := h.Store.SetActive(c.Request.Context(), who.TenantUUID, c.Param("uuid"), *in.Active)
	if err != nil {
		h.fail(c, err)
		return
	}
	if !a.Active {
		// Cached broker answers for the agent's keys must not outlive
		// the switch.
		if kids, err := agentKids(c.Request.Context(), h.conn(), who.TenantUUID, a.UUID); err == nil {
			h.Revoked(kids)
		} else {
			h.Log.Error("cannot list the keys of a disabled agent", "agent", a.UUID, "err", err)
		}
	}
	h.audit(c, who, AuditAgentUpdated, a.UUID, map[string]any{"active": a.Active})
	c.JSON(http.StatusOK, a)
}

func (h *handler) conn() execer { c, _ := h.Store.sql(); return c }

func (h *handler) getTargetState(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	ts, a, err := h.Store.EffectiveTargetState(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	own, err := h.Store.TargetState(c.Request.Context(), who.TenantUUID, a.UUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	// state is the agent's own document, effective what it receives
	// (docs/fleets-and-jobs.md).
	c.JSON(http.StatusOK, gin.H{"agentUuid": own.AgentUUID, "state": own.State, "version": own.Version, "updatedAt": own.UpdatedAt,
		"updatedBy": own.UpdatedBy, "effective": ts.State, "fleetId": a.FleetID})
}

// putTargetState creates (POST: 409 when the agent has one) or replaces
// (PUT) an agent's target state; body {"state": {...}}.
func (h *handler) putTargetState(create bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		who, _ := h.Caller(c)
		var in struct {
			State json.RawMessage `json:"state"`
		}
		// A target state may be up to maxTargetState, above the other
		// routes' body cap.
		if !httpx.BindStrict(c, maxTargetState+1024, &in, h.WriteError) {
			return
		}
		if len(in.State) == 0 {
			h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: state (an object) is required")
			return
		}
		ts, err := h.Store.SetTargetState(c.Request.Context(), who.TenantUUID, c.Param("uuid"), in.State, who.UserID, create)
		if err != nil {
			h.fail(c, err)
			return
		}
		h.audit(c, who, AuditTargetState, ts.AgentUUID, map[string]any{"version": ts.Version})
		status := http.StatusOK
		if create {
			status = http.StatusCreated
		}
		c.JSON(status, ts)
	}
}

func (h *handler) clearTargetState(c *gin.Context) {
	who, _ := h.Caller(c)
	ts, err := h.Store.ClearTargetState(c.Request.Context(), who.TenantUUID, c.Param("uuid"), who.UserID)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditTargetState, ts.AgentUUID, map[string]any{"version": ts.Version, "cleared": true})
	c.JSON(http.StatusOK, ts)
}

func (h *handler) listDeviceKeys(c *gin.Context) {
	who, _ := h.Caller(c)
	keys, err := h.Store.DeviceKeys(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"keys": keys})
}

// revokeDeviceKey revokes one of an agent's device keys; the broker
// forgets it at once.
func (h *handler) revokeDeviceKey(c *gin.Context) {
	who, _ := h.Caller(c)
	kid := c.Param("kid")
	if err := h.Store.RevokeDeviceKey(c.Request.Context(), who.TenantUUID, c.Param("uuid"), kid); err != nil {
		h.fail(c, err)
		return
	}
	h.Revoked([]string{kid})
	h.audit(c, who, AuditDeviceKeyRevoked, c.Param("uuid"), map[string]any{"kid": kid})
	c.Status(http.StatusNoContent)
}

func (h *handler) getTags(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	a, err := h.Store.Agent(c.Request.Context(), who.TenantUUID, c.Param("uuid"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"tags": a.Tags})
}

func (h *handler) setTags(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Tags map[string]string `json:"tags"`
	}
	if !h.bind(c, &in) {
		return
	}
	a, err := h.Store.SetTags(c.Request.Context(), who.TenantUUID, c.Param("uuid"), in.Tags)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditAgentUpdated, a.UUID, map[string]any{"tags": len(a.Tags)})
	c.JSON(http.StatusOK, gin.H{"tags": a.Tags})
}

func (h *handler) query(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	var in struct {
		Tags map[string]json.RawMessage `json:"tags"`
	}
	if !h.bind(c, &in) {
		return
	}
	conds, err := ParseTagQuery(in.Tags)
	if err != nil {
		h.fail(c, err)
		return
	}
	agents, err := h.Store.AgentsMatching(c.Request.Context(), who.TenantUUID, conds)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"agents": agents})
}

func (h *handler) locations(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	agents, err := h.Store.Locations(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	out := make([]gin.H, 0, len(agents))
	for _, a := range agents {
		out = append(out, gin.H{"uuid": a.UUID, "name": a.Name, "active": a.Active, "status": a.Status, "lastSeen": a.LastSeen, "location": a.Location})
	}
	c.JSON(http.StatusOK, gin.H{"locations": out})
}

func (h *handler) listKeys(c *gin.Context) {
	who, _ := h.Caller(c)
	keys, err := h.Store.ProvisioningKeys(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"keys": keys})
}

// createKey issues a provisioning key. Every field is optional: an empty
// body (or none) gives a single-use key valid 24 h.
func (h *handler) createKey(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Name      string     `json:"name"`
		Fleet     string     `json:"fleet"`
		AgentUUID string     `json:"agentUuid"`
		ExpiresAt *time.Time `json:"expiresAt"`
		// ExpiresIn is a lifetime in seconds.
		ExpiresIn *int64 `json:"expiresIn"`
	}
	// The body is optional, but a slow one must still get the body
	// timeout's 408.
	body, ok := httpx.ReadBodyAllowEmpty(c, maxBody, h.WriteError)
	if !ok {
		return
	}
	if len(bytes.TrimSpace(body)) > 0 {
		if err := httpx.DecodeStrict(body, &in); err != nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_body", err.Error())
			return
		}
	}
	n := NewProvisioningKey{Name: in.Name, Fleet: in.Fleet, AgentUUID: in.AgentUUID}
	if in.ExpiresAt != nil {
		n.ExpiresAt = *in.ExpiresAt
	}
	if in.ExpiresIn != nil {
		if *in.ExpiresIn <= 0 || *in.ExpiresIn > int64(MaxProvisioningTTL/time.Second) {
			h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", "expiresIn must be 1..31536000 seconds")
			return
		}
		n.TTL = time.Duration(*in.ExpiresIn) * time.Second
	}
	k, plain, err := h.Store.CreateProvisioningKey(c.Request.Context(), who.TenantUUID, who.UserID, n)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditProvisioningKey, k.ID, map[string]any{"prefix": k.Prefix, "fleet": k.Fleet, "expiresAt": k.ExpiresAt})
	c.JSON(http.StatusCreated, gin.H{"id": k.ID, "key": plain, "prefix": k.Prefix, "name": k.Name, "fleet": k.Fleet, "fleetId": k.FleetID, "agentUuid": k.AgentUUID,
		"createdAt": k.CreatedAt, "expiresAt": k.ExpiresAt, "singleUse": true})
}

func (h *handler) deleteKey(c *gin.Context) {
	who, _ := h.Caller(c)
	if err := h.Store.DeleteProvisioningKey(c.Request.Context(), who.TenantUUID, c.Param("id")); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditProvisioningDelete, c.Param("id"), nil)
	c.Status(http.StatusNoContent)
}

// mqttSettings is how a device connects to the broker (docs/access.md,
// section Provisioning an agent).
func (h *handler) mqttSettings(cr Credentials) gin.H {
	tu, _ := codec.ParseUUID(cr.Agent.TenantID)
	au, _ := codec.ParseUUID(cr.Agent.UUID)
	return gin.H{"brokerUrl": h.BrokerURL, "username": cr.APIKey, "password": cr.MQTTPassword,
		"clientId": brokerauth.AgentClientID(cr.Agent.UUID), "topicPrefix": "i/" + codec.EncodeID(tu) + "/a/" + codec.EncodeID(au)}
}

// register is agent self-registration with a provisioning key. The answer
// carries the device's credentials, once.
func (h *handler) register(c *gin.Context) {
	var in struct {
		Key       string `json:"key"`
		AgentName string `json:"agentName"`
		AgentUUID string `json:"agentUuid"`
		Version   string `json:"version"`
	}
	if !h.bind(c, &in) {
		return
	}
	if in.Key == "" {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: key (the provisioning key) is required")
		return
	}
	cr, revoked, err := h.Store.Register(c.Request.Context(), Registration{Key: in.Key, AgentName: in.AgentName,
		AgentUUID: in.AgentUUID, Version: in.Version}, h.Admit)
	if err != nil {
		if h.Audit != nil && !errors.Is(err, ErrInvalid) {
			h.Audit(c, accounts.Event{Kind: AuditRegistrationFailed, ActorKind: "device", Actor: clip(in.AgentName), Outcome: "failure",
				Detail: map[string]any{"reason": err.Error()}})
		}
		h.fail(c, err)
		return
	}
	h.Revoked(revoked)
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: cr.Agent.TenantID, Kind: AuditAgentRegistered, ActorKind: "device", Actor: cr.Agent.UUID,
			Target: cr.Agent.UUID, Detail: map[string]any{"name": cr.Agent.Name, "kid": cr.Kid, "reprovisioned": len(revoked) > 0}})
	}
	c.JSON(http.StatusCreated, gin.H{"apiKey": cr.APIKey, "agentUuid": cr.Agent.UUID, "tenantId": cr.Agent.TenantID,
		"mqtt": h.mqttSettings(cr)})
}

// issueDeviceKey gives an existing agent another device key (admin).
func (h *handler) issueDeviceKey(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Name      string `json:"name"`
		AgentUUID string `json:"agentUuid"`
	}
	if !h.bind(c, &in) {
		return
	}
	if in.AgentUUID == "" {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: agentUuid is required")
		return
	}
	cr, err := h.Store.IssueDeviceKey(c.Request.Context(), who.TenantUUID, in.AgentUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditDeviceKeyCreated, cr.Agent.UUID, map[string]any{"kid": cr.Kid, "name": in.Name})
	c.JSON(http.StatusCreated, gin.H{"apiKey": cr.APIKey, "kid": cr.Kid, "agentUuid": cr.Agent.UUID, "mqtt": h.mqttSettings(cr)})
}
