package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// maxPerPass bounds the jobs or executions one step of a pass takes; the
// next pass takes the rest.
const maxPerPass = 500

// Scheduler moves jobs along without a request: rollout releases, aborts,
// timeouts and completion. Several replicas may run one each on the same
// database.
type Scheduler struct {
	c     *core
	every time.Duration
}

// NewScheduler builds the scheduler service; it passes every every
// (docs/fleets-and-jobs.md: 250 ms).
func NewScheduler(d Deps, every time.Duration) lifecycle.Service {
	if every <= 0 {
		every = 250 * time.Millisecond
	}
	return &Scheduler{c: newCore(d), every: every}
}

// Name implements lifecycle.Service.
func (s *Scheduler) Name() string { return "api-jobs" }

// Start implements lifecycle.Service.
func (s *Scheduler) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (s *Scheduler) Stop(context.Context) error { return nil }

// Run passes until ctx ends. A failed pass is logged and the next one
// tries again.
func (s *Scheduler) Run(ctx context.Context) error {
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := s.Pass(ctx); err != nil && ctx.Err() == nil {
				s.c.Log.Warn("job scheduler pass", "err", err)
			}
		}
	}
}

// Pass runs one pass: timeouts, aborts, releases, completions, then the
// active-jobs gauge. Tests call it with a fake clock.
func (s *Scheduler) Pass(ctx context.Context) error {
	c := s.c
	// Every step concerns jobs in progress: with none, as most of the
	// time, a pass is one indexed count, not five statements.
	active, err := c.activeJobs(ctx)
	if err != nil {
		return err
	}
	c.m.active.Set(float64(active))
	if active == 0 {
		return nil
	}
	rec := c.systemRecorder(ctx)
	var errs []error
	changes, err := c.timeouts(ctx)
	errs = append(errs, err)
	c.announce(ctx, rec, systemActor, actorKindSystem, changes)
	changes, err = c.aborts(ctx)
	errs = append(errs, err)
	c.announce(ctx, rec, systemActor, actorKindSystem, changes)
	errs = append(errs, c.releaseDue(ctx))
	changes, err = c.complete(ctx, "")
	errs = append(errs, err)
	c.announce(ctx, rec, systemActor, actorKindSystem, changes)
	if active, err := c.activeJobs(ctx); err != nil {
		errs = append(errs, err)
	} else {
		c.m.active.Set(float64(active))
	}
	return errors.Join(errs...)
}

