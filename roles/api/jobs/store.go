package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
)

// Targets resolves a job's targets in the caller's tenant. roles/api
// adapts the registry (and its fleets) to it.
type Targets interface {
	// Owned reports which of uuids are agents of tenant.
	Owned(ctx context.Context, tenant string, uuids []string) (map[string]bool, error)
	// FleetMembers lists the agents of the tenant's fleet; an unknown
	// fleet is an error for which Deps.IsNotFound is true.
	FleetMembers(ctx context.Context, tenant, fleetID string) ([]string, error)
	// AgentsMatching lists the tenant's agents the tag query matches; a
	// query that does not parse is an error for which Deps.IsInvalid is
	// true.
	AgentsMatching(ctx context.Context, tenant string, tags map[string]json.RawMessage) ([]string, error)
}

// Publisher sends a command to an agent: command.Publisher.
type Publisher interface {
	Publish(tenant, agent codec.UUID, name string, payload []byte) error
}

// Deps is what the package needs from the role.
type Deps struct {
	DB      *db.DB
	Targets Targets
	// IsNotFound tells Targets' not-found errors (an unknown fleet);
	// IsInvalid its validation errors (a tag query that does not parse).
	// nil recognises none.
	IsNotFound func(error) bool
	IsInvalid  func(error) bool
	Publisher  Publisher
	// Caller is the request's authenticated user.
	Caller     func(*gin.Context) (accounts.Caller, bool)
	WriteError httpx.ErrorWriter
	// Audit records an event with the request's address; Record one
	// without a request (the scheduler's), like accounts.Store.Record.
	Audit  func(*gin.Context, accounts.Event)
	Record func(context.Context, accounts.Event) error
	// AdminGate runs after the admin check of admin-only routes (the
	// admin rate limit); nil runs nothing.
	AdminGate gin.HandlerFunc
	// DeviceAuth checks the X-Device-API-Key of the agent routes against
	// the :uuid of the path (device.Authenticator); Device then returns
	// the authenticated agent's tenant and UUID (from device.From).
	DeviceAuth gin.HandlerFunc
	Device     func(*gin.Context) (tenant, agent string, ok bool)
	// Streams carries the live channel, Channel(tenant).
	Streams    streamstore.Store
	Log        *slog.Logger
	Registerer prometheus.Registerer
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// Job statuses.
const (
	JobInProgress = "in_progress"
	JobCompleted  = "completed"
	JobAborted    = "aborted"
	JobCancelled  = "cancelled"
)

// Limits of a job.
const (
	// MaxTargets bounds the agents of one job.
	MaxTargets = 10000
	// TimeoutGrace is added to an execution's timeout before the cloud
	// marks it timed_out: the agent's own timeout fires first and its
	// report has time to arrive.
	TimeoutGrace = 30 * time.Second
)

var (
	// ErrNotFound is a job, execution, template or agent that does not
	// exist in the caller's tenant.
	ErrNotFound = errors.New("not found")
	// ErrInvalid is a request that fails validation (422).
	ErrInvalid = errors.New("validation failed")
	// ErrConflict is a move the object's state refuses (409).
	ErrConflict = errors.New("conflict")
	// ErrEnded is a status report for an execution that has ended (409
	// control.CodeExecutionEnded).
	ErrEnded = errors.New("execution ended")
)

// EndedError is ErrEnded with the status the execution ended with, which
// the 409 answer carries as error.status: the agent records that status
// instead of running or finishing the execution.
type EndedError struct {
	Status control.ExecStatus
	msg    string
}

func (e *EndedError) Error() string { return ErrEnded.Error() + ": " + e.msg }

// Is makes errors.Is(err, ErrEnded) true.
func (e *EndedError) Is(target error) bool { return target == ErrEnded }

// Rollout paces the release of a job's executions.
type Rollout struct {
	// AgentsPerMinute releases the first execution at once, then one
	// every 60/AgentsPerMinute s; 0 releases all at once.
	AgentsPerMinute int `json:"agentsPerMinute"`
}

// Abort ends a job whose executions fail too often.
type Abort struct {
	// FailedPercent aborts the job when failed+timed_out is more than
	// this share of the finished executions; 0 never aborts.
	FailedPercent int `json:"failedPercent"`
	// MinExecuted is how many executions must have finished before the
	// rule applies (default 1).
	MinExecuted int `json:"minExecuted"`
}

// TargetSpec names a job's agents: exactly one of its fields.
type TargetSpec struct {
	Agents []string `json:"agents,omitempty"`
	Fleet  string   `json:"fleet,omitempty"`
	// TagQuery is the tags object of POST /agents/query (docs/access.md,
	// section Tag queries).
	TagQuery map[string]json.RawMessage `json:"tagQuery,omitempty"`
}

// Job is one dispatch of a handler to a set of agents.
type Job struct {
	ID             string          `json:"jobId"`
	TemplateID     *string         `json:"templateId"`
	Handler        string          `json:"handler"`
	Params         json.RawMessage `json:"params"`
	Targets        TargetSpec      `json:"targets"`
	Rollout        Rollout         `json:"rollout"`
	Abort          Abort           `json:"abort"`
	TimeoutSeconds int             `json:"timeoutSeconds"`
	Status         string          `json:"status"`
	Total          int             `json:"total"`
	Counts         map[string]int  `json:"counts"`
	CreatedBy      string          `json:"createdBy"`
	CreatedAt      time.Time       `json:"createdAt"`
	CompletedAt    *time.Time      `json:"completedAt"`
	Executions     []Execution     `json:"executions,omitempty"`

	tenant string
}

// Execution is one job on one agent.
type Execution struct {
	JobID        string             `json:"jobId"`
	AgentUUID    string             `json:"agentUuid"`
	Handler      string             `json:"handler"`
	Status       control.ExecStatus `json:"status"`
	StatusReason string             `json:"statusReason"`
	Result       string             `json:"result,omitempty"`
	ExitData     json.RawMessage    `json:"exitData,omitempty"`
	QueuedAt     time.Time          `json:"queuedAt"`
	ReleasedAt   *time.Time         `json:"releasedAt"`
	StartedAt    *time.Time         `json:"startedAt"`
	FinishedAt   *time.Time         `json:"finishedAt"`
	UpdatedAt    time.Time          `json:"updatedAt"`

	id     int64
	tenant string
}

// core is what the routes and the scheduler share: the database, the
// clock and the announcement of moves.
type core struct {
	Deps
	m *metrics
}

func newCore(d Deps) *core {
	if d.Log == nil {
		d.Log = slog.New(slog.DiscardHandler)
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	if d.IsNotFound == nil {
		d.IsNotFound = func(error) bool { return false }
	}
	if d.IsInvalid == nil {
		d.IsInvalid = func(error) bool { return false }
	}
	if d.Record == nil {
		d.Record = func(context.Context, accounts.Event) error { return nil }
	}
	return &core{Deps: d, m: newMetrics(d.Registerer)}
}

// now is the clock at the database's precision (microseconds), so a time
// written and read back compares equal.
func (c *core) now() time.Time { return c.Now().UTC().Truncate(time.Microsecond) }

func (c *core) t(t time.Time) any { return c.DB.Dialect().TimeArg(t) }

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// nullTime turns a nullable time column into a pointer.
func nullTime(ts db.Timestamp) *time.Time {
	if ts.IsZero() {
		return nil
	}
	t := ts.Time
	return &t
}

// timePtr scans a nullable time column.
type timePtr struct{ p **time.Time }

func (s timePtr) Scan(src any) error {
	var ts db.Timestamp
	if err := ts.Scan(src); err != nil {
		return err
	}
	*s.p = nullTime(ts)
	return nil
}

const execColumns = `e.id, e.job_id, e.agent_uuid, e.tenant_uuid, j.handler, e.status, e.status_reason, e.result, e.exit_data,
e.queued_at, e.released_at, e.started_at, e.finished_at, e.updated_at`

func scanExecution(r interface{ Scan(...any) error }) (Execution, error) {
	var e Execution
	var exit sql.NullString
	var queued, updated db.Timestamp
	err := r.Scan(&e.id, &e.JobID, &e.AgentUUID, &e.tenant, &e.Handler, &e.Status, &e.StatusReason, &e.Result, &exit,
		&queued, timePtr{&e.ReleasedAt}, timePtr{&e.StartedAt}, timePtr{&e.FinishedAt}, &updated)
	if err != nil {
		return e, err
	}
	e.QueuedAt, e.UpdatedAt = queued.Time, updated.Time
	if exit.Valid && exit.String != "" && exit.String != "null" {
		e.ExitData = json.RawMessage(exit.String)
	}
	return e, nil
}

const jobColumns = `id, tenant_uuid, template_id, handler, params, targets, agents_per_minute, abort_failed_percent,
abort_min_executed, timeout_seconds, status, total, created_by, created_at, completed_at`

func scanJob(r interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var tmpl sql.NullString
	var params, targets string
	var created db.Timestamp
	err := r.Scan(&j.ID, &j.tenant, &tmpl, &j.Handler, &params, &targets, &j.Rollout.AgentsPerMinute, &j.Abort.FailedPercent,
		&j.Abort.MinExecuted, &j.TimeoutSeconds, &j.Status, &j.Total, &j.CreatedBy, &created, timePtr{&j.CompletedAt})
	if err != nil {
		return j, err
	}
	if tmpl.Valid {
		j.TemplateID = &tmpl.String
	}
	j.CreatedAt = created.Time
	j.Params = json.RawMessage(params)
	if err := json.Unmarshal([]byte(targets), &j.Targets); err != nil {
		return j, fmt.Errorf("decode job %s targets: %w", j.ID, err)
	}
	return j, nil
}

// job reads one of the tenant's jobs with its counts.
func (c *core) job(ctx context.Context, tenant, id string) (Job, error) {
	if _, err := codec.ParseUUID(id); err != nil {
		return Job{}, fmt.Errorf("%w: job %q", ErrNotFound, clip(id))
	}
	j, err := scanJob(c.DB.ReadSQL().QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE id = $1 AND tenant_uuid = $2`, id, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("%w: job %s", ErrNotFound, id)
	}
	if err != nil {
		return j, fmt.Errorf("read job %s: %w", id, err)
	}
	j.Counts, err = c.counts(ctx, id)
	return j, err
}

// counts is the number of a job's executions in each status.
func (c *core) counts(ctx context.Context, id string) (map[string]int, error) {
	out := map[string]int{}
	for _, s := range allStatuses {
		out[string(s)] = 0
	}
	rows, err := c.DB.ReadSQL().QueryContext(ctx, `SELECT status, COUNT(*) FROM job_executions WHERE job_id = $1 GROUP BY status`, id)
	if err != nil {
		return nil, fmt.Errorf("count job %s executions: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("count job %s executions: %w", id, err)
		}
		out[s] = n
	}
	return out, rows.Err()
}

var allStatuses = []control.ExecStatus{control.ExecQueued, control.ExecInProgress, control.ExecSucceeded,
	control.ExecFailed, control.ExecTimedOut, control.ExecCancelled}

// execution reads the tenant's execution of job on agent.
func (c *core) execution(ctx context.Context, q querier, tenant, job, agent string) (Execution, error) {
	if _, err := codec.ParseUUID(job); err != nil {
		return Execution{}, fmt.Errorf("%w: job %q", ErrNotFound, clip(job))
	}
	e, err := scanExecution(q.QueryRowContext(ctx, `SELECT `+execColumns+` FROM job_executions e JOIN jobs j ON j.id = e.job_id
WHERE e.job_id = $1 AND e.agent_uuid = $2 AND e.tenant_uuid = $3`, job, agent, tenant))
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("%w: job %s has no execution on agent %s", ErrNotFound, job, agent)
	}
	if err != nil {
		return e, fmt.Errorf("read execution %s/%s: %w", job, agent, err)
	}
	return e, nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
