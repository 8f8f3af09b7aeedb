package jobs

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

// DispatchRequest is the body of POST /jobs/execute; POST
// /agents/:uuid/jobs takes it without Targets.
type DispatchRequest struct {
	TemplateID     string                     `json:"templateId,omitempty"`
	Handler        string                     `json:"handler,omitempty"`
	Params         json.RawMessage            `json:"params,omitempty"`
	Parameters     map[string]json.RawMessage `json:"parameters,omitempty"`
	Targets        *TargetSpec                `json:"targets,omitempty"`
	Rollout        Rollout                    `json:"rollout"`
	Abort          *Abort                     `json:"abort,omitempty"`
	TimeoutSeconds *int                       `json:"timeoutSeconds,omitempty"`
}

// maxAgentsPerMinute bounds the rollout rate; past it, 0 (all at once)
// says the same.
const maxAgentsPerMinute = 60000

// prepared is a checked dispatch, ready to store.
type prepared struct {
	templateID *string
	handler    string
	params     json.RawMessage
	targets    TargetSpec
	agents     []string
	rollout    Rollout
	abort      Abort
	timeout    int
}

// prepare resolves the template and the targets of a dispatch.
func (c *core) prepare(ctx context.Context, tenant string, in DispatchRequest) (prepared, error) {
	var p prepared
	params := in.Params
	var declared []Parameter
	timeout := 0
	switch {
	case in.TemplateID != "" && (in.Handler != "" || len(in.Params) > 0):
		return p, invalid("templateId", "give templateId or handler and params, not both")
	case in.TemplateID != "":
		t, err := c.template(ctx, tenant, in.TemplateID)
		if err != nil {
			return p, err
		}
		id := t.ID
		p.templateID, p.handler, params, declared, timeout = &id, t.Handler, t.Params, t.Parameters, t.TimeoutSeconds
	default:
		if !control.KnownHandler(in.Handler) {
			return p, invalid("handler", "must be one of %s, got %q", strings.Join(control.JobHandlers, ", "), clip(in.Handler))
		}
		p.handler = in.Handler
	}
	params, err := normalParams(params)
	if err != nil {
		return p, err
	}
	if p.params, err = resolve(params, declared, in.Parameters); err != nil {
		return p, err
	}
	if err := checkHandlerParams(p.handler, p.params); err != nil {
		return p, err
	}
	if in.TimeoutSeconds != nil {
		timeout = *in.TimeoutSeconds
	}
	if err := checkTimeout(timeout); err != nil {
		return p, err
	}
	p.timeout = timeout
	if r := in.Rollout.AgentsPerMinute; r < 0 || r > maxAgentsPerMinute {
		return p, invalid("rollout.agentsPerMinute", "must be 0..%d, got %d", maxAgentsPerMinute, r)
	}
	p.rollout = in.Rollout
	p.abort = Abort{MinExecuted: 1}
	if in.Abort != nil {
		p.abort = *in.Abort
		if p.abort.MinExecuted == 0 {
			p.abort.MinExecuted = 1
		}
	}
	if p.abort.FailedPercent < 0 || p.abort.FailedPercent > 100 {
		return p, invalid("abort.failedPercent", "must be 0..100, got %d", p.abort.FailedPercent)
	}
	if p.abort.MinExecuted < 1 || p.abort.MinExecuted > MaxTargets {
		return p, invalid("abort.minExecuted", "must be 1..%d, got %d", MaxTargets, p.abort.MinExecuted)
	}
	if in.Targets == nil {
		return p, invalid("targets", "is required: agents, fleet or tagQuery")
	}
	p.targets = *in.Targets
	p.agents, err = c.resolveTargets(ctx, tenant, p.targets)
	return p, err
}

// resolveTargets turns a target description into the tenant's agents, in
// rollout order and without repeats.
func (c *core) resolveTargets(ctx context.Context, tenant string, t TargetSpec) ([]string, error) {
	given := 0
	for _, set := range []bool{t.Agents != nil, t.Fleet != "", t.TagQuery != nil} {
		if set {
			given++
		}
	}
	if given != 1 {
		return nil, invalid("targets", "give exactly one of agents, fleet and tagQuery")
	}
	var agents []string
	var err error
	switch {
	case t.Agents != nil:
		if len(t.Agents) > MaxTargets {
			return nil, invalid("targets.agents", "at most %d agents, got %d", MaxTargets, len(t.Agents))
		}
		for i, a := range t.Agents {
			u, err := codec.ParseUUID(a)
			if err != nil {
				return nil, invalid(fmt.Sprintf("targets.agents[%d]", i), "must be a hyphenated UUID, got %q", clip(a))
			}
			agents = append(agents, u.String())
		}
		agents = dedupe(agents)
		owned, err := c.Targets.Owned(ctx, tenant, agents)
		if err != nil {
			return nil, fmt.Errorf("check job targets: %w", err)
		}
		for _, a := range agents {
			if !owned[a] {
				return nil, fmt.Errorf("%w: agent %s", ErrNotFound, a)
			}
		}
	case t.Fleet != "":
		agents, err = c.Targets.FleetMembers(ctx, tenant, t.Fleet)
		if c.IsNotFound(err) {
			return nil, fmt.Errorf("%w: fleet %s", ErrNotFound, clip(t.Fleet))
		}
		if err != nil {
			return nil, fmt.Errorf("list fleet %s members: %w", clip(t.Fleet), err)
		}
		agents = dedupe(agents)
	default:
		agents, err = c.Targets.AgentsMatching(ctx, tenant, t.TagQuery)
		if c.IsInvalid(err) {
			return nil, invalid("targets.tagQuery", "%v", err)
		}
		if err != nil {
			return nil, fmt.Errorf("match job targets: %w", err)
		}
		agents = dedupe(agents)
	}
	if len(agents) == 0 {
		return nil, invalid("targets", "name no agent")
	}
	if len(agents) > MaxTargets {
		return nil, invalid("targets", "at most %d agents, got %d", MaxTargets, len(agents))
	}
	return agents, nil
}

