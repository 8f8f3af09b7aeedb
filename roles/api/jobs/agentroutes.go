package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// maxStatusBody bounds a status report: the result and exit data at
// their limits, with room for JSON escaping of the result.
const maxStatusBody = 2*control.MaxJobResultBytes + control.MaxJobExitBytes + 4<<10

// registerAgent adds the routes agents call with their device key.
func registerAgent(device gin.IRoutes, h *handler) {
	auth := h.DeviceAuth
	if auth == nil {
		panic("BUG: jobs.Deps.DeviceAuth is nil: the agent routes would take any caller")
	}
	device.GET("/agents/:uuid/jobs/next", auth, h.next)
	device.PATCH("/agents/:uuid/jobs/:jobId/status", auth, h.report)
}

// agent returns the authenticated agent of an agent route.
func (h *handler) agent(c *gin.Context) (tenant, agent string, ok bool) {
	tenant, agent, ok = h.Device(c)
	if !ok {
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "a device API key is required")
	}
	return tenant, agent, ok
}

// next answers the agent's oldest released execution that has not ended:
// queued, or in progress for an agent that restarts and resumes.
func (h *handler) next(c *gin.Context) {
	tenant, agent, ok := h.agent(c)
	if !ok {
		return
	}
	var d control.JobDispatch
	var params string
	var queued db.Timestamp
	err := h.DB.SQL().QueryRowContext(c.Request.Context(), `SELECT e.job_id, j.handler, j.params, j.timeout_seconds, e.queued_at
FROM job_executions e JOIN jobs j ON j.id = e.job_id
WHERE e.agent_uuid = $1 AND e.tenant_uuid = $2 AND e.released_at IS NOT NULL AND e.status IN ($3, $4)
ORDER BY e.queued_at, e.id LIMIT 1`, agent, tenant, string(control.ExecQueued), string(control.ExecInProgress)).
		Scan(&d.JobID, &d.Handler, &params, &d.TimeoutSeconds, &queued)
	if errors.Is(err, sql.ErrNoRows) {
		c.Status(http.StatusNoContent)
		return
	}
	if err != nil {
		h.fail(c, fmt.Errorf("read next job: %w", err))
		return
	}
	d.Params, d.QueuedAt = json.RawMessage(params), queued.Time
	c.JSON(http.StatusOK, d)
}

// report serves PATCH /agents/:uuid/jobs/:jobId/status.
func (h *handler) report(c *gin.Context) {
	tenant, agent, ok := h.agent(c)
	if !ok {
		return
	}
	body, ok := httpx.ReadBody(c, maxStatusBody, h.WriteError)
	if !ok {
		return
	}
	// Not strict: a newer agent may send fields this cloud does not know.
	var u control.JobStatusUpdate
	if err := json.Unmarshal(body, &u); err != nil {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "body: not a status update: "+err.Error())
		return
	}
	if err := u.Check(); err != nil {
		h.WriteError(c, http.StatusUnprocessableEntity, "validation_failed", err.Error())
		return
	}
	ctx := c.Request.Context()
	before, e, err := h.moveExecution(ctx, tenant, c.Param("jobId"), agent, u, true)
	if err != nil {
		h.fail(c, err)
		return
	}
	if before != e.Status {
		changes := []change{{tenant: tenant, job: e.JobID, agent: agent, status: string(e.Status), reason: e.StatusReason, at: e.UpdatedAt}}
		if e.Status.Terminal() {
			done, err := h.complete(ctx, e.JobID)
			if err != nil {
				h.Log.Warn("complete job", "job", e.JobID, "err", err)
			}
			changes = append(changes, done...)
		}
		h.announce(ctx, h.userRecorder(c), agent, actorKindAgent, changes)
	}
	c.JSON(http.StatusOK, e)
}

// move is moveExecution without the status before.
func (h *handler) move(ctx context.Context, tenant, job, agent string, u control.JobStatusUpdate, byAgent bool) (Execution, error) {
	_, e, err := h.moveExecution(ctx, tenant, job, agent, u, byAgent)
	return e, err
}

// moveExecution moves an execution to u.Status with a conditional UPDATE
// on the status it read, reading again when another move came first. An
// agent's in_progress heartbeat only moves updated_at; its repeated final
// report changes nothing. It returns
// the status before and the execution after.
func (c *core) moveExecution(ctx context.Context, tenant, job, agent string, u control.JobStatusUpdate, byAgent bool) (control.ExecStatus, Execution, error) {
	for range 5 {
		cur, err := c.execution(ctx, c.DB.SQL(), tenant, job, agent)
		if err != nil {
			return "", cur, err
		}
		if byAgent && cur.ReleasedAt == nil {
			// The agent cannot know of it: the rollout has not handed
			// it out.
			return "", cur, fmt.Errorf("%w: job %s has no released execution on agent %s", ErrNotFound, job, agent)
		}
		if cur.Status.Terminal() {
			if byAgent && cur.Status == u.Status {
				return cur.Status, cur, nil // a repeated final report
			}
			return "", cur, &EndedError{Status: cur.Status, msg: fmt.Sprintf("execution of job %s on agent %s is %s", job, agent, cur.Status)}
		}
		if !cur.Status.CanMove(u.Status) {
			return "", cur, fmt.Errorf("%w: status: an execution that is %s cannot move to %s", ErrInvalid, cur.Status, u.Status)
		}
		now := c.now()
		var res sql.Result
		switch {
		case cur.Status == u.Status:
			res, err = c.DB.SQL().ExecContext(ctx, `UPDATE job_executions SET updated_at = $1 WHERE job_id = $2 AND agent_uuid = $3 AND status = $4`,
				c.t(now), cur.JobID, agent, string(cur.Status))
		case u.Status == control.ExecInProgress:
			res, err = c.DB.SQL().ExecContext(ctx, `UPDATE job_executions SET status = $1, status_reason = $2, started_at = $3, updated_at = $3
WHERE job_id = $4 AND agent_uuid = $5 AND status = $6`, string(u.Status), u.StatusReason, c.t(now), cur.JobID, agent, string(cur.Status))
		default:
			var exit any
			if len(u.ExitData) > 0 && string(u.ExitData) != "null" {
				exit = string(u.ExitData)
			}
			res, err = c.DB.SQL().ExecContext(ctx, `UPDATE job_executions SET status = $1, status_reason = $2, result = $3, exit_data = $4,
finished_at = $5, updated_at = $5 WHERE job_id = $6 AND agent_uuid = $7 AND status = $8`,
				string(u.Status), u.StatusReason, u.Result, exit, c.t(now), cur.JobID, agent, string(cur.Status))
		}
		if err != nil {
			return "", cur, fmt.Errorf("move execution %s/%s: %w", job, agent, err)
		}
		if n, _ := res.RowsAffected(); n != 1 {
			continue
		}
		e, err := c.execution(ctx, c.DB.SQL(), tenant, cur.JobID, agent)
		return cur.Status, e, err
	}
	return "", Execution{}, fmt.Errorf("move execution %s/%s: it keeps moving under this one", job, agent)
}
