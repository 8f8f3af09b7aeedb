package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
)

// The offline queue (docs/agent.md, section Publishing, Offline queue)
// holds the messages a destination could not take yet, one queue per
// destination id, in the agent's SQLite file. Every change of a queue and
// of its depth and counters happens in one transaction, so a process kill
// loses nothing committed and the counters always equal what happened.

// DropPolicy says what Enqueue does when a destination's queue is full.
type DropPolicy string

// The drop policies (dropPolicy).
const (
	// DropOldest evicts the oldest ordinary records; critical ones only
	// when no ordinary one is left and the new record is critical too (an
	// ordinary record is then refused).
	DropOldest DropPolicy = "oldest"
	// DropNewest refuses the new record. A new critical record still
	// displaces the oldest ordinary one, since critical messages are never
	// dropped in favour of ordinary ones.
	DropNewest DropPolicy = "newest"
	// DropError drops nothing and answers every new record with an error,
	// leaving the choice to the caller.
	DropError DropPolicy = "error"
)

// QueueOptions are the offline queue's settings, named as in docs/agent.md
// (section Publishing, Offline queue). The
// flush and cleanup settings are not used here; they travel with the queue
// for the publishing worker that drains it.
type QueueOptions struct {
	FlushBatchSize        int        `json:"flushBatchSize"`
	FlushIntervalMS       int        `json:"flushIntervalMs"`
	MaxRetries            int        `json:"maxRetries"`
	MaxBufferRecords      int        `json:"maxBufferRecords"`
	MaxBufferBytes        int64      `json:"maxBufferBytes"`
	DropPolicy            DropPolicy `json:"dropPolicy"`
	FlushTriggerThreshold int        `json:"flushTriggerThreshold"`
	MaxFlushPerCycle      int        `json:"maxFlushPerCycle"`
	CleanupIntervalMS     int        `json:"cleanupIntervalMs"`
}

// DefaultMaxBufferBytes is the byte limit of a queue. maxBufferRecords
// bounds only the record count; 64 MiB keeps 10,000 records of several KB
// each while bounding the disk an unreachable destination can take on a
// small device.
const DefaultMaxBufferBytes = 64 << 20

// DefaultQueueOptions returns the defaults docs/agent.md gives.
func DefaultQueueOptions() QueueOptions {
	return QueueOptions{
		FlushBatchSize:        100,
		FlushIntervalMS:       30000,
		MaxRetries:            3,
		MaxBufferRecords:      10000,
		MaxBufferBytes:        DefaultMaxBufferBytes,
		DropPolicy:            DropOldest,
		FlushTriggerThreshold: 1000,
		MaxFlushPerCycle:      1000,
		CleanupIntervalMS:     3600000,
	}
}

// Validate names the first field that is out of range.
func (o QueueOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"flushBatchSize", int64(o.FlushBatchSize)},
		{"flushIntervalMs", int64(o.FlushIntervalMS)},
		{"maxBufferRecords", int64(o.MaxBufferRecords)},
		{"maxBufferBytes", o.MaxBufferBytes},
		{"flushTriggerThreshold", int64(o.FlushTriggerThreshold)},
		{"maxFlushPerCycle", int64(o.MaxFlushPerCycle)},
		{"cleanupIntervalMs", int64(o.CleanupIntervalMS)},
	} {
		if f.v <= 0 {
			return fmt.Errorf("offline queue option %s: must be positive, got %d", f.name, f.v)
		}
	}
	if o.MaxRetries < 0 {
		return fmt.Errorf("offline queue option maxRetries: must not be negative, got %d", o.MaxRetries)
	}
	switch o.DropPolicy {
	case DropOldest, DropNewest, DropError:
	default:
		return fmt.Errorf("offline queue option dropPolicy: %q is not oldest, newest or error", o.DropPolicy)
	}
	return nil
}

// RetryWaits are the waits after the first, second and third rejection
// (docs/agent.md); later rejections, when maxRetries allows them, wait the last.
var RetryWaits = []time.Duration{5 * time.Second, 30 * time.Second, 5 * time.Minute}

var (
	// ErrBufferFull is matched (errors.Is) by the *FullError Enqueue
	// returns when a record was not queued because the queue is full.
	ErrBufferFull = errors.New("offline queue full")
	// ErrRecordTooLarge is returned for a record larger than the byte
	// limit of the whole queue; no eviction could make room for it.
	ErrRecordTooLarge = errors.New("record larger than the offline queue's byte limit")
)

