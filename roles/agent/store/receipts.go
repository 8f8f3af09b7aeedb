package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
)

// Delivery receipts (docs/agent-delivery.md, section Delivery receipts):
// for a destination with receipts on, a record the destination
// acknowledged stays in the queue, awaiting, until a receipt of the cloud
// covers its msgId; its next attempt is the end of the receipt wait, so
// Ready hands it out again, in order, once the wait passed without one.

// KeepSent stores records that were sent directly and acknowledged, as
// awaiting a receipt due again at retryAt, all in one transaction: a
// direct send costs one write per batch, not one per record. The queue's
// limits and drop policy apply as to Enqueue; the error joins the
// refusals (each a *FullError or ErrRecordTooLarge) of the records not
// kept, which are counted.
func (q *Queue) KeepSent(ctx context.Context, dest int64, recs []Record, retryAt time.Time) (err error) {
	defer q.s.cond.observe(&err)
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("keep sent records of destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	fit, err := q.keepFits(ctx, tx, dest, recs, retryAt)
	if err != nil {
		return err
	}
	var refusals []error
	for _, rec := range recs[fit:] {
		_, column, cause, err := q.insert(ctx, tx, dest, rec, true, retryAt.UnixMilli())
		if err != nil {
			return err
		}
		if cause != nil {
			if err := countRefusal(ctx, tx, dest, column); err != nil {
				return err
			}
			refusals = append(refusals, fmt.Errorf("keep %s: %w", rec.MsgID, cause))
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("keep sent records of destination %d: commit: %w", dest, err)
	}
	q.s.cond.wrote()
	return errors.Join(refusals...)
}

// keepFits stores recs as awaiting with one prepared insert and one
// depth update when they all fit within the queue's limits, the usual
// case, and returns how many it stored: len(recs), or 0 when they do not
// fit and each must go through insert and the drop policy.
func (q *Queue) keepFits(ctx context.Context, tx *sql.Tx, dest int64, recs []Record, retryAt time.Time) (int, error) {
	var records, bytes, size int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO offline_queue_state (destination) VALUES ($1)
		ON CONFLICT (destination) DO UPDATE SET destination = excluded.destination RETURNING records, bytes`, dest).
		Scan(&records, &bytes); err != nil {
		return 0, fmt.Errorf("keep sent records of destination %d: read depth: %w", dest, err)
	}
	for _, rec := range recs {
		size += int64(len(rec.Payload))
	}
	if records+int64(len(recs)) > int64(q.opts.MaxBufferRecords) || bytes+size > q.opts.MaxBufferBytes {
		return 0, nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO offline_queue
		(destination, msg_id, topic, payload, size, critical, next_attempt_at, created_at, awaiting, msg_kid, msg_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1, $9, $10)`)
	if err != nil {
		return 0, fmt.Errorf("keep sent records of destination %d: %w", dest, err)
	}
	defer func() { _ = stmt.Close() }()
	now := nowMS()
	for _, rec := range recs {
		kid, seq := msgIDParts(rec.MsgID)
		payload := rec.Payload
		if payload == nil {
			payload = []byte{}
		}
		if _, err := stmt.ExecContext(ctx, dest, rec.MsgID, rec.Topic, payload, len(rec.Payload), rec.Critical,
			retryAt.UnixMilli(), now, kid, seq); err != nil {
			return 0, fmt.Errorf("keep sent records of destination %d: insert: %w", dest, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET records = records + $2, bytes = bytes + $3,
		kept = kept + $2, awaiting = awaiting + $2 WHERE destination = $1`, dest, len(recs), size); err != nil {
		return 0, fmt.Errorf("keep sent records of destination %d: update depth: %w", dest, err)
	}
	return len(recs), nil
}

// MarkSent records that the destination acknowledged the queued records
// ids, which then await a receipt until retryAt, when Ready returns them
// again. It returns how many were marked; ids no longer queued (a receipt
// came first) are skipped. Records that were awaiting already were sent
// again and are counted as resent.
func (q *Queue) MarkSent(ctx context.Context, dest int64, ids []int64, retryAt time.Time) (n int64, err error) {
	defer q.s.cond.observe(&err)
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("mark sent for destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	var fresh, again int64
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		var b strings.Builder
		args := make([]any, 0, len(chunk)+2)
		args = append(args, dest, retryAt.UnixMilli())
		for i, id := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("$" + strconv.Itoa(i+3))
			args = append(args, id)
		}
		in := b.String()
		// Those awaiting already were sent before: this send is a re-send
		// (one already due at retryAt was marked by this very call).
		var before int64
		if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM offline_queue WHERE destination = $1 AND awaiting = 1
			AND next_attempt_at <> $2 AND id IN (`+in+`)`, args...).Scan(&before); err != nil {
			return 0, fmt.Errorf("mark sent for destination %d: %w", dest, err)
		}
		res, err := tx.ExecContext(ctx, `UPDATE offline_queue SET next_attempt_at = $2, awaiting = 1
			WHERE destination = $1 AND id IN (`+in+`)`, args...)
		if err != nil {
			return 0, fmt.Errorf("mark sent for destination %d: %w", dest, err)
		}
		m, err := res.RowsAffected()
		if err != nil {
			return 0, fmt.Errorf("mark sent for destination %d: %w", dest, err)
		}
		fresh += m - before
		again += before
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET awaiting = awaiting + $2, resent = resent + $3
		WHERE destination = $1`, dest, fresh, again); err != nil {
		return 0, fmt.Errorf("mark sent for destination %d: count: %w", dest, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("mark sent for destination %d: commit: %w", dest, err)
	}
	return fresh + again, nil
}

// ApplyReceipts deletes dest's records whose msgId r covers, awaiting or
// not yet sent (the cloud holds them either way), in one transaction, and
// returns how many it deleted. They count as delivered and receipted.
func (q *Queue) ApplyReceipts(ctx context.Context, dest int64, r control.Receipts) (n int64, err error) {
	defer q.s.cond.observe(&err)
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("apply receipts for destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `DELETE FROM offline_queue WHERE destination = $1 AND msg_kid = $2
		AND msg_seq BETWEEN $3 AND $4 RETURNING size, awaiting`)
	if err != nil {
		return 0, fmt.Errorf("apply receipts for destination %d: %w", dest, err)
	}
	defer func() { _ = stmt.Close() }()
	var size, awaiting int64
	for _, k := range r.Keys {
		for _, rg := range k.Ranges {
			if rg.First > MaxReceiptSeq {
				continue // no stored sequence is that high
			}
			rows, err := stmt.QueryContext(ctx, dest, k.KID, int64(rg.First), int64(min(rg.Last, MaxReceiptSeq)))
			if err != nil {
				return 0, fmt.Errorf("apply receipts for destination %d: %w", dest, err)
			}
			for rows.Next() {
				var s, a int64
				if err := rows.Scan(&s, &a); err != nil {
					_ = rows.Close()
					return 0, fmt.Errorf("apply receipts for destination %d: %w", dest, err)
				}
				n++
				size += s
				awaiting += a
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return 0, fmt.Errorf("apply receipts for destination %d: %w", dest, err)
			}
		}
	}
	if n == 0 {
		return 0, nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET records = records - $2, bytes = bytes - $3,
		awaiting = awaiting - $4, delivered = delivered + $2, receipted = receipted + $2 WHERE destination = $1`,
		dest, n, size, awaiting); err != nil {
		return 0, fmt.Errorf("apply receipts for destination %d: count: %w", dest, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("apply receipts for destination %d: commit: %w", dest, err)
	}
	return n, nil
}
