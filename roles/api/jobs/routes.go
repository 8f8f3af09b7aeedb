package jobs

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Page sizes of the execution listings.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

const maxBody = 64 << 10

type handler struct {
	*core
	// caller returns the request's user, or answers 401.
	caller func(*gin.Context) (accounts.Caller, bool)
	errs   *httpx.ErrorMap
}

// Register adds the user routes to protected and the agents' routes
// (device key, no user credential) to device. Both are /api/v1 groups.
func Register(protected, device gin.IRoutes, d Deps) {
	base := newCore(d)
	h := &handler{core: base, caller: accounts.RequireUser(d.Caller, d.WriteError),
		errs: httpx.NewErrorMap(d.WriteError, base.Log, "jobs request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict))}
	admin := accounts.RequireAdmin(h.Caller, h.WriteError, h.AdminGate)
	protected.GET("/jobs/templates", h.listTemplates)
	protected.POST("/jobs/templates", admin, h.createTemplate)
	protected.GET("/jobs/templates/:id", h.getTemplate)
	protected.PUT("/jobs/templates/:id", admin, h.putTemplate)
	protected.DELETE("/jobs/templates/:id", admin, h.deleteTemplate)
	protected.POST("/jobs/execute", admin, h.execute)
	protected.GET("/jobs/executions", h.listExecutions)
	protected.GET("/jobs/executions/:jobId", h.getJob)
	protected.POST("/jobs/executions/:jobId/cancel", admin, h.cancelJob)
	protected.POST("/agents/:uuid/jobs", admin, h.executeOn)
	protected.GET("/agents/:uuid/jobs", h.agentExecutions)
	protected.GET("/agents/:uuid/jobs/:jobId", h.agentExecution)
	protected.POST("/agents/:uuid/jobs/:jobId/cancel", admin, h.cancelExecution)
	registerAgent(device, h)
}

// fail answers err. An *EndedError is the one answer with a field beyond
// the error shape's two: the agent reads the status to record
// (docs/fleets-and-jobs.md).
func (h *handler) fail(c *gin.Context, err error) {
	var ended *EndedError
	if errors.As(err, &ended) {
		c.AbortWithStatusJSON(http.StatusConflict, gin.H{"error": gin.H{"code": control.CodeExecutionEnded, "message": err.Error(), "status": ended.Status}})
		return
	}
	h.errs.Fail(c, err)
}

// userRecorder records a request's events through Deps.Audit.
func (h *handler) userRecorder(c *gin.Context) recorder {
	if h.Audit == nil {
		return nil
	}
	return func(e accounts.Event) { h.Audit(c, e) }
}

func (h *handler) audit(c *gin.Context, who accounts.Caller, kind, target string, detail map[string]any) {
	if h.Audit != nil {
		h.Audit(c, accounts.Event{Tenant: who.TenantUUID, Kind: kind, Actor: who.UserID, ActorKind: actorKindUser, Target: target, Detail: detail})
	}
}

func (h *handler) listTemplates(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	ts, err := h.templates(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"templates": ts})
}

func (h *handler) getTemplate(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	t, err := h.template(c.Request.Context(), who.TenantUUID, c.Param("id"))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, t)
}

func (h *handler) createTemplate(c *gin.Context) { h.saveTemplateRoute(c, "") }

func (h *handler) putTemplate(c *gin.Context) { h.saveTemplateRoute(c, c.Param("id")) }

func (h *handler) saveTemplateRoute(c *gin.Context, id string) {
	who, _ := h.Caller(c)
	var in TemplateInput
	if !httpx.BindStrict(c, maxBody, &in, h.WriteError) {
		return
	}
	t, err := h.saveTemplate(c.Request.Context(), who.TenantUUID, id, in)
	if err != nil {
		h.fail(c, err)
		return
	}
	if id == "" {
		h.audit(c, who, AuditTemplateCreated, t.ID, map[string]any{"name": t.Name, "handler": t.Handler})
		c.JSON(http.StatusCreated, t)
		return
	}
	h.audit(c, who, AuditTemplateUpdated, t.ID, map[string]any{"name": t.Name, "handler": t.Handler})
	c.JSON(http.StatusOK, t)
}