// FullError says a record was not queued because the queue was full.
type FullError struct {
	Destination int64
	Policy      DropPolicy
	Records     int64 // the queue's depth when the record arrived
	Bytes       int64
}

func (e *FullError) Error() string {
	return fmt.Sprintf("offline queue of destination %d full (%d records, %d bytes, dropPolicy %s)",
		e.Destination, e.Records, e.Bytes, e.Policy)
}

// Unwrap lets errors.Is(err, ErrBufferFull) match.
func (e *FullError) Unwrap() error { return ErrBufferFull }

// Record is a message to queue. MsgID is kept so a replay carries the
// message's original identifier (docs/agent.md, section Publishing,
// Message ids).
type Record struct {
	MsgID    string
	Topic    string
	Payload  []byte
	Critical bool // alerts and events: evicted only after every ordinary record
}

// QueuedRecord is a record as stored, returned by Ready.
type QueuedRecord struct {
	ID       int64 // insertion order, never reused; the key for Ack and Reject
	MsgID    string
	Topic    string
	Payload  []byte
	Critical bool
	Attempts int // rejections so far
	Created  time.Time
}

// Queue is the offline queues of every destination, with one set of
// options. Its methods are safe for concurrent use: they run on the
// store's single writer connection, so their transactions never overlap.
type Queue struct {
	s    *Store
	opts QueueOptions
}

// OfflineQueue returns the offline queues held in s, after validating opts.
func (s *Store) OfflineQueue(opts QueueOptions) (*Queue, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	return &Queue{s: s, opts: opts}, nil
}

// Options returns the queue's options.
func (q *Queue) Options() QueueOptions { return q.opts }

