package retention

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// Row-by-row retention walks the series through the key (agent, metric,
// time), which leads every readings table, rather than scanning for old
// times: readings has no index on time alone, and one would cost every
// insert a second B-tree for the sake of an hourly delete. Each series'
// old rows are the front of its key range, so finding and deleting them
// reads only them.
const (
	firstSeriesSQL = `SELECT agent_uuid, metric_name FROM readings ORDER BY agent_uuid, metric_name LIMIT 1`
	nextSeriesSQL  = `SELECT agent_uuid, metric_name FROM readings
		WHERE (agent_uuid, metric_name) > ($1, $2) ORDER BY agent_uuid, metric_name LIMIT 1`
	hasOldSQL = `SELECT EXISTS (SELECT 1 FROM readings WHERE agent_uuid = $1 AND metric_name = $2 AND time < $3)`
	// A LIMIT inside IN, as DELETE ... LIMIT is not portable (SQLite
	// builds without it by default).
	deleteOldSQL = `DELETE FROM readings WHERE agent_uuid = $1 AND metric_name = $2 AND time IN (
		SELECT time FROM readings WHERE agent_uuid = $1 AND metric_name = $2 AND time < $3 ORDER BY time LIMIT $4)`
)

// deleteRows deletes readings older than the retention, series by series,
// at most Options.Batch rows per statement. Each statement is its own
// transaction, so the writer is free between them, and after each full
// batch the round pauses so queued writes go first.
func (m *Maintainer) deleteRows(ctx context.Context) (Result, error) {
	res := Result{Mode: ModeRows}
	retention := m.Retention()
	if retention <= 0 {
		return res, nil
	}
	cut := m.db.Dialect().TimeArg(m.o.Now().Add(-retention))
	run := func() error {
		read := m.db.ReadSQL()
		var agent, metric string
		err := read.QueryRowContext(ctx, firstSeriesSQL).Scan(&agent, &metric)
		for err == nil {
			if err := m.deleteSeries(ctx, agent, metric, cut, &res); err != nil {
				return err
			}
			err = read.QueryRowContext(ctx, nextSeriesSQL, agent, metric).Scan(&agent, &metric)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("walk readings series: %w", err)
		}
		return nil
	}
	var err error
	if m.db.Dialect().Engine == db.Postgres {
		// The lock only keeps replicas from walking the same series.
		var got bool
		got, err = m.locked(ctx, func(*sql.Tx) error { return run() })
		res.Skipped = !got
	} else {
		err = run()
	}
	if res.Deleted > 0 {
		m.o.Log.Info("old readings deleted", "rows", res.Deleted, "retention", retention)
	}
	return res, err
}

func (m *Maintainer) deleteSeries(ctx context.Context, agent, metric string, cut any, res *Result) error {
	var has bool
	if err := m.db.ReadSQL().QueryRowContext(ctx, hasOldSQL, agent, metric, cut).Scan(&has); err != nil {
		return fmt.Errorf("look for old readings: %w", err)
	}
	for has {
		r, err := m.db.SQL().ExecContext(ctx, deleteOldSQL, agent, metric, cut, m.o.Batch)
		if err != nil {
			return fmt.Errorf("delete old readings: %w", err)
		}
		n, err := r.RowsAffected()
		if err != nil {
			return fmt.Errorf("delete old readings: %w", err)
		}
		res.Deleted += n
		m.o.Metrics.deleted.Add(float64(n))
		if has = n >= int64(m.o.Batch); has && !lifecycle.Sleep(ctx, m.o.Pause) {
			return ctx.Err()
		}
	}
	return nil
}