func (h *handler) deleteTemplate(c *gin.Context) {
	who, _ := h.Caller(c)
	if err := h.core.deleteTemplate(c.Request.Context(), who.TenantUUID, c.Param("id")); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditTemplateDeleted, c.Param("id"), nil)
	c.Status(http.StatusNoContent)
}

// execute serves POST /jobs/execute.
func (h *handler) execute(c *gin.Context) {
	var in DispatchRequest
	if !httpx.BindStrict(c, maxBody+control.MaxJobParamsBytes, &in, h.WriteError) {
		return
	}
	h.dispatch(c, in)
}

// executeOn serves POST /agents/:uuid/jobs: a job for one agent.
func (h *handler) executeOn(c *gin.Context) {
	var in DispatchRequest
	if !httpx.BindStrict(c, maxBody+control.MaxJobParamsBytes, &in, h.WriteError) {
		return
	}
	if in.Targets != nil {
		h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", "targets: this route targets the agent of its path")
		return
	}
	u, err := codec.ParseUUID(c.Param("uuid"))
	if err != nil {
		h.WriteError(c, http.StatusNotFound, "not_found", "not found: agent "+strconv.Quote(clip(c.Param("uuid"))))
		return
	}
	in.Targets = &TargetSpec{Agents: []string{u.String()}}
	h.dispatch(c, in)
}

func (h *handler) dispatch(c *gin.Context, in DispatchRequest) {
	who, _ := h.Caller(c)
	ctx := c.Request.Context()
	p, err := h.prepare(ctx, who.TenantUUID, in)
	if err != nil {
		h.fail(c, err)
		return
	}
	id, err := h.create(ctx, who.TenantUUID, who.UserID, p)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, who, AuditJobCreated, id, map[string]any{"handler": p.handler, "targets": len(p.agents)})
	h.publishEvent(ctx, who.TenantUUID, Event{JobID: id, Status: JobInProgress, At: h.now()})
	// The scheduler would release the first executions within a pass;
	// doing it here sends them now. A failure is left to the scheduler.
	if err := h.releaseOne(ctx, id); err != nil {
		h.Log.Warn("release new job", "job", id, "err", err)
	}
	j, err := h.job(ctx, who.TenantUUID, id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, j)
}

func (h *handler) getJob(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	j, err := h.job(ctx, who.TenantUUID, c.Param("jobId"))
	if err != nil {
		h.fail(c, err)
		return
	}
	j.Executions, _, err = h.executions(ctx, execFilter{tenant: who.TenantUUID, job: j.ID, limit: MaxTargets})
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, j)
}

func (h *handler) listExecutions(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	h.page(c, who.TenantUUID, c.Query("agent"))
}

func (h *handler) agentExecutions(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	if agent, ok := h.ownedAgent(c, who.TenantUUID); ok {
		h.page(c, who.TenantUUID, agent)
	}
}

// page answers a page of the tenant's executions (of agent, unless "")
// as the query's filters select.
func (h *handler) page(c *gin.Context, tenant, agent string) {
	f, err := parseFilter(tenant, c.Query("status"), agent, c.Query("jobId"), c.Query("limit"), c.Query("cursor"))
	if err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_parameter", err.Error())
		return
	}
	list, next, err := h.executions(c.Request.Context(), f)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"executions": list, "nextCursor": next})
}

// ownedAgent answers 404 unless the path's agent is the tenant's.
func (h *handler) ownedAgent(c *gin.Context, tenant string) (string, bool) {
	u, err := codec.ParseUUID(c.Param("uuid"))
	if err == nil {
		var owned map[string]bool
		owned, err = h.Targets.Owned(c.Request.Context(), tenant, []string{u.String()})
		if err != nil {
			h.fail(c, err)
			return "", false
		}
		if owned[u.String()] {
			return u.String(), true
		}
	}
	h.WriteError(c, http.StatusNotFound, "not_found", "not found: agent "+strconv.Quote(clip(c.Param("uuid"))))
	return "", false
}

func (h *handler) agentExecution(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	agent, ok := h.ownedAgent(c, who.TenantUUID)
	if !ok {
		return
	}
	e, err := h.execution(c.Request.Context(), h.DB.ReadSQL(), who.TenantUUID, c.Param("jobId"), agent)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, e)
}