// activeJobs counts the jobs in progress.
func (c *core) activeJobs(ctx context.Context) (int, error) {
	var n int
	if err := c.DB.ReadSQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE status = $1`, JobInProgress).Scan(&n); err != nil {
		return 0, fmt.Errorf("count active jobs: %w", err)
	}
	return n, nil
}

// releaseDue releases what the rollout of every job allows now.
func (c *core) releaseDue(ctx context.Context) error {
	rows, err := c.DB.ReadSQL().QueryContext(ctx, `SELECT `+releasableColumns+` FROM jobs
WHERE status = $1 AND released < total AND next_release_at <= $2 ORDER BY next_release_at LIMIT $3`,
		JobInProgress, c.t(c.now()), maxPerPass)
	if err != nil {
		return fmt.Errorf("list jobs to release: %w", err)
	}
	var due []releasable
	for rows.Next() {
		r, err := scanReleasable(rows)
		if err != nil {
			rows.Close()
			return fmt.Errorf("list jobs to release: %w", err)
		}
		due = append(due, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list jobs to release: %w", err)
	}
	var errs []error
	for _, r := range due {
		errs = append(errs, c.release(ctx, r))
	}
	return errors.Join(errs...)
}

// deadlineExpr is the SQL time past which an in-progress execution e of
// job j has timed out: started_at + timeout (24 h when 0) + grace, in the
// column's own type.
func deadlineExpr(d db.Dialect) string {
	secs := fmt.Sprintf(`(CASE WHEN j.timeout_seconds > 0 THEN j.timeout_seconds ELSE %d END + %d)`,
		int(control.MaxJobTimeout/time.Second), int(TimeoutGrace/time.Second))
	if d.Engine == db.SQLite {
		return `(e.started_at + ` + secs + ` * 1000000)`
	}
	return `(e.started_at + ` + secs + ` * interval '1 second')`
}

// timeouts marks timed_out the in-progress executions past their
// deadline.
func (c *core) timeouts(ctx context.Context) ([]change, error) {
	now := c.now()
	rows, err := c.DB.ReadSQL().QueryContext(ctx, `SELECT e.job_id, e.agent_uuid FROM job_executions e JOIN jobs j ON j.id = e.job_id
WHERE e.status = $1 AND `+deadlineExpr(c.DB.Dialect())+` < $2 LIMIT $3`, string(control.ExecInProgress), c.t(now), maxPerPass)
	if err != nil {
		return nil, fmt.Errorf("list timed-out executions: %w", err)
	}
	var due [][2]string
	for rows.Next() {
		var job, agent string
		if err := rows.Scan(&job, &agent); err != nil {
			rows.Close()
			return nil, fmt.Errorf("list timed-out executions: %w", err)
		}
		due = append(due, [2]string{job, agent})
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list timed-out executions: %w", err)
	}
	var changes []change
	for _, d := range due {
		var tenant string
		err := c.DB.SQL().QueryRowContext(ctx, `UPDATE job_executions SET status = $1, status_reason = $2, finished_at = $3, updated_at = $3
WHERE job_id = $4 AND agent_uuid = $5 AND status = $6 RETURNING tenant_uuid`,
			string(control.ExecTimedOut), control.ReasonTimeout, c.t(now), d[0], d[1], string(control.ExecInProgress)).Scan(&tenant)
		if errors.Is(err, sql.ErrNoRows) {
			continue // another replica, or the agent's report, came first
		}
		if err != nil {
			return changes, fmt.Errorf("time out execution %s/%s: %w", d[0], d[1], err)
		}
		changes = append(changes, change{tenant: tenant, job: d[0], agent: d[1], status: string(control.ExecTimedOut),
			reason: control.ReasonTimeout, released: true, at: now})
	}
	return changes, nil
}

// aborts ends the jobs whose failures passed their abort rule:
// failed+timed_out > failedPercent % of the finished (succeeded, failed,
// timed_out) once at least minExecuted have finished.
func (c *core) aborts(ctx context.Context) ([]change, error) {
	rows, err := c.DB.ReadSQL().QueryContext(ctx, `SELECT j.id, j.tenant_uuid, j.abort_failed_percent, j.abort_min_executed,
SUM(CASE WHEN e.status IN ($1, $2) THEN 1 ELSE 0 END), SUM(CASE WHEN e.status IN ($1, $2, $3) THEN 1 ELSE 0 END)
FROM jobs j JOIN job_executions e ON e.job_id = j.id
WHERE j.status = $4 AND j.abort_failed_percent > 0
GROUP BY j.id, j.tenant_uuid, j.abort_failed_percent, j.abort_min_executed`,
		string(control.ExecFailed), string(control.ExecTimedOut), string(control.ExecSucceeded), JobInProgress)
	if err != nil {
		return nil, fmt.Errorf("check job abort rules: %w", err)
	}
	type cand struct{ id, tenant string }
	var abort []cand
	for rows.Next() {
		var id, tenant string
		var pct, minExec, bad, finished int
		if err := rows.Scan(&id, &tenant, &pct, &minExec, &bad, &finished); err != nil {
			rows.Close()
			return nil, fmt.Errorf("check job abort rules: %w", err)
		}
		if ShouldAbort(pct, minExec, bad, finished) {
			abort = append(abort, cand{id, tenant})
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("check job abort rules: %w", err)
	}
	var changes []change
	for _, a := range abort {
		ch, err := c.endJob(ctx, a.tenant, a.id, JobAborted, control.ReasonJobAborted)
		if errors.Is(err, ErrConflict) {
			continue
		}
		if err != nil {
			return changes, err
		}
		changes = append(changes, ch...)
	}
	return changes, nil
}

// ShouldAbort is the abort rule: more than failedPercent % of the
// finished executions failed or timed out, and at least minExecuted have
// finished. failedPercent 0 never aborts.
func ShouldAbort(failedPercent, minExecuted, failed, finished int) bool {
	return failedPercent > 0 && finished >= max(minExecuted, 1) && failed*100 > failedPercent*finished
}

// endJob moves an in-progress job to status (cancelled or aborted) and
// cancels its queued and in-progress executions with reason. ErrConflict
// when the job was not in progress (another replica came first, or it
// ended); ErrNotFound when the tenant has no such job.
func (c *core) endJob(ctx context.Context, tenant, id, status, reason string) ([]change, error) {
	now := c.now()
	res, err := c.DB.SQL().ExecContext(ctx, `UPDATE jobs SET status = $1, completed_at = $2 WHERE id = $3 AND tenant_uuid = $4 AND status = $5`,
		status, c.t(now), id, tenant, JobInProgress)
	if err != nil {
		return nil, fmt.Errorf("end job %s: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		j, err := c.job(ctx, tenant, id)
		if err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: job %s is %s", ErrConflict, id, j.Status)
	}
	changes := []change{{tenant: tenant, job: id, status: status, reason: reason, at: now}}
	rows, err := c.DB.SQL().QueryContext(ctx, `UPDATE job_executions SET status = $1, status_reason = $2, finished_at = $3, updated_at = $3
WHERE job_id = $4 AND status IN ($5, $6) RETURNING agent_uuid, released_at`,
		string(control.ExecCancelled), reason, c.t(now), id, string(control.ExecQueued), string(control.ExecInProgress))
	if err != nil {
		return changes, fmt.Errorf("cancel job %s executions: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var agent string
		var released db.Timestamp
		if err := rows.Scan(&agent, &released); err != nil {
			return changes, fmt.Errorf("cancel job %s executions: %w", id, err)
		}
		changes = append(changes, change{tenant: tenant, job: id, agent: agent, status: string(control.ExecCancelled),
			reason: reason, released: !released.IsZero(), quiet: true, at: now})
	}
	return changes, rows.Err()
}

// complete moves to completed the in-progress jobs (one, or all for id
// "") whose executions have all ended.
func (c *core) complete(ctx context.Context, id string) ([]change, error) {
	now := c.now()
	var s db.SQLBuilder
	s.Write(`UPDATE jobs SET status = `, s.Arg(JobCompleted), `, completed_at = `, s.Arg(c.t(now)), ` WHERE status = `, s.Arg(JobInProgress))
	if id != "" {
		s.Write(` AND id = `, s.Arg(id))
	}
	s.Write(` AND NOT EXISTS (SELECT 1 FROM job_executions e WHERE e.job_id = jobs.id AND e.status IN (`,
		s.Arg(string(control.ExecQueued)), `, `, s.Arg(string(control.ExecInProgress)), `)) RETURNING id, tenant_uuid`)
	rows, err := c.DB.SQL().QueryContext(ctx, s.String(), s.Args()...)
	if err != nil {
		return nil, fmt.Errorf("complete jobs: %w", err)
	}
	defer rows.Close()
	var changes []change
	for rows.Next() {
		var job, tenant string
		if err := rows.Scan(&job, &tenant); err != nil {
			return changes, fmt.Errorf("complete jobs: %w", err)
		}
		changes = append(changes, change{tenant: tenant, job: job, status: JobCompleted, at: now})
	}
	return changes, rows.Err()
}

var _ lifecycle.Service = (*Scheduler)(nil)
