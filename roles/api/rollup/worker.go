package rollup

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// Defaults of the worker's settings; the retentions are the config keys
// api.rollup_hourly_retention and api.rollup_daily_retention.
const (
	DefaultHourlyRetention = 365 * day
	DefaultDailyRetention  = 0
	// DefaultEvery is the time between rounds, so an hour is in the
	// rollup about Settle plus a minute after it ended.
	DefaultEvery = time.Minute
	// Settle is how long after its end an hour is rolled up. Migration
	// 0022's trigger marks a reading inserted more than five minutes after
	// its time as late; waiting twice as long leaves five minutes for the
	// transaction that inserted an unmarked reading to commit.
	Settle = 10 * time.Minute
)

// lockKey is the pg_advisory_lock key of the rollup worker.
const lockKey int64 = 7305104960

// Chunks bound one transaction's work on a first run over a long history.
const (
	hourChunk = 6 * time.Hour
	dayChunk  = 7 * day
	lateBatch = 100
)

// Options configure a Worker; zero fields take the defaults.
type Options struct {
	// HourlyRetention and DailyRetention are how long the rollups are
	// kept; 0 keeps them forever. Hours are deleted only once their day
	// is rolled up.
	HourlyRetention, DailyRetention time.Duration
	Every                           time.Duration
	Logger                          *slog.Logger
	Registerer                      prometheus.Registerer
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// OptionsFrom takes the retentions from the api section:
// api.rollup_hourly_retention and api.rollup_daily_retention.
func OptionsFrom(c config.API) Options {
	return Options{HourlyRetention: c.RollupHourlyRetention, DailyRetention: c.RollupDailyRetention}
}

// Worker is the rollup service: a round at start and every Every.
type Worker struct {
	db  *db.DB
	o   Options
	m   *metrics
	log *slog.Logger
	// hourlyKeep and dailyKeep are time.Durations: the retentions in
	// effect, which PUT /admin/system-config changes between rounds.
	hourlyKeep, dailyKeep atomic.Int64
}

// New returns the worker for d, doing no I/O.
func New(d *db.DB, o Options) *Worker {
	if o.Every <= 0 {
		o.Every = DefaultEvery
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{db: d, o: o, m: newMetrics(o.Registerer), log: o.Logger}
	w.SetRetentions(o.HourlyRetention, o.DailyRetention)
	return w
}

// SetRetentions changes how long hourly and daily rollups are kept, from
// the next round on; <= 0 keeps them forever.
func (w *Worker) SetRetentions(hourly, daily time.Duration) {
	w.hourlyKeep.Store(int64(max(hourly, 0)))
	w.dailyKeep.Store(int64(max(daily, 0)))
}

// Retentions are the rollups' retentions in effect (hourly, daily).
func (w *Worker) Retentions() (hourly, daily time.Duration) {
	return time.Duration(w.hourlyKeep.Load()), time.Duration(w.dailyKeep.Load())
}

// Name implements lifecycle.Service.
func (w *Worker) Name() string { return "api-rollup" }

// Start implements lifecycle.Service.
func (w *Worker) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (w *Worker) Stop(context.Context) error { return nil }

// Run rolls up at once and then every Every until ctx ends; a failed
// round is logged and counted, and the next one tries again.
func (w *Worker) Run(ctx context.Context) error {
	t := time.NewTicker(w.o.Every)
	defer t.Stop()
	for {
		if _, err := w.Round(ctx); err != nil && ctx.Err() == nil {
			w.log.Warn("rollup round", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// state is the stored coverage, as the round changes it.
type state struct {
	hourly, daily Window
}

// Round does one round: late hours, new hours, new days, retention. It
// reports false when another replica holds the lock and did nothing.
func (w *Worker) Round(ctx context.Context) (bool, error) {
	ran, err := w.round(ctx)
	switch {
	case err != nil:
		w.m.rounds.WithLabelValues("failed").Inc()
	case !ran:
		w.m.rounds.WithLabelValues("skipped").Inc()
	default:
		w.m.rounds.WithLabelValues("done").Inc()
	}
	return ran, err
}

func (w *Worker) round(ctx context.Context) (bool, error) {
	if w.db.Dialect().Engine != db.Postgres {
		// SQLite's writer is one connection that ingest shares: each
		// transaction takes it, and it is free in between.
		r := w.newRound(w.db.SQL())
		return true, r.run(ctx)
	}
	conn, err := w.db.SQL().Conn(ctx)
	if err != nil {
		return false, fmt.Errorf("rollup connection: %w", err)
	}
	defer conn.Close()
	// A session lock on this connection: the replica holding it does
	// the round, the others skip theirs.
	var got bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", lockKey).Scan(&got); err != nil {
		return false, fmt.Errorf("rollup lock: %w", err)
	}
	if !got {
		return false, nil
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.ExecContext(uctx, "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
			// A connection discarded instead of returned to the
			// pool ends its session, which releases the lock.
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	r := w.newRound(conn)
	return true, r.run(ctx)
}

// conn is where a round runs its statements: the connection holding the
// lock on PostgreSQL, the database handle on SQLite.
type conn interface {
	BeginTx(ctx context.Context, opts *sql.TxOptions) (*sql.Tx, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// round is one round's work.
type round struct {
	w    *Worker
	conn conn
	now  time.Time
	dl   db.Dialect
	st   state
	// The retentions, read once so that a change in the middle of a
	// round does not apply to half of it.
	hourlyKeep, dailyKeep time.Duration
}

func (w *Worker) newRound(c conn) *round {
	r := &round{w: w, conn: c, now: w.o.Now().UTC(), dl: w.db.Dialect()}
	r.hourlyKeep, r.dailyKeep = w.Retentions()
	return r
}

func (r *round) run(ctx context.Context) error {
	c, err := Load(ctx, r.conn)
	if err != nil {
		return err
	}
	r.st = state{hourly: c.Hourly, daily: c.Daily}
	target := r.now.Add(-Settle).Truncate(time.Hour)
	if r.st.hourly.From.IsZero() {
		if err := r.initialise(ctx, target); err != nil {
			return err
		}
	}
	if err := r.late(ctx); err != nil {
		return err
	}
	var hours, days time.Duration
	for r.st.hourly.To.Before(target) {
		from := r.st.hourly.To
		to := minTime(from.Add(hourChunk), target)
		if err := r.tx(ctx, func(tx *sql.Tx) error {
			if err := r.exec(ctx, tx, hourlySQL(r.dl), from, to); err != nil {
				return fmt.Errorf("roll up hours %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
			}
			r.st.hourly.To = to
			return nil
		}); err != nil {
			return err
		}
		hours += to.Sub(from) / time.Hour
	}
	dayTarget := r.st.hourly.To.Truncate(day)
	for r.st.daily.To.Before(dayTarget) {
		from := r.st.daily.To
		to := minTime(from.Add(dayChunk), dayTarget)
		if err := r.tx(ctx, func(tx *sql.Tx) error {
			if err := r.exec(ctx, tx, dailySQL(r.dl), from, to); err != nil {
				return fmt.Errorf("roll up days %s to %s: %w", from.Format(time.DateOnly), to.Format(time.DateOnly), err)
			}
			r.st.daily.To = to
			return nil
		}); err != nil {
			return err
		}
		days += to.Sub(from) / day
	}
	r.w.m.buckets.WithLabelValues("hourly", "new").Add(float64(hours))
	r.w.m.buckets.WithLabelValues("daily", "new").Add(float64(days))
	if hours > 1 || days > 0 {
		r.w.log.Info("rolled up", "hours", int64(hours), "days", int64(days), "until", r.st.hourly.To)
	}
	if err := r.retain(ctx); err != nil {
		return err
	}
	r.w.m.lag.Set(r.now.Sub(r.st.hourly.To).Seconds())
	return nil
}

// initialise starts the rollups at the hour of the oldest reading, or at
// target when there is none: the one full read of readings, on the first
// round ever.
func (r *round) initialise(ctx context.Context, target time.Time) error {
	var oldest db.Timestamp
	if err := r.conn.QueryRowContext(ctx, `SELECT MIN(time) FROM readings WHERE value IS NOT NULL AND tenant_id IS NOT NULL`).Scan(&oldest); err != nil {
		return fmt.Errorf("find the oldest reading: %w", err)
	}
	start := target
	if !oldest.IsZero() && oldest.Before(target) {
		start = oldest.Truncate(time.Hour)
	}
	r.st.hourly = Window{From: start, To: start}
	r.st.daily = Window{From: start.Truncate(day), To: start.Truncate(day)}
	r.w.log.Info("rollups start", "from", start)
	return r.tx(ctx, func(*sql.Tx) error { return nil })
}

// late rolls up again the hours (and their days) that got readings after
// they were rolled up, as readings_rollup_late lists them. Marks are taken
// and the hours rolled up in one transaction: a reading committed after
// it marks its hour again, as the deleted mark no longer conflicts.
func (r *round) late(ctx context.Context) error {
	for {
		var n int
		err := r.tx(ctx, func(tx *sql.Tx) error {
			rows, err := tx.QueryContext(ctx, `DELETE FROM readings_rollup_late WHERE bucket IN (
  SELECT bucket FROM readings_rollup_late ORDER BY bucket LIMIT $1) RETURNING bucket`, lateBatch)
			if err != nil {
				return fmt.Errorf("take late hours: %w", err)
			}
			var hours []time.Time
			for rows.Next() {
				var ts db.Timestamp
				if err := rows.Scan(&ts); err != nil {
					rows.Close()
					return fmt.Errorf("scan late hour: %w", err)
				}
				hours = append(hours, ts.Time)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return fmt.Errorf("take late hours: %w", err)
			}
			n = len(hours)
			slices.SortFunc(hours, time.Time.Compare)
			return r.reroll(ctx, tx, hours)
		})
		if err != nil || n < lateBatch {
			return err
		}
	}
}

// reroll rolls up the given hours again, in time order, and their days.
// An hour before the hourly rollup's start (a backfill) extends it back
// to that hour, unless retention would delete it; an hour not rolled up
// yet waits for its turn.
func (r *round) reroll(ctx context.Context, tx *sql.Tx, hours []time.Time) error {
	cut := retentionCut(r.now, r.hourlyKeep, time.Hour)
	var days []time.Time
	for _, h := range hours {
		if !h.Before(r.st.hourly.To) || h.Before(cut) {
			continue
		}
		from, to := h, h.Add(time.Hour)
		if h.Before(r.st.hourly.From) {
			to = r.st.hourly.From
		}
		if err := r.exec(ctx, tx, hourlySQL(r.dl), from, to); err != nil {
			return fmt.Errorf("roll up late hours %s to %s: %w", from.Format(time.RFC3339), to.Format(time.RFC3339), err)
		}
		r.st.hourly.From = minTime(r.st.hourly.From, from)
		r.w.m.buckets.WithLabelValues("hourly", "late").Add(float64(to.Sub(from) / time.Hour))
		if d := h.Truncate(day); len(days) == 0 || !days[len(days)-1].Equal(d) {
			days = append(days, d)
		}
	}
	for _, d := range days {
		if !d.Before(r.st.daily.To) {
			continue
		}
		from, to := d, d.Add(day)
		if d.Before(r.st.daily.From) {
			to = r.st.daily.From
		}
		if err := r.exec(ctx, tx, dailySQL(r.dl), from, to); err != nil {
			return fmt.Errorf("roll up late days %s to %s: %w", from.Format(time.DateOnly), to.Format(time.DateOnly), err)
		}
		r.st.daily.From = minTime(r.st.daily.From, from)
		r.w.m.buckets.WithLabelValues("daily", "late").Add(float64(to.Sub(from) / day))
	}
	if len(hours) > 0 {
		r.w.log.Info("late readings rolled up", "hours", len(hours), "days", len(days))
	}
	return nil
}

// retain deletes the rollups past their retention; an hour goes only once
// its day is rolled up.
func (r *round) retain(ctx context.Context) error {
	for _, t := range []struct {
		table, name string
		keep, width time.Duration
		win         *Window
		limit       time.Time
	}{
		{Hourly, "hourly", r.hourlyKeep, time.Hour, &r.st.hourly, r.st.daily.To},
		{Daily, "daily", r.dailyKeep, day, &r.st.daily, r.st.daily.To},
	} {
		if t.keep <= 0 {
			continue
		}
		cut := minTime(retentionCut(r.now, t.keep, t.width), t.limit)
		if !t.win.From.Before(cut) {
			continue
		}
		var deleted int64
		for t.win.From.Before(cut) {
			to := minTime(t.win.From.Add(dayChunk), cut)
			if err := r.tx(ctx, func(tx *sql.Tx) error {
				res, err := tx.ExecContext(ctx, "DELETE FROM "+t.table+" WHERE bucket < $1", r.dl.TimeArg(to))
				if err != nil {
					return fmt.Errorf("delete %s rollups before %s: %w", t.name, to.Format(time.RFC3339), err)
				}
				n, err := res.RowsAffected()
				if err != nil {
					return fmt.Errorf("delete %s rollups: %w", t.name, err)
				}
				deleted += n
				t.win.From = to
				t.win.To = maxTime(t.win.To, to)
				return nil
			}); err != nil {
				return err
			}
		}
		r.w.m.deleted.WithLabelValues(t.name).Add(float64(deleted))
		if deleted > 0 {
			r.w.log.Info("rollups deleted", "table", t.table, "rows", deleted, "before", cut)
		}
	}
	return nil
}

// tx runs f in a transaction that also stores the state f leaves.
func (r *round) tx(ctx context.Context, f func(*sql.Tx) error) error {
	tx, err := r.conn.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin rollup: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := noJIT(ctx, tx, r.dl); err != nil {
		return err
	}
	saved := r.st
	if err := f(tx); err != nil {
		r.st = saved
		return err
	}
	for _, s := range []struct {
		name string
		w    Window
	}{{"hourly", r.st.hourly}, {"daily", r.st.daily}} {
		if _, err := tx.ExecContext(ctx, `UPDATE readings_rollup_state SET low = $1, high = $2 WHERE name = $3`,
			r.dl.TimeArg(s.w.From), r.dl.TimeArg(s.w.To), s.name); err != nil {
			r.st = saved
			return fmt.Errorf("store rollup state: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		r.st = saved
		return fmt.Errorf("commit rollup: %w", err)
	}
	return nil
}

// exec runs a rollup statement over [from, to).
func (r *round) exec(ctx context.Context, tx *sql.Tx, q string, from, to time.Time) error {
	_, err := tx.ExecContext(ctx, q, r.dl.TimeArg(from), r.dl.TimeArg(to))
	return err
}

// retentionCut is the first bucket of width w a retention keeps at now;
// the zero time for keep 0 (everything).
func retentionCut(now time.Time, keep, w time.Duration) time.Time {
	if keep <= 0 {
		return time.Time{}
	}
	return ceilTo(now.Add(-keep), w)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

var _ lifecycle.Service = (*Worker)(nil)
