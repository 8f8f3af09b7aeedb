package export

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
)

// Job states.
const (
	StatusQueued  = "queued"
	StatusRunning = "running"
	StatusDone    = "done"
	StatusFailed  = "failed"
)

// ErrNotFound is a job that does not exist or is another tenant's.
var ErrNotFound = errors.New("not found")

// job is one export_jobs row.
type job struct {
	ID, Tenant, CreatedBy string
	Format, Params        string
	Status, Error         string
	Rows, Size            int64
	Secret                string
	CreatedAt             time.Time
	StartedAt, FinishedAt time.Time // zero until then
	ExpiresAt             time.Time // zero until finished
}

type store struct{ db *db.DB }

func (s *store) t(at time.Time) any { return s.db.Dialect().TimeArg(at) }

// optTime is a nullable time column's argument.
func (s *store) optTime(at time.Time) any {
	if at.IsZero() {
		return nil
	}
	return s.t(at)
}

func (s *store) create(ctx context.Context, j job) error {
	_, err := s.db.SQL().ExecContext(ctx, `INSERT INTO export_jobs (id, tenant_uuid, created_by, format, params, status, link_secret, created_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`, j.ID, j.Tenant, db.UUIDArg(j.CreatedBy), j.Format, j.Params, StatusQueued, j.Secret, s.t(j.CreatedAt))
	if err != nil {
		return fmt.Errorf("create export job: %w", err)
	}
	return nil
}

const jobColumns = `id, tenant_uuid, created_by, format, params, status, error, row_count, size_bytes, link_secret,
created_at, started_at, finished_at, expires_at`

func scanJob(row interface{ Scan(...any) error }) (job, error) {
	var (
		j                         job
		by                        sql.NullString
		created, started, fin, ex db.Timestamp
	)
	err := row.Scan(&j.ID, &j.Tenant, &by, &j.Format, &j.Params, &j.Status, &j.Error, &j.Rows, &j.Size, &j.Secret,
		&created, &started, &fin, &ex)
	j.CreatedBy, j.CreatedAt, j.StartedAt, j.FinishedAt, j.ExpiresAt = by.String, created.Time, started.Time, fin.Time, ex.Time
	return j, err
}

// get returns a job of tenant; tenant "" finds it in any tenant, for the
// download route, whose token names the job.
func (s *store) get(ctx context.Context, tenant, id string) (job, error) {
	q, args := `SELECT `+jobColumns+` FROM export_jobs WHERE id = $1`, []any{id}
	if tenant != "" {
		q, args = q+` AND tenant_uuid = $2`, append(args, tenant)
	}
	j, err := scanJob(s.db.ReadSQL().QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return job{}, fmt.Errorf("%w: export job %s", ErrNotFound, id)
	}
	if err != nil {
		return job{}, fmt.Errorf("read export job %s: %w", id, err)
	}
	return j, nil
}

// claim takes the oldest queued job for this replica, or reports false.
// The conditional update makes one replica the winner when several try.
func (s *store) claim(ctx context.Context, now time.Time) (job, bool, error) {
	for range 3 {
		var id string
		err := s.db.SQL().QueryRowContext(ctx, `SELECT id FROM export_jobs WHERE status = $1 ORDER BY created_at, id LIMIT 1`, StatusQueued).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			return job{}, false, nil
		}
		if err != nil {
			return job{}, false, fmt.Errorf("find a queued export job: %w", err)
		}
		res, err := s.db.SQL().ExecContext(ctx, `UPDATE export_jobs SET status = $1, started_at = $2, heartbeat_at = $2
WHERE id = $3 AND status = $4`, StatusRunning, s.t(now), id, StatusQueued)
		if err != nil {
			return job{}, false, fmt.Errorf("claim export job %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			j, err := s.get(ctx, "", id)
			return j, err == nil, err
		}
	}
	// Lost every race: the others are busy with the queue.
	return job{}, false, nil
}

// heartbeat shows the job is being written, with the rows so far.
func (s *store) heartbeat(ctx context.Context, id string, rows int64, now time.Time) error {
	_, err := s.db.SQL().ExecContext(ctx, `UPDATE export_jobs SET heartbeat_at = $1, row_count = $2 WHERE id = $3 AND status = $4`,
		s.t(now), rows, id, StatusRunning)
	if err != nil {
		return fmt.Errorf("export job %s heartbeat: %w", id, err)
	}
	return nil
}

// finish records the outcome of a running job.
func (s *store) finish(ctx context.Context, j job) error {
	_, err := s.db.SQL().ExecContext(ctx, `UPDATE export_jobs SET status = $1, error = $2, row_count = $3, size_bytes = $4,
finished_at = $5, expires_at = $6 WHERE id = $7 AND status = $8`,
		j.Status, j.Error, j.Rows, j.Size, s.optTime(j.FinishedAt), s.optTime(j.ExpiresAt), j.ID, StatusRunning)
	if err != nil {
		return fmt.Errorf("finish export job %s: %w", j.ID, err)
	}
	return nil
}

// requeue gives a job this replica stops writing back to the queue.
func (s *store) requeue(ctx context.Context, id string) error {
	_, err := s.db.SQL().ExecContext(ctx, `UPDATE export_jobs SET status = $1, started_at = NULL, heartbeat_at = NULL, row_count = 0
WHERE id = $2 AND status = $3`, StatusQueued, id, StatusRunning)
	if err != nil {
		return fmt.Errorf("requeue export job %s: %w", id, err)
	}
	return nil
}

// failStale fails the running jobs whose replica stopped beating before
// since (it died mid-file), keeping them until expires.
func (s *store) failStale(ctx context.Context, since, now, expires time.Time) (int64, error) {
	res, err := s.db.SQL().ExecContext(ctx, `UPDATE export_jobs SET status = $1, error = $2, finished_at = $3, expires_at = $4
WHERE status = $5 AND heartbeat_at < $6`, StatusFailed, "the server writing the export stopped; create the job again",
		s.t(now), s.t(expires), StatusRunning, s.t(since))
	if err != nil {
		return 0, fmt.Errorf("fail stale export jobs: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// expired returns up to limit finished jobs past their expiry.
func (s *store) expired(ctx context.Context, now time.Time, limit int) ([]job, error) {
	rows, err := s.db.SQL().QueryContext(ctx, `SELECT `+jobColumns+` FROM export_jobs WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2`,
		s.t(now), limit)
	if err != nil {
		return nil, fmt.Errorf("find expired export jobs: %w", err)
	}
	defer rows.Close()
	var out []job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, fmt.Errorf("read expired export job: %w", err)
		}
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read expired export jobs: %w", err)
	}
	return out, nil
}

func (s *store) remove(ctx context.Context, id string) error {
	if _, err := s.db.SQL().ExecContext(ctx, `DELETE FROM export_jobs WHERE id = $1`, id); err != nil {
		return fmt.Errorf("delete export job %s: %w", id, err)
	}
	return nil
}
