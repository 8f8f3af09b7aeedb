package retention

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// storageParams are every partition's, for the reasons migration 0021
// gives (an append-only table: no room kept for updates, vacuum and
// analyze after 2% new rows).
const storageParams = "fillfactor = 100, autovacuum_vacuum_insert_scale_factor = 0.02, autovacuum_analyze_scale_factor = 0.02"

// lockTimeout bounds the wait for readings' ACCESS EXCLUSIVE lock, which
// every change of partitions needs: while the round waits, new queries
// queue behind it, so it gives up and tries again next round rather than
// stall reads behind a long export.
const lockTimeout = "5s"

// maintainPartitions makes days ahead, moves readings_future's rows into
// them, and drops what the retention no longer keeps, in one transaction:
// inserts wait for it (a few milliseconds when readings_future is empty,
// as it is unless clocks run days ahead) and never find a time without a
// partition.
func (m *Maintainer) maintainPartitions(ctx context.Context) (Result, error) {
	res := Result{Mode: ModePartitions}
	now, retention := m.o.Now(), m.Retention()
	got, err := m.locked(ctx, func(tx *sql.Tx) error {
		// Bounds print in the session's time zone; UTC makes them parse
		// the same whatever the server's default.
		if _, err := tx.ExecContext(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
			return fmt.Errorf("set time zone: %w", err)
		}
		l, err := readLayout(ctx, tx)
		if err != nil {
			return err
		}
		res.Before = l.names()
		p, err := planFor(l, now, retention, m.o.Ahead, func() (bool, error) {
			var has bool
			err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM "+pastName+")").Scan(&has)
			if err != nil {
				return false, fmt.Errorf("look into %s: %w", pastName, err)
			}
			return has, nil
		})
		if err != nil {
			return err
		}
		if !p.empty() {
			if err := m.apply(ctx, tx, p, &res); err != nil {
				return err
			}
			if l, err = readLayout(ctx, tx); err != nil {
				return err
			}
		}
		res.After = l.names()
		return nil
	})
	res.Skipped = !got
	if err != nil {
		return res, err
	}
	m.o.Metrics.created.Add(float64(len(res.Created)))
	m.o.Metrics.dropped.Add(float64(len(res.Dropped)))
	m.o.Metrics.moved.Add(float64(res.Moved))
	if len(res.Created)+len(res.Dropped) > 0 || res.Moved > 0 {
		m.o.Log.Info("readings partitions maintained", "created", len(res.Created), "dropped", len(res.Dropped),
			"rows_moved", res.Moved, "first", res.After[0], "second", res.After[1], "last_day", res.After[len(res.After)-2],
			"retention", retention)
	}
	return res, nil
}

// apply carries out p. Its order keeps every time covered at commit:
// the old future is detached first, what goes is dropped before the new
// past (which overlaps it) is made, and the old future's rows go back in
// once their days exist.
func (m *Maintainer) apply(ctx context.Context, tx *sql.Tx, p plan, res *Result) error {
	var stmts []string
	add := func(s ...string) { stmts = append(stmts, s...) }
	add("SET LOCAL lock_timeout = '"+lockTimeout+"'", "LOCK TABLE readings IN ACCESS EXCLUSIVE MODE")
	const oldFuture = futureName + "_old"
	if p.moveFuture {
		add("ALTER TABLE readings DETACH PARTITION "+futureName, "ALTER TABLE "+futureName+" RENAME TO "+oldFuture)
	}
	if p.recyclePast {
		add("DROP TABLE " + pastName)
		res.Dropped = append(res.Dropped, pastName)
	}
	for _, d := range p.drop {
		add("DROP TABLE " + d.name)
		res.Dropped = append(res.Dropped, d.name)
	}
	if p.recyclePast {
		add(fmt.Sprintf("CREATE TABLE %s PARTITION OF readings FOR VALUES FROM (MINVALUE) TO (%s) WITH (%s)",
			pastName, literal(p.pastHi), storageParams))
	}
	for _, d := range p.create {
		add(fmt.Sprintf("CREATE TABLE %s PARTITION OF readings FOR VALUES FROM (%s) TO (%s) WITH (%s)",
			d.name, literal(d.lo), literal(d.hi), storageParams))
		res.Created = append(res.Created, d.name)
	}
	if p.moveFuture {
		add(fmt.Sprintf("CREATE TABLE %s PARTITION OF readings FOR VALUES FROM (%s) TO (MAXVALUE) WITH (%s)",
			futureName, literal(p.futureLo), storageParams))
	}
	for _, s := range stmts {
		if _, err := tx.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", firstWords(s), err)
		}
	}
	if !p.moveFuture {
		return nil
	}
	// Same columns in the same order: the old future was made PARTITION
	// OF readings.
	r, err := tx.ExecContext(ctx, "INSERT INTO readings SELECT * FROM "+oldFuture)
	if err != nil {
		return fmt.Errorf("move rows of %s: %w", futureName, err)
	}
	if res.Moved, err = r.RowsAffected(); err != nil {
		return fmt.Errorf("move rows of %s: %w", futureName, err)
	}
	if _, err := tx.ExecContext(ctx, "DROP TABLE "+oldFuture); err != nil {
		return fmt.Errorf("drop %s: %w", oldFuture, err)
	}
	return nil
}

// literal writes t as a timestamptz literal; it is our own value, never
// input.
func literal(t time.Time) string { return "'" + t.UTC().Format("2006-01-02 15:04:05.999999") + "+00'" }

// firstWords names a statement in an error without its bounds.
func firstWords(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(len(f), 4)], " ")
}

// readLayout reads readings' partitions from the catalog.
func readLayout(ctx context.Context, tx *sql.Tx) (layout, error) {
	rows, err := tx.QueryContext(ctx, `SELECT c.relname, pg_get_expr(c.relpartbound, c.oid)
		FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
		WHERE i.inhparent = 'readings'::regclass`)
	if err != nil {
		return layout{}, fmt.Errorf("list readings partitions: %w", err)
	}
	defer rows.Close()
	var parts []part
	for rows.Next() {
		var name, bound string
		if err := rows.Scan(&name, &bound); err != nil {
			return layout{}, fmt.Errorf("list readings partitions: %w", err)
		}
		lo, hi, err := parseBound(bound)
		if err != nil {
			return layout{}, fmt.Errorf("partition %s: %w", name, err)
		}
		parts = append(parts, part{name: name, lo: lo, hi: hi})
	}
	if err := rows.Err(); err != nil {
		return layout{}, fmt.Errorf("list readings partitions: %w", err)
	}
	return newLayout(parts)
}
