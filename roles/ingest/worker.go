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
// ctx ends. A batch it has begun is finished (bounded by processTO) even
// when ctx ends meanwhile, so shutdown does not strand half-written work.
func (e *engine) work(ctx context.Context, consumer string, n int) {
	turn := n
	for ctx.Err() == nil {
		if !e.breaker.Allow() && e.spool == nil {
			// Nowhere to put rows: leave them in the stream, which is
			// durable, until the replay loop closes the breaker.
			lifecycle.Sleep(ctx, time.Second)
			continue
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
			s := streams[(turn+i)%len(streams)]
			if entries := e.readBatch(ctx, s, consumer, 0); len(entries) > 0 {
				got = true
				e.processDetached(ctx, s, entries)
			}
		}
		turn++
		if got {
			continue
		}
		// Everything is drained: wait on one stream (a different one each
		// turn) so a single tenant's entry is picked up at once.
		s := streams[turn%len(streams)]
		if entries := e.readBatch(ctx, s, consumer, e.idleBlock()); len(entries) > 0 {
			e.processDetached(ctx, s, entries)
		}
	}
}

func (e *engine) idleBlock() time.Duration {
	return min(max(config.Millis(e.cfg.FlushIntervalMS), 50*time.Millisecond), time.Second)
}

func (e *engine) processDetached(ctx context.Context, stream string, entries []streamstore.Entry) {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.every.processTO)
	defer cancel()
	e.process(pctx, stream, entries)
}

// readBatch reads up to BATCH_SIZE new entries. Outside realtime mode it
// keeps reading until the batch is full or FLUSH_INTERVAL_MS has passed
// since the first entry, trading that much latency for bigger inserts.
func (e *engine) readBatch(ctx context.Context, stream, consumer string, block time.Duration) []streamstore.Entry {
	tenant, _ := telemetry.TenantOfStream(stream)
	group := telemetry.WriterGroup(tenant)
	entries, err := e.store.ReadGroup(ctx, stream, group, consumer, e.cfg.BatchSize, block)
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
		more, err := e.store.ReadGroup(ctx, stream, group, consumer, e.cfg.BatchSize-len(entries), left)
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
// by a dead or stuck consumer. An entry delivered more than MAX_RETRIES+1
// times without acknowledgement (it crashes or hangs every worker that
// takes it) goes to the dead-letter stream.
func (e *engine) maintain(ctx context.Context) {
	idle := config.Millis(e.cfg.ReclaimIdleMS)
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
		pend, err := e.store.PendingEntries(ctx, s, group, streamstore.DefaultCount)
		if err != nil || len(pend) == 0 || pend[0].Idle < idle {
			continue
		}
		deliveries := make(map[string]int64, len(pend))
		for _, p := range pend {
			deliveries[p.ID] = p.Deliveries
		}
		claimed, _, err := e.store.AutoClaim(ctx, s, group, e.prefix+"-reclaim", idle, "0-0", streamstore.DefaultCount)
		if err != nil || len(claimed) == 0 {
			continue
		}
		var retry []streamstore.Entry
		var poison []deadLetter
		for _, en := range claimed {
			if deliveries[en.ID]+1 > int64(e.cfg.MaxRetries)+1 {
				poison = append(poison, deadLetter{id: en.ID, payload: en.Values[telemetry.StreamField],
					reason: "delivered " + strconv.FormatInt(deliveries[en.ID]+1, 10) + " times without being acknowledged"})
				continue
			}
			retry = append(retry, en)
		}
		e.log.Info("reclaimed pending entries", "stream", s, "entries", len(claimed), "dead_lettered", len(poison))
		if len(poison) > 0 {
			if ids := e.toDLQ(ctx, s, poison); len(ids) > 0 {
				if _, err := e.store.Ack(ctx, s, group, ids...); err != nil {
					e.log.Warn("acknowledge dead letters", "stream", s, "err", err)
				}
			}
		}
		e.processDetached(ctx, s, retry)
	}
}