// enqueue stores rec at the end of dest's queue and returns its id. When
// the queue is full the drop policy decides: evictions and the insert are
// one transaction, so a crash never leaves a record evicted without its
// replacement stored. A record that was not stored comes back as a
// *FullError (or ErrRecordTooLarge), and is counted.
func (q *Queue) enqueue(ctx context.Context, dest int64, rec Record) (int64, error) {
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("enqueue for destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	id, column, cause, err := q.insert(ctx, tx, dest, rec, false, nowMS())
	if err != nil {
		return 0, err
	}
	if cause != nil {
		// The counter is committed, the record not.
		if err := countRefusal(ctx, tx, dest, column); err != nil {
			return 0, err
		}
		if err := tx.Commit(); err != nil {
			return 0, fmt.Errorf("enqueue for destination %d: count %s: %w", dest, column, err)
		}
		return 0, cause
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("enqueue for destination %d: commit: %w", dest, err)
	}
	return id, nil
}

// countRefusal counts a record turned away in column of dest's state.
func countRefusal(ctx context.Context, tx *sql.Tx, dest int64, column string) error {
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET `+column+` = `+column+` + 1 WHERE destination = $1`, dest); err != nil {
		return fmt.Errorf("enqueue for destination %d: count %s: %w", dest, column, err)
	}
	return nil
}

// insert stores rec at the end of dest's queue within tx, evicting as the
// drop policy says, and returns its id. A record the limits turn away
// comes back as cause (a *FullError or ErrRecordTooLarge) with the
// counter column it belongs to, uncounted; err is a storage failure.
// awaiting stores it as sent and awaiting a receipt (counted as kept, not
// enqueued), due again at nextAt (Unix ms).
func (q *Queue) insert(ctx context.Context, tx *sql.Tx, dest int64, rec Record, awaiting bool, nextAt int64) (id int64, column string, cause, err error) {
	size := int64(len(rec.Payload))
	// One statement creates the destination's row on first use and reads
	// its depth: every statement costs a compile and a finalize.
	var records, bytes int64
	if err := tx.QueryRowContext(ctx, `INSERT INTO offline_queue_state (destination) VALUES ($1)
		ON CONFLICT (destination) DO UPDATE SET destination = excluded.destination RETURNING records, bytes`, dest).
		Scan(&records, &bytes); err != nil {
		return 0, "", nil, fmt.Errorf("enqueue for destination %d: read depth: %w", dest, err)
	}
	full := &FullError{Destination: dest, Policy: q.opts.DropPolicy, Records: records, Bytes: bytes}
	if size > q.opts.MaxBufferBytes {
		return 0, "refused", fmt.Errorf("destination %d, %d bytes: %w", dest, size, ErrRecordTooLarge), nil
	}
	maxRecords := int64(q.opts.MaxBufferRecords)
	if records+1 > maxRecords || bytes+size > q.opts.MaxBufferBytes {
		switch {
		case q.opts.DropPolicy == DropError:
			return 0, "full_errors", full, nil
		case q.opts.DropPolicy == DropNewest && !rec.Critical:
			return 0, "refused", full, nil
		}
		// oldest, or a critical record under newest: make room. Critical
		// records are candidates only for a critical newcomer, and only
		// under oldest.
		allowCritical := rec.Critical && q.opts.DropPolicy == DropOldest
		ok, err := q.evict(ctx, tx, dest, records, bytes, size, allowCritical)
		if err != nil {
			return 0, "", nil, err
		}
		if !ok {
			return 0, "refused", full, nil
		}
	}
	payload := rec.Payload
	if payload == nil { // an empty blob, not NULL
		payload = []byte{}
	}
	kid, seq := msgIDParts(rec.MsgID)
	err = tx.QueryRowContext(ctx, `INSERT INTO offline_queue
		(destination, msg_id, topic, payload, size, critical, next_attempt_at, created_at, awaiting, msg_kid, msg_seq)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		dest, rec.MsgID, rec.Topic, payload, size, rec.Critical, nextAt, nowMS(), awaiting, kid, seq).Scan(&id)
	if err != nil {
		return 0, "", nil, fmt.Errorf("enqueue for destination %d: insert: %w", dest, err)
	}
	counter := "enqueued"
	var aw int64
	if awaiting {
		counter, aw = "kept", 1
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state
		SET records = records + 1, bytes = bytes + $2, `+counter+` = `+counter+` + 1, awaiting = awaiting + $3
		WHERE destination = $1`, dest, size, aw); err != nil {
		return 0, "", nil, fmt.Errorf("enqueue for destination %d: update depth: %w", dest, err)
	}
	return id, "", nil, nil
}

// MaxReceiptSeq bounds the msgId sequences a receipt can cover: the
// queue indexes them as SQLite integers, and its migration reads them
// from text of at most 18 digits. An agent's sequence never gets near it.
const MaxReceiptSeq = 999_999_999_999_999_999

// Receiptable reports whether a receipt can cover a record of msgID: a v2
// msgId with a sequence of at most MaxReceiptSeq. Others are deleted on
// the destination's acknowledgement, or they would wait for ever.
func Receiptable(msgID string) bool {
	_, n, err := codec.ParseMsgID(msgID)
	return err == nil && n <= MaxReceiptSeq
}

// msgIDParts returns the kid and sequence of a receiptable msgId for the
// receipt index, NULL for any other id.
func msgIDParts(msgID string) (sql.NullString, sql.NullInt64) {
	k, n, err := codec.ParseMsgID(msgID)
	if err != nil || n > MaxReceiptSeq {
		return sql.NullString{}, sql.NullInt64{}
	}
	return sql.NullString{String: k, Valid: true}, sql.NullInt64{Int64: int64(n), Valid: true}
}

// evict deletes the oldest ordinary records (then, when allowCritical, the
// oldest critical ones) until a record of size fits, and reports whether
// it does. When it cannot fit, nothing is deleted.
func (q *Queue) evict(ctx context.Context, tx *sql.Tx, dest, records, bytes, size int64, allowCritical bool) (bool, error) {
	maxRecords := int64(q.opts.MaxBufferRecords)
	rows, err := tx.QueryContext(ctx, `SELECT id, size, critical FROM offline_queue
		WHERE destination = $1 AND critical <= $2 ORDER BY critical, id`, dest, allowCritical)
	if err != nil {
		return false, fmt.Errorf("enqueue for destination %d: find records to evict: %w", dest, err)
	}
	var ids []int64
	var freed, forRecords, forBytes, critical int64
	for records-int64(len(ids))+1 > maxRecords || bytes-freed+size > q.opts.MaxBufferBytes {
		if !rows.Next() {
			break
		}
		var id, sz int64
		var crit bool
		if err := rows.Scan(&id, &sz, &crit); err != nil {
			_ = rows.Close()
			return false, fmt.Errorf("enqueue for destination %d: find records to evict: %w", dest, err)
		}
		// The reason is the limit still exceeded when this record was
		// chosen; the record limit is checked first.
		if records-int64(len(ids))+1 > maxRecords {
			forRecords++
		} else {
			forBytes++
		}
		if crit {
			critical++
		}
		ids = append(ids, id)
		freed += sz
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, fmt.Errorf("enqueue for destination %d: find records to evict: %w", dest, err)
	}
	if records-int64(len(ids))+1 > maxRecords || bytes-freed+size > q.opts.MaxBufferBytes {
		return false, nil
	}
	// The rows were just read in this transaction, so every id is deleted.
	_, _, awaiting, err := deleteIDs(ctx, tx, dest, ids)
	if err != nil {
		return false, fmt.Errorf("enqueue for destination %d: evict: %w", dest, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET records = records - $2, bytes = bytes - $3,
		evicted_records = evicted_records + $4, evicted_bytes = evicted_bytes + $5, evicted_critical = evicted_critical + $6,
		awaiting = awaiting - $7
		WHERE destination = $1`, dest, len(ids), freed, forRecords, forBytes, critical, awaiting); err != nil {
		return false, fmt.Errorf("enqueue for destination %d: count evictions: %w", dest, err)
	}
	return true, nil
}

