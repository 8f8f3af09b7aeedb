package ingest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// writer stores normalised rows (sorted by key, no in-batch duplicates) and
// returns how many were new. Rows already in the table are ignored, so a
// batch delivered twice adds nothing.
type writer interface {
	Write(ctx context.Context, rows []telemetry.Row) (inserted int64, err error)
	// Probe checks the write path (connection and table), which a plain
	// ping does not: the breaker closes only when Probe succeeds.
	Probe(ctx context.Context) error
}

// probeQuery touches the readings table without reading a row.
const probeQuery = `SELECT 1 FROM readings WHERE false`

var readingColumns = []string{"time", "agent_uuid", "metric_name", "value", "protocol", "unit", "quality", "device_name", "tenant_id",
	"anomaly_score"}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullableFloat is f's value, or NULL when f is nil.
func nullableFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// pgWriter writes to PostgreSQL. In copy mode a batch of at least copyMin
// rows goes in with one binary COPY (copyBinary) straight into readings: the
// ceiling of what PostgreSQL can take. COPY cannot skip rows that exist, so
// when it hits one (a redelivered batch, rare after msgId de-duplication)
// the batch is written again through a temporary table and INSERT ... ON
// CONFLICT DO NOTHING, which costs more per row but only then. Smaller
// batches, and the insert and realtime modes, use multi-row INSERT ... ON
// CONFLICT DO NOTHING statements pipelined in one transaction.
type pgWriter struct {
	pool          *pgxpool.Pool
	copyMode      bool
	copyMin       int
	rowsPerInsert int

	mu    sync.Mutex
	stmts map[int]string // multi-row INSERT text by row count
}

func newPGWriter(pool *pgxpool.Pool, mode string, copyMin, rowsPerInsert int) *pgWriter {
	return &pgWriter{pool: pool, copyMode: mode == "copy", copyMin: copyMin, rowsPerInsert: max(1, rowsPerInsert), stmts: map[int]string{}}
}

func (w *pgWriter) Write(ctx context.Context, rows []telemetry.Row) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	if w.copyMode && len(rows) >= w.copyMin {
		n, err := copyBinary(ctx, w.pool, rows)
		if err == nil {
			return n, nil
		}
		if !isUniqueViolation(err) {
			return 0, fmt.Errorf("copy %d rows into readings: %w", len(rows), err)
		}
		return w.copyIgnoringExisting(ctx, rows)
	}
	return w.insert(ctx, rows)
}

func (w *pgWriter) Probe(ctx context.Context) error {
	_, err := w.pool.Exec(ctx, probeQuery)
	return err
}

func copySource(rows []telemetry.Row) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		var v any
		if r.Value != nil {
			v = *r.Value
		}
		return []any{r.Time, [16]byte(r.AgentUUID), r.MetricName, v, nullable(r.Protocol), nullable(r.Unit), nullable(r.Quality), nullable(r.DeviceName), nullable(r.TenantID),
			nullableFloat(r.AnomalyScore)}, nil
	})
}

func (w *pgWriter) copyIgnoringExisting(ctx context.Context, rows []telemetry.Row) (int64, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `CREATE TEMP TABLE readings_in (LIKE readings INCLUDING DEFAULTS) ON COMMIT DROP`); err != nil {
		return 0, fmt.Errorf("create staging table: %w", err)
	}
	if _, err := tx.CopyFrom(ctx, pgx.Identifier{"readings_in"}, readingColumns, copySource(rows)); err != nil {
		return 0, fmt.Errorf("copy %d rows into staging table: %w", len(rows), err)
	}
	cols := strings.Join(readingColumns, ", ")
	tag, err := tx.Exec(ctx, `INSERT INTO readings (`+cols+`) SELECT `+cols+` FROM readings_in ON CONFLICT DO NOTHING`)
	if err != nil {
		return 0, fmt.Errorf("insert from staging table: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return tag.RowsAffected(), nil
}

func (w *pgWriter) insert(ctx context.Context, rows []telemetry.Row) (int64, error) {
	tx, err := w.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	batch := &pgx.Batch{}
	for start := 0; start < len(rows); start += w.rowsPerInsert {
		chunk := rows[start:min(start+w.rowsPerInsert, len(rows))]
		args := make([]any, 0, len(chunk)*len(readingColumns))
		for i := range chunk {
			r := &chunk[i]
			var v any
			if r.Value != nil {
				v = *r.Value
			}
			args = append(args, r.Time, [16]byte(r.AgentUUID), r.MetricName, v, nullable(r.Protocol), nullable(r.Unit), nullable(r.Quality), nullable(r.DeviceName), nullable(r.TenantID),
				nullableFloat(r.AnomalyScore))
		}
		batch.Queue(w.statement(len(chunk)), args...)
	}
	res := tx.SendBatch(ctx, batch)
	var inserted int64
	for range batch.Len() {
		tag, err := res.Exec()
		if err != nil {
			_ = res.Close()
			return 0, fmt.Errorf("insert readings: %w", err)
		}
		inserted += tag.RowsAffected()
	}
	if err := res.Close(); err != nil {
		return 0, fmt.Errorf("insert readings: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return inserted, nil
}

// statement returns the INSERT for n rows; the text is built once per n so
// the pool's statement cache sees few distinct statements.
func (w *pgWriter) statement(n int) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.stmts[n]; ok {
		return s
	}
	var b strings.Builder
	b.WriteString("INSERT INTO readings (" + strings.Join(readingColumns, ", ") + ") VALUES ")
	p := 1
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteByte('(')
		for j := range readingColumns {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("$" + strconv.Itoa(p))
			p++
		}
		b.WriteByte(')')
	}
	b.WriteString(" ON CONFLICT DO NOTHING")
	w.stmts[n] = b.String()
	return w.stmts[n]
}

// sqliteWriter writes one transaction of prepared inserts through the
// single SQLite writer connection.
type sqliteWriter struct {
	db      *sql.DB
	dialect db.Dialect
}

func (w *sqliteWriter) Write(ctx context.Context, rows []telemetry.Row) (int64, error) {
	if len(rows) == 0 {
		return 0, nil
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO readings (`+strings.Join(readingColumns, ", ")+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`)
	if err != nil {
		return 0, fmt.Errorf("prepare insert: %w", err)
	}
	defer stmt.Close()
	var inserted int64
	for i := range rows {
		r := &rows[i]
		var v any
		if r.Value != nil {
			v = *r.Value
		}
		res, err := stmt.ExecContext(ctx, w.dialect.TimeArg(r.Time), r.AgentUUID.String(), r.MetricName, v,
			nullable(r.Protocol), nullable(r.Unit), nullable(r.Quality), nullable(r.DeviceName), nullable(r.TenantID), nullableFloat(r.AnomalyScore))
		if err != nil {
			return 0, fmt.Errorf("insert reading: %w", err)
		}
		n, _ := res.RowsAffected()
		inserted += n
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return inserted, nil
}

func (w *sqliteWriter) Probe(ctx context.Context) error {
	_, err := w.db.ExecContext(ctx, probeQuery)
	return err
}

func newWriter(d *db.DB, mode string, copyMin, rowsPerInsert int) writer {
	if d.Dialect().Engine == db.SQLite {
		return &sqliteWriter{db: d.SQL(), dialect: d.Dialect()}
	}
	return newPGWriter(d.Pool(), mode, copyMin, rowsPerInsert)
}

func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}
