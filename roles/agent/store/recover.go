package store

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"
)

// corruptSuffix starts the name a corrupt store is moved to, followed by
// the UTC time of the move: agent.db.corrupt-20260102T150405Z.
const corruptSuffix = ".corrupt-"

// Recovery describes a corrupt store that Open moved aside and salvaged.
type Recovery struct {
	At      time.Time
	Reason  string
	MovedTo string
	// Salvaged counts the rows copied into the fresh store, per table.
	Salvaged map[string]int64
	// QueuedBefore is the offline queue's depth the corrupt store
	// recorded, -1 when that was unreadable too.
	QueuedBefore int64
}

func (r *Recovery) String() string {
	before := "unknown"
	if r.QueuedBefore >= 0 {
		before = fmt.Sprint(r.QueuedBefore)
	}
	return fmt.Sprintf("store was corrupt at %s (%s); moved to %s, %d of %s queued records salvaged",
		r.At.UTC().Format(time.RFC3339), r.Reason, r.MovedTo, r.Salvaged["offline_queue"], before)
}

// Recovery returns what Open salvaged from a corrupt store, nil when the
// store it opened was sound.
func (s *Store) Recovery() *Recovery { return s.cond.recovery }

// salvageTables are copied from a corrupt store in this order, parents
// before the rows that reference them. Sessions are not: logging in again
// is cheap, and a half-read session table is not worth trusting.
var salvageTables = []string{
	"agent_meta", "settings", "admin_users", "endpoints",
	"publish_destinations", "publish_subscriptions", "protocol_outputs",
	"offline_queue", "offline_dead_letters",
}

// salvageSkips bounds the attempts to read past an unreadable part of a
// table: each skips twice as far as the last.
const salvageSkips = 48

// recoverCorrupt moves the corrupt store at path aside with its -wal and
// -shm, opens a fresh one and copies into it every row that can still be
// read.
func recoverCorrupt(ctx context.Context, path, reason string, log *slog.Logger) (*Store, error) {
	now := time.Now()
	aside := path + corruptSuffix + now.UTC().Format("20060102T150405Z")
	for _, sfx := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(path+sfx, aside+sfx); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("move corrupt agent store aside to %s: %w", aside+sfx, err)
		}
	}
	s, err := openFresh(ctx, path, log)
	if err != nil {
		return nil, fmt.Errorf("open a fresh agent store after moving the corrupt one to %s: %w", aside, err)
	}
	rec := &Recovery{At: now, Reason: reason, MovedTo: aside, Salvaged: map[string]int64{}, QueuedBefore: -1}
	if strings.Contains(reason, "file is not a database") {
		if err := rewriteHeader(aside); err != nil {
			log.Warn("header of the corrupt agent store not rewritten; nothing can be read from it", "path", aside, "err", err)
		}
	}
	if err := s.salvage(ctx, aside, rec, log); err != nil {
		log.Error("salvage of the corrupt agent store stopped", "from", aside, "err", err)
	}
	s.cond.recovery = rec
	attrs := []any{"reason", reason, "moved_to", aside, "queue_records_before", rec.QueuedBefore}
	for _, t := range salvageTables {
		attrs = append(attrs, "salvaged_"+t, rec.Salvaged[t])
	}
	log.Error("agent store was corrupt: moved aside and salvaged into a fresh store", attrs...)
	return s, nil
}