func (h *handler) cancelJob(c *gin.Context) {
	who, _ := h.Caller(c)
	ctx := c.Request.Context()
	id := c.Param("jobId")
	if _, err := codec.ParseUUID(id); err != nil {
		h.fail(c, ErrNotFound)
		return
	}
	changes, err := h.endJob(ctx, who.TenantUUID, id, JobCancelled, control.ReasonCancelled)
	h.announce(ctx, h.userRecorder(c), who.UserID, actorKindUser, changes)
	if err != nil {
		h.fail(c, err)
		return
	}
	j, err := h.job(ctx, who.TenantUUID, id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, j)
}

func (h *handler) cancelExecution(c *gin.Context) {
	who, _ := h.Caller(c)
	ctx := c.Request.Context()
	agent, ok := h.ownedAgent(c, who.TenantUUID)
	if !ok {
		return
	}
	e, err := h.move(ctx, who.TenantUUID, c.Param("jobId"), agent, control.JobStatusUpdate{Status: control.ExecCancelled,
		StatusReason: control.ReasonCancelled}, false)
	if err != nil {
		h.fail(c, err)
		return
	}
	changes := []change{{tenant: who.TenantUUID, job: e.JobID, agent: agent, status: string(e.Status), reason: e.StatusReason,
		released: e.ReleasedAt != nil, at: e.UpdatedAt}}
	done, err := h.complete(ctx, e.JobID)
	if err != nil {
		h.Log.Warn("complete job", "job", e.JobID, "err", err)
	}
	h.announce(ctx, h.userRecorder(c), who.UserID, actorKindUser, append(changes, done...))
	c.JSON(http.StatusOK, e)
}

// execFilter selects executions for a listing.
type execFilter struct {
	tenant, status, agent, job string
	limit                      int
	after                      int64
}

func parseFilter(tenant, status, agent, job, limit, cursor string) (execFilter, error) {
	f := execFilter{tenant: tenant, limit: DefaultLimit}
	if status != "" {
		if !control.ExecStatus(status).Valid() {
			return f, errors.New("status must be one of queued, in_progress, succeeded, failed, timed_out, cancelled, got " + strconv.Quote(clip(status)))
		}
		f.status = status
	}
	if agent != "" {
		u, err := codec.ParseUUID(agent)
		if err != nil {
			return f, errors.New("agent must be a hyphenated UUID, got " + strconv.Quote(clip(agent)))
		}
		f.agent = u.String()
	}
	if job != "" {
		u, err := codec.ParseUUID(job)
		if err != nil {
			return f, errors.New("jobId must be a hyphenated UUID, got " + strconv.Quote(clip(job)))
		}
		f.job = u.String()
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > MaxLimit {
			return f, errors.New("limit must be 1.." + strconv.Itoa(MaxLimit) + ", got " + strconv.Quote(clip(limit)))
		}
		f.limit = n
	}
	if cursor != "" {
		n, err := strconv.ParseInt(cursor, 36, 64)
		if err != nil || n <= 0 {
			return f, errors.New("cursor is not one this API returned")
		}
		f.after = n
	}
	return f, nil
}

// executions lists a page, newest first, and the cursor of the next one
// (nil at the end).
func (h *handler) executions(ctx context.Context, f execFilter) ([]Execution, *string, error) {
	var s db.SQLBuilder
	s.Write(`SELECT `+execColumns+` FROM job_executions e JOIN jobs j ON j.id = e.job_id WHERE e.tenant_uuid = `, s.Arg(f.tenant))
	if f.status != "" {
		s.Write(` AND e.status = `, s.Arg(f.status))
	}
	if f.agent != "" {
		s.Write(` AND e.agent_uuid = `, s.Arg(f.agent))
	}
	if f.job != "" {
		s.Write(` AND e.job_id = `, s.Arg(f.job))
	}
	if f.after > 0 {
		s.Write(` AND e.id < `, s.Arg(f.after))
	}
	s.Write(` ORDER BY e.id DESC LIMIT `, s.Arg(f.limit+1))
	rows, err := h.DB.ReadSQL().QueryContext(ctx, s.String(), s.Args()...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	out := make([]Execution, 0, min(f.limit, DefaultLimit))
	var next *string
	for rows.Next() {
		if len(out) == f.limit {
			cur := strconv.FormatInt(out[len(out)-1].id, 36)
			next = &cur
			break
		}
		e, err := scanExecution(rows)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, e)
	}
	return out, next, rows.Err()
}