func dedupe(in []string) []string {
	seen := make(map[string]bool, len(in))
	out := in[:0:0]
	for _, a := range in {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	return out
}

// insertRows bounds the rows of one INSERT statement (SQLite allows 32766
// arguments; each row takes 7).
const insertRows = 500

// create stores the job and its queued executions in one transaction.
func (c *core) create(ctx context.Context, tenant, createdBy string, p prepared) (string, error) {
	id := codec.NewUUID().String()
	now := c.now()
	targets, _ := json.Marshal(p.targets)
	tx, err := c.DB.SQL().BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("create job: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	var tmpl any
	if p.templateID != nil {
		tmpl = *p.templateID
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO jobs (id, tenant_uuid, template_id, handler, params, targets, agents_per_minute,
abort_failed_percent, abort_min_executed, timeout_seconds, status, total, released, next_release_at, created_by, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0, $13, $14, $13)`,
		id, tenant, tmpl, p.handler, string(p.params), string(targets), p.rollout.AgentsPerMinute, p.abort.FailedPercent,
		p.abort.MinExecuted, p.timeout, JobInProgress, len(p.agents), c.t(now), createdBy); err != nil {
		return "", fmt.Errorf("create job: %w", err)
	}
	for start := 0; start < len(p.agents); start += insertRows {
		end := min(start+insertRows, len(p.agents))
		var s db.SQLBuilder
		s.Write(`INSERT INTO job_executions (job_id, tenant_uuid, agent_uuid, seq, status, queued_at, updated_at) VALUES `)
		for i := start; i < end; i++ {
			if i > start {
				s.Write(`, `)
			}
			at := s.Arg(c.t(now))
			s.Write(`(`, s.Arg(id), `, `, s.Arg(tenant), `, `, s.Arg(p.agents[i]), `, `, s.Arg(i), `, `, s.Arg(string(control.ExecQueued)), `, `, at, `, `, at, `)`)
		}
		if _, err := tx.ExecContext(ctx, s.String(), s.Args()...); err != nil {
			return "", fmt.Errorf("create job executions: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("create job: %w", err)
	}
	c.m.executions.WithLabelValues(string(control.ExecQueued)).Add(float64(len(p.agents)))
	return id, nil
}

// release lets go of the executions the rollout allows now for one job
// (next_release_at due) and sends each its CmdJob. The job's released
// counter moves with a conditional UPDATE, so of two replicas releasing
// at once exactly one wins each step.
func (c *core) release(ctx context.Context, r releasable) error {
	now := c.now()
	n := r.total - r.released
	next := now
	if r.perMinute > 0 {
		n = 1
		next = now.Add(time.Minute / time.Duration(r.perMinute))
	}
	res, err := c.DB.SQL().ExecContext(ctx, `UPDATE jobs SET released = $1, next_release_at = $2
WHERE id = $3 AND released = $4 AND status = $5`, r.released+n, c.t(next), r.id, r.released, JobInProgress)
	if err != nil {
		return fmt.Errorf("release job %s: %w", r.id, err)
	}
	if won, _ := res.RowsAffected(); won != 1 {
		return nil
	}
	rows, err := c.DB.SQL().QueryContext(ctx, `UPDATE job_executions SET released_at = $1, updated_at = $1
WHERE job_id = $2 AND seq >= $3 AND seq < $4 AND status = $5 AND released_at IS NULL RETURNING agent_uuid, queued_at`,
		c.t(now), r.id, r.released, r.released+n, string(control.ExecQueued))
	if err != nil {
		return fmt.Errorf("release job %s executions: %w", r.id, err)
	}
	type out struct {
		agent  string
		queued db.Timestamp
	}
	var released []out
	for rows.Next() {
		var o out
		if err := rows.Scan(&o.agent, &o.queued); err != nil {
			rows.Close()
			return fmt.Errorf("release job %s executions: %w", r.id, err)
		}
		released = append(released, o)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("release job %s executions: %w", r.id, err)
	}
	for _, o := range released {
		payload, _ := json.Marshal(control.JobDispatch{JobID: r.id, Handler: r.handler, Params: r.params,
			TimeoutSeconds: r.timeout, QueuedAt: o.queued.Time})
		c.publish(r.tenant, o.agent, control.CmdJob, payload)
	}
	return nil
}

// releasable is what release needs of a job.
type releasable struct {
	id, tenant, handler string
	params              json.RawMessage
	timeout, perMinute  int
	total, released     int
}

const releasableColumns = `id, tenant_uuid, handler, params, timeout_seconds, agents_per_minute, total, released`

func scanReleasable(r interface{ Scan(...any) error }) (releasable, error) {
	var j releasable
	var params string
	err := r.Scan(&j.id, &j.tenant, &j.handler, &params, &j.timeout, &j.perMinute, &j.total, &j.released)
	j.params = json.RawMessage(params)
	return j, err
}

// releaseOne runs release for a job just created, so its first
// executions go out without waiting for the scheduler's next pass.
func (c *core) releaseOne(ctx context.Context, id string) error {
	r, err := scanReleasable(c.DB.SQL().QueryRowContext(ctx, `SELECT `+releasableColumns+` FROM jobs WHERE id = $1`, id))
	if err != nil {
		return fmt.Errorf("read job %s: %w", id, err)
	}
	return c.release(ctx, r)
}
