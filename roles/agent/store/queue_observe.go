package store

import (
	"context"
	"time"
)

// The queue's public methods pass every failure through observe, so a
// full disk and a damaged file are reported by the store's Condition
// whichever statement met them first.

// Enqueue queues rec for dest; see enqueue. A record it stores clears the
// store's full-disk state.
func (q *Queue) Enqueue(ctx context.Context, dest int64, rec Record) (id int64, err error) {
	defer q.s.cond.observe(&err)
	id, err = q.enqueue(ctx, dest, rec)
	if err == nil {
		q.s.cond.wrote()
	}
	return id, err
}

// Ready returns dest's records that are due; see ready.
func (q *Queue) Ready(ctx context.Context, dest int64, limit int, now time.Time) (recs []QueuedRecord, err error) {
	defer q.s.cond.observe(&err)
	return q.ready(ctx, dest, limit, now)
}

// Ack deletes delivered records; see ack.
func (q *Queue) Ack(ctx context.Context, dest int64, ids []int64) (n int64, err error) {
	defer q.s.cond.observe(&err)
	return q.ack(ctx, dest, ids)
}

// Reject records a refusal of record id; see reject.
func (q *Queue) Reject(ctx context.Context, dest, id int64, reason string, now time.Time) (deadLettered bool, err error) {
	defer q.s.cond.observe(&err)
	return q.reject(ctx, dest, id, reason, now)
}

// Stats returns dest's depth and counters; see stats.
func (q *Queue) Stats(ctx context.Context, dest int64) (st QueueStats, err error) {
	defer q.s.cond.observe(&err)
	return q.stats(ctx, dest)
}

// Purge deletes dest's queue; see purge.
func (q *Queue) Purge(ctx context.Context, dest int64) (n int64, err error) {
	defer q.s.cond.observe(&err)
	return q.purge(ctx, dest)
}