// deleteIDs deletes dest's records with the given ids and returns how many
// it deleted, their bytes and how many of them were awaiting a receipt.
// Ids that are gone already are skipped.
func deleteIDs(ctx context.Context, tx *sql.Tx, dest int64, ids []int64) (n, size, awaiting int64, err error) {
	// SQLite caps a statement's parameters; 500 stays far below it.
	for len(ids) > 0 {
		chunk := ids[:min(len(ids), 500)]
		ids = ids[len(chunk):]
		var b strings.Builder
		args := make([]any, 0, len(chunk)+1)
		args = append(args, dest)
		for i, id := range chunk {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString("$" + strconv.Itoa(i+2))
			args = append(args, id)
		}
		rows, err := tx.QueryContext(ctx, `DELETE FROM offline_queue WHERE destination = $1 AND id IN (`+
			b.String()+`) RETURNING size, awaiting`, args...)
		if err != nil {
			return n, size, awaiting, err
		}
		for rows.Next() {
			var s, a int64
			if err := rows.Scan(&s, &a); err != nil {
				_ = rows.Close()
				return n, size, awaiting, err
			}
			n++
			size += s
			awaiting += a
		}
		if err := errors.Join(rows.Err(), rows.Close()); err != nil {
			return n, size, awaiting, err
		}
	}
	return n, size, awaiting, nil
}

// ready returns up to limit of dest's records whose next attempt time has
// come by now, oldest first. Records stay queued until Ack or Reject.
//
// It reads on the writer connection: a drain alternates Ready and Ack, and
// a reader connection throws its page cache away whenever the WAL changed
// since its last read, which made draining three times slower.
func (q *Queue) ready(ctx context.Context, dest int64, limit int, now time.Time) ([]QueuedRecord, error) {
	rows, err := q.s.db.SQL().QueryContext(ctx, `SELECT id, msg_id, topic, payload, critical, attempts, created_at
		FROM offline_queue WHERE destination = $1 AND next_attempt_at <= $2 ORDER BY id LIMIT $3`,
		dest, now.UnixMilli(), limit)
	if err != nil {
		return nil, fmt.Errorf("ready records of destination %d: %w", dest, err)
	}
	defer rows.Close()
	var out []QueuedRecord
	for rows.Next() {
		var r QueuedRecord
		var created int64
		if err := rows.Scan(&r.ID, &r.MsgID, &r.Topic, &r.Payload, &r.Critical, &r.Attempts, &created); err != nil {
			return nil, fmt.Errorf("ready records of destination %d: %w", dest, err)
		}
		r.Created = time.UnixMilli(created)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("ready records of destination %d: %w", dest, err)
	}
	return out, nil
}

