package registry

import (
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// The fleets routes (docs/fleets-and-jobs.md, section Fleets): reads for
// every user of the tenant, writes for admins.

// Audit event kinds of the fleets routes.
const (
	AuditFleetCreated      = "fleet.created"
	AuditFleetUpdated      = "fleet.updated"
	AuditFleetDeleted      = "fleet.deleted"
	AuditFleetStarted      = "fleet.started"
	AuditFleetStopped      = "fleet.stopped"
	AuditFleetAgentAdded   = "fleet.agent_added"
	AuditFleetAgentRemoved = "fleet.agent_removed"
)

// registerFleets adds the fleets routes.
func registerFleets(protected gin.IRoutes, h *handler) {
	protected.GET("/fleets", h.listFleets)
	protected.POST("/fleets", h.adminOnly, h.createFleet)
	protected.GET("/fleets/:id", h.getFleet)
	protected.PATCH("/fleets/:id", h.adminOnly, h.updateFleet(false))
	protected.PUT("/fleets/:id", h.adminOnly, h.updateFleet(true))
	protected.DELETE("/fleets/:id", h.adminOnly, h.deleteFleet)
	protected.POST("/fleets/:id/start", h.adminOnly, h.runFleet(control.RunRunning))
	protected.POST("/fleets/:id/stop", h.adminOnly, h.runFleet(control.RunStopped))
	protected.POST("/fleets/:id/agents", h.adminOnly, h.addFleetAgents)
	protected.DELETE("/fleets/:id/agents/:uuid", h.adminOnly, h.removeFleetAgent)
	protected.GET("/fleets/:id/usage-events", h.fleetEvents)
}

func (h *handler) listFleets(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	fleets, err := h.Store.Fleets(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"fleets": fleets})
}

func (h *handler) getFleet(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	f, err := h.Store.Fleet(c.Request.Context(), who.TenantUUID, c.Param("id"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, f)
}

// bindFleet reads a fleet body; a template may be up to a target state's
// size, above the other routes' body cap.
func (h *handler) bindFleet(c *gin.Context) (FleetInput, bool) {
	var in FleetInput
	return in, httpx.BindStrict(c, maxTargetState+maxBody, &in, h.WriteError)
}

func (h *handler) createFleet(c *gin.Context) {
	who, _ := h.Caller(c)
	in, ok := h.bindFleet(c)
	if !ok {
		return
	}
	f, err := h.Store.CreateFleet(c.Request.Context(), who.TenantUUID, who.UserID, in)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditFleetCreated, f.ID, map[string]any{"name": f.Name})
	c.JSON(http.StatusCreated, f)
}

// updateFleet changes the given fields (PATCH) or replaces the fleet
// (PUT).
func (h *handler) updateFleet(replace bool) gin.HandlerFunc {
	return func(c *gin.Context) {
		who, _ := h.Caller(c)
		in, ok := h.bindFleet(c)
		if !ok {
			return
		}
		f, err := h.Store.UpdateFleet(c.Request.Context(), who.TenantUUID, c.Param("id"), who.UserID, in, replace)
		if err != nil {
			h.fail(c, err)
			return
		}
		h.audit(c, who, AuditFleetUpdated, f.ID, map[string]any{"name": f.Name, "templateVersion": f.TemplateVersion})
		c.JSON(http.StatusOK, f)
	}
}

func (h *handler) deleteFleet(c *gin.Context) {
	who, _ := h.Caller(c)
	force := false
	if v := c.Query("force"); v != "" {
		var err error
		if force, err = strconv.ParseBool(v); err != nil {
			h.WriteError(c, http.StatusBadRequest, "invalid_param", "force must be true or false")
			return
		}
	}
	id := c.Param("id")
	if err := h.Store.DeleteFleet(c.Request.Context(), who.TenantUUID, id, who.UserID, force); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditFleetDeleted, id, map[string]any{"force": force})
	c.Status(http.StatusNoContent)
}

func (h *handler) runFleet(state string) gin.HandlerFunc {
	kind := AuditFleetStarted
	if state == control.RunStopped {
		kind = AuditFleetStopped
	}
	return func(c *gin.Context) {
		who, _ := h.Caller(c)
		f, err := h.Store.SetFleetRunState(c.Request.Context(), who.TenantUUID, c.Param("id"), who.UserID, state)
		if err != nil {
			h.fail(c, err)
			return
		}
		h.audit(c, who, kind, f.ID, map[string]any{"members": f.MemberCount})
		c.JSON(http.StatusOK, f)
	}
}

// addFleetAgents takes {agentUuid} or {agentUuids: [...]}; an agent in
// another fleet moves.
func (h *handler) addFleetAgents(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		AgentUUID  string   `json:"agentUuid"`
		AgentUUIDs []string `json:"agentUuids"`
	}
	if !h.bind(c, &in) {
		return
	}
	uuids := in.AgentUUIDs
	if in.AgentUUID != "" {
		uuids = append([]string{in.AgentUUID}, uuids...)
	}
	before := h.fleetsOf(c, who.TenantUUID, uuids)
	f, err := h.Store.AddFleetAgents(c.Request.Context(), who.TenantUUID, c.Param("id"), who.UserID, uuids)
	if err != nil {
		h.fail(c, err)
		return
	}
	for agent, from := range before {
		h.auditMove(c, who, agent, from, f.ID)
	}
	c.JSON(http.StatusOK, f)
}

// fleetsOf maps each of uuids that is tenant's agent to its fleet id, so
// a move can be audited on both fleets.
func (h *handler) fleetsOf(c *gin.Context, tenant string, uuids []string) map[string]string {
	out := map[string]string{}
	for _, u := range uuids {
		if a, err := h.Store.Agent(c.Request.Context(), tenant, u); err == nil {
			out[a.UUID] = a.FleetID
		}
	}
	return out
}

// auditMove records an agent's move between fleets ("" for none).
func (h *handler) auditMove(c *gin.Context, who accounts.Caller, agent, from, to string) {
	if from == to {
		return
	}
	if from != "" {
		h.audit(c, who, AuditFleetAgentRemoved, from, map[string]any{"agentUuid": agent, "to": to})
	}
	if to != "" {
		h.audit(c, who, AuditFleetAgentAdded, to, map[string]any{"agentUuid": agent, "from": from})
	}
}

func (h *handler) removeFleetAgent(c *gin.Context) {
	who, _ := h.Caller(c)
	id, agent := c.Param("id"), c.Param("uuid")
	if err := h.Store.RemoveFleetAgent(c.Request.Context(), who.TenantUUID, id, agent, who.UserID); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditFleetAgentRemoved, id, map[string]any{"agentUuid": agent})
	c.Status(http.StatusNoContent)
}

func (h *handler) fleetEvents(c *gin.Context) {
	who, ok := h.tenant(c)
	if !ok {
		return
	}
	limit := 0
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxFleetEvents {
			h.WriteError(c, http.StatusBadRequest, "invalid_param", "limit must be 1..1000")
			return
		}
		limit = n
	}
	events, err := h.Store.FleetEvents(c.Request.Context(), who.TenantUUID, c.Param("id"), limit)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"events": events})
}
