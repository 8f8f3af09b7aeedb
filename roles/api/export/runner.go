package export

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/roles/api/readings"
)

// runner writes the queued jobs' files one at a time, and deletes jobs
// and files past their retention. One job at a time bounds what exports
// take from the database and the disk; the queue is shared by the
// replicas, each taking the oldest job it can claim.
type runner struct {
	x    *Export
	wake chan struct{}
}

// staleAfter is how long a running job may go without a heartbeat before
// it counts as abandoned by a replica that died.
const staleAfter = 2 * time.Minute

func (r *runner) Name() string { return "api-export" }

// Start creates the directory, private to the server's user: the files
// hold tenants' readings.
func (r *runner) Start(context.Context) error {
	if err := os.MkdirAll(r.x.d.Settings.Dir, 0o700); err != nil {
		return fmt.Errorf("export directory (api.export_dir): %w", err)
	}
	return nil
}

func (r *runner) Run(ctx context.Context) error {
	t := time.NewTicker(r.x.d.PollEvery)
	defer t.Stop()
	for {
		r.sweep(ctx)
		for ctx.Err() == nil && r.runOne(ctx) {
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-t.C:
		}
	}
}

func (r *runner) Stop(context.Context) error { return nil }

// notify wakes the runner for a job just queued.
func (r *runner) notify() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// sweep fails abandoned jobs and deletes expired ones with their files.
func (r *runner) sweep(ctx context.Context) {
	x := r.x
	now := x.d.Now()
	if n, err := x.s.failStale(ctx, now.Add(-staleAfter), now, now.Add(x.d.Settings.Retention)); err != nil {
		x.d.Log.Warn("export sweep failed", "err", err)
	} else if n > 0 {
		x.d.Log.Warn("export jobs abandoned by a stopped server failed", "jobs", n)
	}
	for {
		jobs, err := x.s.expired(ctx, now, 100)
		if err != nil {
			x.d.Log.Warn("export sweep failed", "err", err)
			return
		}
		for _, j := range jobs {
			// The file first: a row left behind is retried, a file left
			// behind without its row would never be found again.
			if err := os.Remove(r.path(j)); err != nil && !errors.Is(err, os.ErrNotExist) {
				x.d.Log.Warn("export file not deleted", "job", j.ID, "err", err)
				return
			}
			if err := x.s.remove(ctx, j.ID); err != nil {
				x.d.Log.Warn("export sweep failed", "err", err)
				return
			}
		}
		if len(jobs) < 100 {
			return
		}
	}
}

// path is where a job's file lives.
func (r *runner) path(j job) string {
	return filepath.Join(r.x.d.Settings.Dir, j.Tenant, j.ID+"."+j.Format)
}

// runOne claims and writes one job; false when there was none.
func (r *runner) runOne(ctx context.Context) bool {
	x := r.x
	j, ok, err := x.s.claim(ctx, x.d.Now())
	if err != nil {
		if ctx.Err() == nil {
			x.d.Log.Warn("export queue unreadable", "err", err)
		}
		return false
	}
	if !ok {
		return false
	}
	t0 := time.Now()
	rows, size, err := r.write(ctx, j)
	if ctx.Err() != nil {
		// Shutting down: another replica, or this one after its restart,
		// writes the job from the start.
		bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := x.s.requeue(bg, j.ID); err != nil {
			x.d.Log.Warn("export job not requeued", "job", j.ID, "err", err)
		}
		return false
	}
	now := x.d.Now()
	j.Status, j.Rows, j.Size, j.FinishedAt, j.ExpiresAt = StatusDone, rows, size, now, now.Add(x.d.Settings.Retention)
	if err != nil {
		x.d.Log.Warn("export job failed", "job", j.ID, "err", err)
		j.Status, j.Error, j.Size = StatusFailed, "the export could not be written; try again later", 0
	} else {
		x.d.Log.Info("export job done", "job", j.ID, "format", j.Format, "rows", rows, "bytes", size,
			"took", time.Since(t0).Round(time.Millisecond))
	}
	if err := x.s.finish(ctx, j); err != nil {
		x.d.Log.Warn("export job outcome lost", "job", j.ID, "err", err)
	}
	return true
}

// write exports j to a temporary file renamed into place once complete,
// so a download never sees half a file.
func (r *runner) write(ctx context.Context, j job) (rows, size int64, err error) {
	x := r.x
	q, err := url.ParseQuery(j.Params)
	if err != nil {
		return 0, 0, fmt.Errorf("export job %s params: %w", j.ID, err)
	}
	sel, err := readings.ParseSelection(q, j.CreatedAt)
	if err != nil {
		return 0, 0, fmt.Errorf("export job %s params: %w", j.ID, err)
	}
	tenant, err := tenantKey(j.Tenant)
	if err != nil {
		return 0, 0, err
	}
	final := r.path(j)
	if err := os.MkdirAll(filepath.Dir(final), 0o700); err != nil {
		return 0, 0, fmt.Errorf("export directory: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(final), "."+j.ID+".*.tmp")
	if err != nil {
		return 0, 0, fmt.Errorf("create export file: %w", err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	cw := &countingWriter{w: f}
	bw := bufio.NewWriterSize(cw, 256<<10)
	rows, err = writeExport(ctx, x.d.DB, bw, tenant, j.Format, sel, func(n int64) error {
		return x.s.heartbeat(ctx, j.ID, n, x.d.Now())
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(f.Name(), final)
	}
	if err != nil {
		return rows, 0, fmt.Errorf("export job %s: %w", j.ID, err)
	}
	return rows, cw.n, nil
}

var _ lifecycle.Service = (*runner)(nil)