// ack deletes delivered records and returns how many it deleted; ids no
// longer queued are skipped. Call it only once the broker has acknowledged
// that exact packet (the PUBACK of a QoS 1 publish): a publish token that
// completes because the connection dropped is not a delivery, and acking
// on it would lose the record.
func (q *Queue) ack(ctx context.Context, dest int64, ids []int64) (int64, error) {
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("ack for destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	n, size, awaiting, err := deleteIDs(ctx, tx, dest, ids)
	if err != nil {
		return 0, fmt.Errorf("ack for destination %d: %w", dest, err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state
		SET records = records - $2, bytes = bytes - $3, delivered = delivered + $2, awaiting = awaiting - $4
		WHERE destination = $1`, dest, n, size, awaiting); err != nil {
		return 0, fmt.Errorf("ack for destination %d: count: %w", dest, err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("ack for destination %d: commit: %w", dest, err)
	}
	return n, nil
}

// reject records a rejection of record id by the destination while
// connected (a negative acknowledgement, an error answer). A lost
// connection is not a rejection: those records simply wait. The record is
// retried after RetryWaits; once it has been rejected more than maxRetries
// times (its first attempt and maxRetries retries all failed) it moves to
// the dead-letter table with reason, in one transaction, and Reject reports
// true. ErrNotFound when the record is not queued.
func (q *Queue) reject(ctx context.Context, dest, id int64, reason string, now time.Time) (deadLettered bool, err error) {
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return false, fmt.Errorf("reject for destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	var attempts, size, awaiting int64
	err = tx.QueryRowContext(ctx, `SELECT attempts, size, awaiting FROM offline_queue WHERE destination = $1 AND id = $2`, dest, id).
		Scan(&attempts, &size, &awaiting)
	if errors.Is(err, sql.ErrNoRows) {
		return false, fmt.Errorf("record %d of destination %d: %w", id, dest, ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("reject for destination %d: %w", dest, err)
	}
	attempts++
	var gone, goneBytes int64 // what leaves the queue
	if attempts > int64(q.opts.MaxRetries) {
		if _, err := tx.ExecContext(ctx, `INSERT INTO offline_dead_letters
			(id, destination, msg_id, topic, payload, size, critical, attempts, reason, created_at, dead_at)
			SELECT id, destination, msg_id, topic, payload, size, critical, $3, $4, created_at, $5
			FROM offline_queue WHERE destination = $1 AND id = $2`, dest, id, attempts, reason, now.UnixMilli()); err != nil {
			return false, fmt.Errorf("reject for destination %d: dead-letter record %d: %w", dest, id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM offline_queue WHERE id = $1`, id); err != nil {
			return false, fmt.Errorf("reject for destination %d: dead-letter record %d: %w", dest, id, err)
		}
		deadLettered, gone, goneBytes = true, 1, size
	} else {
		wait := RetryWaits[min(int(attempts), len(RetryWaits))-1]
		// A refusal answers the send: the record no longer awaits a
		// receipt for it.
		if _, err := tx.ExecContext(ctx, `UPDATE offline_queue SET attempts = $2, next_attempt_at = $3, last_error = $4,
			awaiting = 0 WHERE id = $1`, id, attempts, now.Add(wait).UnixMilli(), reason); err != nil {
			return false, fmt.Errorf("reject for destination %d: record %d: %w", dest, id, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `UPDATE offline_queue_state SET records = records - $2, bytes = bytes - $3,
		rejected = rejected + 1, dead_lettered = dead_lettered + $2, awaiting = awaiting - $4
		WHERE destination = $1`, dest, gone, goneBytes, awaiting); err != nil {
		return false, fmt.Errorf("reject for destination %d: count: %w", dest, err)
	}
	if err := tx.Commit(); err != nil {
		return false, fmt.Errorf("reject for destination %d: commit: %w", dest, err)
	}
	return deadLettered, nil
}

// QueueCounters are a destination's totals since its queue was first used.
// Every record that was offered to Enqueue ends in exactly one of:
// enqueued, refused or fullErrors; every enqueued or kept record is either
// still queued or counted once in evictedRecords + evictedBytes,
// deadLettered or delivered.
type QueueCounters struct {
	Enqueued        int64 `json:"enqueued"`
	EvictedRecords  int64 `json:"evictedMaxRecords"` // evicted for maxBufferRecords
	EvictedBytes    int64 `json:"evictedMaxBytes"`   // evicted for maxBufferBytes
	EvictedCritical int64 `json:"evictedCritical"`   // of the evicted, critical records
	Refused         int64 `json:"refused"`           // not queued: dropPolicy newest, or too large
	FullErrors      int64 `json:"fullErrors"`        // not queued: dropPolicy error
	Rejected        int64 `json:"rejected"`          // rejections while connected
	DeadLettered    int64 `json:"deadLettered"`
	Delivered       int64 `json:"delivered"`
	// Kept counts records sent directly to a destination with receipts
	// on, then kept awaiting their receipt.
	Kept int64 `json:"keptForReceipt"`
	// Receipted counts, of Delivered, the records deleted on a receipt.
	Receipted int64 `json:"receipted"`
	// Resent counts sends of records again after the receipt wait.
	Resent int64 `json:"resentNoReceipt"`
}

// QueueStats is one destination's queue for GET /v1/buffer/status.
type QueueStats struct {
	Destination int64 `json:"destination"`
	Records     int64 `json:"mqttMessageBufferCount"`
	Bytes       int64 `json:"mqttBufferBytes"`
	// Awaiting is, of Records, those sent and awaiting the cloud's
	// receipt (docs/agent-delivery.md).
	Awaiting    int64         `json:"awaitingReceipt"`
	Oldest      time.Time     `json:"oldest,omitzero"` // creation of the oldest queued record; zero (absent) when empty
	OldestAgeMS int64         `json:"oldestAgeMs"`     // now minus Oldest; zero when empty
	DeadLetters int64         `json:"deadLetters"`
	Counters    QueueCounters `json:"counters"`
}

// stats returns dest's depth, oldest record and counters, read in one
// snapshot so they agree with each other.
func (q *Queue) stats(ctx context.Context, dest int64) (QueueStats, error) {
	st := QueueStats{Destination: dest}
	tx, err := q.s.db.ReadSQL().BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return st, fmt.Errorf("queue stats of destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	c := &st.Counters
	err = tx.QueryRowContext(ctx, `SELECT records, bytes, awaiting, enqueued, evicted_records, evicted_bytes, evicted_critical,
		refused, full_errors, rejected, dead_lettered, delivered, kept, receipted, resent
		FROM offline_queue_state WHERE destination = $1`, dest).
		Scan(&st.Records, &st.Bytes, &st.Awaiting, &c.Enqueued, &c.EvictedRecords, &c.EvictedBytes, &c.EvictedCritical,
			&c.Refused, &c.FullErrors, &c.Rejected, &c.DeadLettered, &c.Delivered, &c.Kept, &c.Receipted, &c.Resent)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return st, fmt.Errorf("queue stats of destination %d: %w", dest, err)
	}
	var oldest sql.NullInt64
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT created_at FROM offline_queue WHERE destination = $1 ORDER BY id LIMIT 1),
		(SELECT COUNT(*) FROM offline_dead_letters WHERE destination = $1)`, dest).Scan(&oldest, &st.DeadLetters); err != nil {
		return st, fmt.Errorf("queue stats of destination %d: oldest record, dead letters: %w", dest, err)
	}
	if oldest.Valid {
		st.Oldest = time.UnixMilli(oldest.Int64)
		st.OldestAgeMS = max(time.Since(st.Oldest).Milliseconds(), 0)
	}
	return st, nil
}

// purge deletes everything dest's queue holds: its records, dead letters
// and counters, in one transaction, and returns how many records were
// still queued. It is for a destination that was deleted: its queue must
// not outlive it.
func (q *Queue) purge(ctx context.Context, dest int64) (int64, error) {
	tx, err := q.s.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("purge destination %d: %w", dest, err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, `DELETE FROM offline_queue WHERE destination = $1`, dest)
	if err != nil {
		return 0, fmt.Errorf("purge destination %d: %w", dest, err)
	}
	n, _ := res.RowsAffected()
	for _, stmt := range []string{`DELETE FROM offline_dead_letters WHERE destination = $1`, `DELETE FROM offline_queue_state WHERE destination = $1`} {
		if _, err := tx.ExecContext(ctx, stmt, dest); err != nil {
			return 0, fmt.Errorf("purge destination %d: %w", dest, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("purge destination %d: commit: %w", dest, err)
	}
	return n, nil
}
