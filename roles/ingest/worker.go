package ingest

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// work is one worker: it takes batches from the tenant streams in turn until
// ctx ends. A batch it has begun is finished (bounded by processBudget)
// even when ctx ends meanwhile, so shutdown does not strand half-written
// work.
func (e *engine) work(ctx context.Context, consumer string, n int) {
	turn := n
	for ctx.Err() == nil {
		if !e.canWrite() {
			// Nowhere to put rows (no spool, or its disk is full): leave
			// them in the stream, which is durable, until the replay loop
			// closes the breaker. With a failing spool, try one batch a
			// second: an append tells when the disk has room again.
			lifecycle.Sleep(ctx, time.Second)
			if ctx.Err() != nil || e.spool == nil || !e.spoolFailing.Load() || e.breaker.Allow() {
				continue
			}
		}
		if e.saturated.Load() {
			lifecycle.Sleep(ctx, config.Millis(e.cfg.DBBackpressureSleepMS))
		}
		streams := e.snapshot()
		if len(streams) == 0 {
			select {
			case <-ctx.Done():
			case <-e.wakeCh():
			case <-time.After(time.Second):
			}
			continue
		}
		got := false
		for i := range streams {
			if ctx.Err() != nil {
				return // reads ignore ctx; stop between them
			}
			s := streams[(turn+i)%len(streams)]
			n, ok := e.readAndProcess(ctx, s, consumer, 0)
			if !ok {
				return
			}
			got = got || n > 0
		}
		turn++
		if got || ctx.Err() != nil {
			continue
		}
		// Everything is drained: wait on one stream (a different one each
		// turn) so a single tenant's entry is picked up at once.
		if _, ok := e.readAndProcess(ctx, streams[turn%len(streams)], consumer, e.idleBlock()); !ok {
			return
		}
	}
}

// readAndProcess reads a batch of stream and processes it, holding one of
// the pool's batch buffers from before the read to the acknowledgement:
// entries still in the stream cost the process nothing, so a worker that
// waits for a buffer waits before reading. It returns the entries read,
// and false when ctx ended before a buffer was free.
func (e *engine) readAndProcess(ctx context.Context, stream, consumer string, block time.Duration) (int, bool) {
	buf, ok := e.bufs.get(ctx)
	if !ok {
		return 0, false
	}
	defer e.bufs.put(buf)
	entries := e.readBatch(ctx, stream, consumer, block)
	if len(entries) > 0 {
		e.processDetached(ctx, stream, entries, buf)
	}
	return len(entries), true
}

func (e *engine) idleBlock() time.Duration {
	return min(max(config.Millis(e.cfg.FlushIntervalMS), 50*time.Millisecond), time.Second)
}

// readBatch reads up to BATCH_SIZE new entries. Outside realtime mode it
// keeps reading until the batch is full or FLUSH_INTERVAL_MS has passed
// since the first entry, trading that much latency for bigger inserts.
//
// A read is never cancelled half-way: Redis may have delivered entries (and
// made them pending for this consumer) by the time a cancelled client drops
// the reply, and nobody would process them until reclaim. Reads block for
// at most a second or FLUSH_INTERVAL_MS, so a stop waits that long at most;
// ctx ending only stops further reads.
func (e *engine) readBatch(ctx context.Context, stream, consumer string, block time.Duration) []streamstore.Entry {
	tenant, _ := telemetry.TenantOfStream(stream)
	group := telemetry.WriterGroup(tenant)
	rctx := context.WithoutCancel(ctx)
	entries, err := e.store.ReadGroup(rctx, stream, group, consumer, e.cfg.BatchSize, block)
	if err != nil {
		e.readFailed(ctx, stream, group, err)
		return nil
	}
	if len(entries) == 0 || len(entries) >= e.cfg.BatchSize || e.cfg.InsertMode == "realtime" || e.cfg.FlushIntervalMS == 0 {
		return entries
	}
	deadline := time.Now().Add(config.Millis(e.cfg.FlushIntervalMS))
	for len(entries) < e.cfg.BatchSize && ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		more, err := e.store.ReadGroup(rctx, stream, group, consumer, e.cfg.BatchSize-len(entries), left)
		if err != nil || len(more) == 0 {
			// What was read is pending for this consumer: process it.
			break
		}
		entries = append(entries, more...)
	}
	return entries
}

