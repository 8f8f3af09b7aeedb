package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Jobs is the jobs table: one row per job execution the agent received
// (docs/agent.md, section Jobs).
type Jobs struct {
	db   *db.DB
	cond *condition
}

// Job states in the agent's store: received is queued here, running has
// been accepted by the cloud as in progress, ended holds the final
// status.
const (
	JobReceived = "received"
	JobRunning  = "running"
	JobEnded    = "ended"
)

// JobKeep is how many ended and reported executions the table keeps;
// older ones are deleted as new ones end, so the table stays small on a
// device that runs jobs for years. The cloud never dispatches an ended
// execution again, so forgetting an old one cannot run it twice.
const JobKeep = 1000

// Job is one execution.
type Job struct {
	JobID          string    `json:"jobId"`
	Handler        string    `json:"handler"`
	Params         string    `json:"params,omitempty"`
	TimeoutSeconds int       `json:"timeoutSeconds"`
	State          string    `json:"state"`
	Status         string    `json:"status,omitempty"`
	Reason         string    `json:"statusReason,omitempty"`
	Result         string    `json:"result,omitempty"`
	ExitData       string    `json:"exitData,omitempty"`
	Reported       bool      `json:"reported"`
	ReceivedAt     time.Time `json:"receivedAt"`
	StartedAt      time.Time `json:"startedAt,omitzero"`
	EndedAt        time.Time `json:"endedAt,omitzero"`
}

// JobEnd is the final report of an execution.
type JobEnd struct {
	Status, Reason, Result, ExitData string
}

const jobColumns = `job_id, handler, params, timeout_seconds, state, status, reason, result, exit_data, reported,
	received_at, started_at, ended_at`

// Receive stores j as received unless its jobId is known already, and
// reports whether it was new: the one place that decides whether a
// dispatch runs.
func (s *Jobs) Receive(ctx context.Context, j Job) (_ bool, err error) {
	defer s.cond.observe(&err)
	now := nowMS()
	res, err := s.db.SQL().ExecContext(ctx, `INSERT INTO jobs (job_id, handler, params, timeout_seconds, state, received_at, updated_at)
		VALUES ($1, $2, $3, $4, 'received', $5, $5) ON CONFLICT (job_id) DO NOTHING`, j.JobID, j.Handler, j.Params, j.TimeoutSeconds, now)
	if err != nil {
		return false, fmt.Errorf("receive job %s: %w", j.JobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("receive job %s: %w", j.JobID, err)
	}
	s.cond.wrote()
	return n == 1, nil
}

// Queued counts the executions received and not started.
func (s *Jobs) Queued(ctx context.Context) (_ int, err error) {
	defer s.cond.observe(&err)
	var n int
	if err := s.db.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE state = 'received'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count queued jobs: %w", err)
	}
	return n, nil
}