// salvage copies what it can read from the corrupt file at from.
func (s *Store) salvage(ctx context.Context, from string, rec *Recovery, log *slog.Logger) error {
	// query_only: nothing here may write to the evidence.
	src, err := sql.Open("sqlite", from+"?_pragma=query_only(1)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer src.Close()
	src.SetMaxOpenConns(1)
	var before int64
	if err := src.QueryRowContext(ctx, `SELECT COALESCE(SUM(records), 0) FROM offline_queue_state`).Scan(&before); err == nil {
		rec.QueuedBefore = before
	}
	dst := s.db.SQL()
	for _, table := range salvageTables {
		n, err := salvageTable(ctx, src, dst, table)
		rec.Salvaged[table] = n
		if err != nil {
			log.Warn("table not salvaged whole", "table", table, "salvaged", n, "err", err)
		}
	}
	// The depth counters are rebuilt from the rows that made it, so the
	// queue's bookkeeping matches what it holds.
	if _, err := dst.ExecContext(ctx, `INSERT INTO offline_queue_state (destination, records, bytes, enqueued, awaiting)
		SELECT destination, COUNT(*), SUM(size), COUNT(*), SUM(awaiting) FROM offline_queue GROUP BY destination
		ON CONFLICT (destination) DO UPDATE SET records = excluded.records, bytes = excluded.bytes, enqueued = excluded.enqueued,
			awaiting = excluded.awaiting`); err != nil {
		return fmt.Errorf("rebuild offline queue depth: %w", err)
	}
	return nil
}

// salvageTable copies table's readable rows in rowid order. A read error
// (a damaged page) ends the run of rows; reading resumes past it, skipping
// ever further, so one bad page does not cost the rows after it.
func salvageTable(ctx context.Context, src, dst *sql.DB, table string) (int64, error) {
	cols, err := columns(ctx, dst, table)
	if err != nil {
		return 0, err
	}
	list := strings.Join(cols, ", ")
	marks := make([]string, len(cols))
	for i := range marks {
		marks[i] = fmt.Sprintf("$%d", i+1)
	}
	insert := `INSERT OR IGNORE INTO ` + table + ` (` + list + `) VALUES (` + strings.Join(marks, ", ") + `)`
	// Table and column names come from the fresh store's own schema.
	query := `SELECT rowid, ` + list + ` FROM ` + table + ` WHERE rowid > $1 ORDER BY rowid LIMIT 256`
	var copied int64
	var firstErr error
	// The tables' rowids start at 1.
	after, skip := int64(0), int64(0)
	for skips := 0; skips <= salvageSkips; {
		n, last, err := copyBatch(ctx, src, dst, query, insert, len(cols), after+skip)
		copied += n
		if err == nil && n == 0 {
			return copied, firstErr
		}
		if err != nil {
			if ctx.Err() != nil || strings.Contains(err.Error(), "no such table") {
				// An older store without the table has nothing to give.
				return copied, err
			}
			if firstErr == nil {
				firstErr = err
			}
			if n > 0 {
				after, skip = last, 1
			} else {
				after += skip
				skip = max(1, skip*2)
			}
			skips++
			continue
		}
		after, skip = last, 0
	}
	return copied, firstErr
}

// copyBatch copies the rows query returns after rowid from, returning how
// many it inserted and the last rowid read.
func copyBatch(ctx context.Context, src, dst *sql.DB, query, insert string, ncols int, from int64) (n, last int64, err error) {
	rows, err := src.QueryContext(ctx, query, from)
	if err != nil {
		return 0, from, err
	}
	defer rows.Close()
	vals := make([]any, ncols+1)
	ptrs := make([]any, ncols+1)
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	// One transaction per batch: a commit per row made a salvage of
	// 3,000 records take seconds.
	tx, err := dst.BeginTx(ctx, nil)
	if err != nil {
		return 0, from, err
	}
	defer func() {
		if cerr := tx.Commit(); cerr != nil && err == nil {
			n, err = 0, cerr
		}
	}()
	last = from
	for rows.Next() {
		if err := rows.Scan(ptrs...); err != nil {
			return n, last, err
		}
		last, _ = vals[0].(int64)
		res, err := tx.ExecContext(ctx, insert, vals[1:]...)
		if err != nil {
			// A damaged row (a NULL where none may be, a reference to a
			// lost parent) is left behind; the rest still come.
			continue
		}
		if k, _ := res.RowsAffected(); k > 0 {
			n++
		}
	}
	return n, last, rows.Err()
}

// columns lists table's columns in the fresh store.
func columns(ctx context.Context, d *sql.DB, table string) ([]string, error) {
	rows, err := d.QueryContext(ctx, `SELECT name FROM pragma_table_info($1) ORDER BY cid`, table)
	if err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, fmt.Errorf("columns of %s: %w", table, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("columns of %s: %w", table, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("table %s not in the fresh store", table)
	}
	return out, nil
}

// headerSuffix names the copy of a damaged header that rewriteHeader
// replaced.
const headerSuffix = "-header"

// storePageSize is the page size of every agent store: SQLite's default,
// which the store never changes.
const storePageSize = 4096

// rewriteHeader gives a file whose 100-byte header is damaged (SQLite
// finds "no database" in it) a plain header again, so the pages after it
// can be read: the schema's first page follows the header in page 1. The
// damaged header is kept beside the copy. Only the page size and the
// file's length are needed; the rest is what a new WAL-mode store has.
func rewriteHeader(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	old := make([]byte, 100)
	if _, err := f.ReadAt(old, 0); err != nil {
		return err
	}
	if err := os.WriteFile(path+headerSuffix, old, 0o600); err != nil {
		return err
	}
	h := make([]byte, 100)
	copy(h, "SQLite format 3\x00")
	binary.BigEndian.PutUint16(h[16:], storePageSize)
	h[18], h[19] = 2, 2 // WAL
	h[21], h[22], h[23] = 64, 32, 32
	binary.BigEndian.PutUint32(h[24:], 1)                               // change counter
	binary.BigEndian.PutUint32(h[28:], uint32(fi.Size()/storePageSize)) // pages, valid for counter 1
	binary.BigEndian.PutUint32(h[40:], 1)                               // schema cookie
	binary.BigEndian.PutUint32(h[44:], 4)                               // schema format
	binary.BigEndian.PutUint32(h[56:], 1)                               // UTF-8
	binary.BigEndian.PutUint32(h[92:], 1)
	binary.BigEndian.PutUint32(h[96:], 3046000)
	_, err = f.WriteAt(h, 0)
	return err
}