func (e *engine) readFailed(ctx context.Context, stream, group string, err error) {
	if ctx.Err() != nil {
		return
	}
	if errors.Is(err, streamstore.ErrNoGroup) {
		// The stream was deleted and re-created, or its group removed.
		if gerr := e.store.EnsureGroup(ctx, stream, group, "0"); gerr == nil {
			return
		}
	}
	e.log.Warn("read stream", "stream", stream, "err", err)
	lifecycle.Sleep(ctx, time.Second)
}

// maintain trims acknowledged entries and takes over entries left pending
// by a dead or stuck consumer.
func (e *engine) maintain(ctx context.Context) {
	for _, s := range e.snapshot() {
		if ctx.Err() != nil {
			return
		}
		tenant, _ := telemetry.TenantOfStream(s)
		group := telemetry.WriterGroup(tenant)
		if id, err := e.store.SafeTrimID(ctx, s, group); err == nil {
			if _, err := e.store.TrimMinID(ctx, s, id); err != nil && ctx.Err() == nil {
				e.log.Warn("trim stream", "stream", s, "err", err)
			}
		}
		e.reclaim(ctx, s, group)
	}
}

// reclaimBudget bounds one stream's reclaim per maintenance pass, so that
// a large backlog of one tenant does not hold up the others' trimming.
const reclaimBudget = 10 * time.Second

// reclaim takes over entries pending for longer than RECLAIM_IDLE_MS and
// writes them, a batch at a time, until none is left or reclaimBudget is
// spent: its pace follows the backlog instead of a fixed count per pass. An
// entry delivered more than MAX_RETRIES+1 times without acknowledgement
// (it crashes or hangs every worker that takes it) goes to the dead-letter
// stream; deliveries that ended in an unavailable database do not count.
// Nothing is reclaimed while batches have nowhere to go: the entries wait
// in the stream, and taking them would only add deliveries. It claims one
// batch at a time, so that every entry it claims is tried (or its delivery
// excused) before the next claim.
func (e *engine) reclaim(ctx context.Context, s, group string) {
	idle := config.Millis(e.cfg.ReclaimIdleMS)
	count := e.cfg.BatchSize
	deadline := time.Now().Add(reclaimBudget)
	cursor := "0-0"
	// Reclaim is one goroutine and rare: its own buffer, outside the pool,
	// so that it never waits for workers that wait for the database.
	buf := newBatchBuf()
	for ctx.Err() == nil && e.canWrite() && time.Now().Before(deadline) {
		pend, err := e.store.PendingEntries(ctx, s, group, max(count, streamstore.DefaultCount))
		if err != nil || len(pend) == 0 {
			return
		}
		deliveries := make(map[string]int64, len(pend))
		for _, p := range pend {
			deliveries[p.ID] = p.Deliveries
		}
		claimed, next, err := e.store.AutoClaim(ctx, s, group, e.prefix+"-reclaim", idle, cursor, count)
		if err != nil {
			return
		}
		cursor = next
		if len(claimed) == 0 {
			if next == "0-0" {
				return
			}
			continue // the page held no idle entry; scan on
		}
		var retry, skipped []streamstore.Entry
		var poison []deadLetter
		for _, en := range claimed {
			if e.holding.has(s, en.ID) {
				// A worker of this process retries it; the claim was no try.
				skipped = append(skipped, en)
				continue
			}
			// Unknown deliveries (claimed past the listed page) count one.
			n := max(deliveries[en.ID], 1) - e.excused.get(s, en.ID) + 1
			if n > int64(e.cfg.MaxRetries)+1 {
				poison = append(poison, deadLetter{id: en.ID, payload: en.Values[telemetry.StreamField],
					reason: "delivered " + strconv.FormatInt(n, 10) + " times without being acknowledged"})
				continue
			}
			retry = append(retry, en)
		}
		e.excused.add(s, skipped)
		e.log.Info("reclaimed pending entries", "stream", s, "entries", len(claimed), "dead_lettered", len(poison), "held_by_workers", len(skipped))
		e.ack(ctx, s, e.toDLQ(ctx, s, poison))
		if held := e.processBounded(ctx, s, retry, buf); len(held) > 0 {
			e.excused.add(s, held)
			return
		}
		if next == "0-0" {
			return
		}
	}
}