// Next returns the oldest received execution; ErrNotFound when none.
func (s *Jobs) Next(ctx context.Context) (_ Job, err error) {
	defer s.cond.observe(&err)
	row := s.db.SQL().QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE state = 'received'
		ORDER BY received_at, rowid LIMIT 1`)
	j, err := scanJob(row)
	if errors.Is(err, sql.ErrNoRows) {
		return j, ErrNotFound
	}
	if err != nil {
		return j, fmt.Errorf("next job: %w", err)
	}
	return j, nil
}

// Get returns one execution; ErrNotFound when the jobId is unknown.
func (s *Jobs) Get(ctx context.Context, jobID string) (_ Job, err error) {
	defer s.cond.observe(&err)
	j, err := scanJob(s.db.SQL().QueryRowContext(ctx, `SELECT `+jobColumns+` FROM jobs WHERE job_id = $1`, jobID))
	if errors.Is(err, sql.ErrNoRows) {
		return j, fmt.Errorf("job %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return j, fmt.Errorf("get job %s: %w", jobID, err)
	}
	return j, nil
}

// SetState moves an execution that has not ended to received or
// running; a run records its start.
func (s *Jobs) SetState(ctx context.Context, jobID, state string) (err error) {
	defer s.cond.observe(&err)
	now := nowMS()
	_, err = s.db.SQL().ExecContext(ctx, `UPDATE jobs SET state = $2, updated_at = $3,
		started_at = CASE WHEN $2 = 'running' THEN $3 ELSE started_at END WHERE job_id = $1 AND state <> 'ended'`, jobID, state, now)
	if err != nil {
		return fmt.Errorf("set job %s %s: %w", jobID, state, err)
	}
	s.cond.wrote()
	return nil
}

// End stores the final report of an execution, once: an execution that
// ended already keeps its first report, and End reports false. reported
// is set when the cloud needs no report (it ended the execution itself).
// Ended and reported executions beyond JobKeep are deleted.
func (s *Jobs) End(ctx context.Context, jobID string, e JobEnd, reported bool) (_ bool, err error) {
	defer s.cond.observe(&err)
	now := nowMS()
	res, err := s.db.SQL().ExecContext(ctx, `UPDATE jobs SET state = 'ended', status = $2, reason = $3, result = $4, exit_data = $5,
		reported = $6, ended_at = $7, updated_at = $7 WHERE job_id = $1 AND state <> 'ended'`, jobID, e.Status, e.Reason, e.Result, e.ExitData, reported, now)
	if err != nil {
		return false, fmt.Errorf("end job %s: %w", jobID, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("end job %s: %w", jobID, err)
	}
	if _, err := s.db.SQL().ExecContext(ctx, `DELETE FROM jobs WHERE state = 'ended' AND reported = 1 AND job_id NOT IN
		(SELECT job_id FROM jobs WHERE state = 'ended' AND reported = 1 ORDER BY received_at DESC, rowid DESC LIMIT $1)`, JobKeep); err != nil {
		return false, fmt.Errorf("prune ended jobs: %w", err)
	}
	s.cond.wrote()
	return n == 1, nil
}

// Tombstone records jobID as ended with e and reported, unless it is
// known: a cancel that arrived before its dispatch keeps the dispatch
// from running when it comes.
func (s *Jobs) Tombstone(ctx context.Context, jobID string, e JobEnd) (err error) {
	defer s.cond.observe(&err)
	now := nowMS()
	_, err = s.db.SQL().ExecContext(ctx, `INSERT INTO jobs (job_id, handler, state, status, reason, reported, received_at, ended_at, updated_at)
		VALUES ($1, '', 'ended', $2, $3, 1, $4, $4, $4) ON CONFLICT (job_id) DO NOTHING`, jobID, e.Status, e.Reason, now)
	if err != nil {
		return fmt.Errorf("tombstone job %s: %w", jobID, err)
	}
	s.cond.wrote()
	return nil
}

// MarkReported records that the cloud took the final report.
func (s *Jobs) MarkReported(ctx context.Context, jobID string) (err error) {
	defer s.cond.observe(&err)
	if _, err := s.db.SQL().ExecContext(ctx, `UPDATE jobs SET reported = 1, updated_at = $2 WHERE job_id = $1`, jobID, nowMS()); err != nil {
		return fmt.Errorf("mark job %s reported: %w", jobID, err)
	}
	s.cond.wrote()
	return nil
}

// List returns up to limit executions, newest first.
func (s *Jobs) List(ctx context.Context, limit int) ([]Job, error) {
	return s.query(ctx, `SELECT `+jobColumns+` FROM jobs ORDER BY received_at DESC, rowid DESC LIMIT $1`, limit)
}

// Open returns the executions a restart must finish, oldest first: those
// running when the agent stopped and those ended but not reported.
func (s *Jobs) Open(ctx context.Context) ([]Job, error) {
	return s.query(ctx, `SELECT `+jobColumns+` FROM jobs WHERE state = 'running' OR (state = 'ended' AND reported = 0)
		ORDER BY received_at, rowid`)
}

func (s *Jobs) query(ctx context.Context, q string, args ...any) (_ []Job, err error) {
	defer s.cond.observe(&err)
	rows, err := s.db.SQL().QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("list jobs: %w", err)
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func scanJob(row interface{ Scan(...any) error }) (Job, error) {
	var j Job
	var received int64
	var started, ended sql.NullInt64
	err := row.Scan(&j.JobID, &j.Handler, &j.Params, &j.TimeoutSeconds, &j.State, &j.Status, &j.Reason, &j.Result, &j.ExitData,
		&j.Reported, &received, &started, &ended)
	j.ReceivedAt = time.UnixMilli(received).UTC()
	if started.Valid {
		j.StartedAt = time.UnixMilli(started.Int64).UTC()
	}
	if ended.Valid {
		j.EndedAt = time.UnixMilli(ended.Int64).UTC()
	}
	return j, err
}
