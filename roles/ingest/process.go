package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// sideBudget bounds a batch's dead-letter write and its acknowledgement.
// They run on a context of their own, not on the batch's: a batch that used
// its time up on the database must still settle what it did, or its entries
// stay pending and come back.
const sideBudget = 5 * time.Second

func sideContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), sideBudget)
}

// deadLetter is an entry that can never be written, with the reason.
type deadLetter struct {
	id, payload, reason string
}

// parsed is one stream entry decoded into a message.
type parsed struct {
	id      string
	payload string
	msg     telemetry.Message
	// rejects holds the message's refused readings, dead-lettered once
	// its valid ones are written; nil when every reading was valid.
	rejects *deadLetter
}

// toDLQ writes dead letters to the tenant's dead-letter stream in one round
// trip and returns the ids it wrote, which the caller may then acknowledge.
func (e *engine) toDLQ(ctx context.Context, stream string, dead []deadLetter) []string {
	if len(dead) == 0 {
		return nil
	}
	tenant, _ := telemetry.TenantOfStream(stream)
	failedAt := time.Now().UTC().Format(time.RFC3339Nano)
	batch := make([]map[string]string, len(dead))
	for i, d := range dead {
		batch[i] = map[string]string{"originalId": d.id, "stream": stream, "data": readable(d.payload), "reason": d.reason, "failedAt": failedAt}
	}
	sctx, cancel := sideContext(ctx)
	defer cancel()
	if _, err := e.store.AddBatch(sctx, telemetry.DLQStream(tenant), batch, 0); err != nil {
		e.log.Error("write dead letters; the entries stay pending", "stream", stream, "entries", len(dead), "err", err)
		return nil
	}
	ids := make([]string, len(dead))
	for i, d := range dead {
		e.log.Warn("message sent to the dead-letter stream", "stream", stream, "id", d.id, "reason", d.reason)
		ids[i] = d.id
	}
	e.m.dlqTotal.Add(float64(len(ids)))
	return ids
}

// readable is a dead letter's data as operators read it: a compact entry
// (docs/stream-contract.md) becomes the JSON entry of its message, which
// ingest takes back as well on a replay; one that does not decode stays
// as it is, the reason says why.
func readable(data string) string {
	if !telemetry.IsCompact(data) {
		return data
	}
	m, err := telemetry.DecodeMessage([]byte(data))
	if err != nil {
		return data
	}
	b, err := m.AppendEntryJSON(nil)
	if err != nil {
		return data
	}
	return string(b)
}

// ack acknowledges ids and forgets their excused deliveries.
func (e *engine) ack(ctx context.Context, stream string, ids []string) {
	if len(ids) == 0 {
		return
	}
	tenant, _ := telemetry.TenantOfStream(stream)
	sctx, cancel := sideContext(ctx)
	defer cancel()
	n, err := e.store.Ack(sctx, stream, telemetry.WriterGroup(tenant), ids...)
	if err != nil {
		// Rows are committed; a redelivery writes nothing twice.
		e.log.Warn("acknowledge batch", "stream", stream, "err", err)
		return
	}
	e.excused.forget(stream, ids)
	e.m.processed.Add(float64(n))
}

// rowsOf builds the rows of msgs in buf's row array, sorted by key and
// without in-batch duplicates (telemetry.Normalize). They are valid until
// the next rowsOf on buf or its reset.
func rowsOf(tenant string, msgs []parsed, buf *batchBuf) []telemetry.Row {
	n := 0
	for i := range msgs {
		n += len(msgs[i].msg.Readings)
	}
	buf.clean = false
	if cap(buf.rows) < n {
		buf.rows = make([]telemetry.Row, 0, n)
	}
	rows := buf.rows[:0]
	for i := range msgs {
		rows = msgs[i].msg.Rows(tenant, msgs[i].msg.Timestamp.Time, rows)
	}
	buf.rows = rows
	return telemetry.Normalize(rows)
}

// storeMessages writes msgs and sorts them into written (committed or
// spooled), failed (the database, and the spool if any, unavailable: they
// stay pending for a retry) and dead (refused by the database for their
// content). Entries are checked before they get here, so a refusal is rare;
// when the batch is refused it is split in halves until the message at
// fault is alone, which costs a few inserts rather than one per message.
func (e *engine) storeMessages(ctx context.Context, stream string, msgs []parsed, buf *batchBuf) (written, failed []parsed, dead []deadLetter) {
	if len(msgs) == 0 {
		return nil, nil, nil
	}
	tenant, _ := telemetry.TenantOfStream(stream)
	err := e.write(ctx, rowsOf(tenant, msgs, buf), len(msgs) == 1)
	switch {
	case err == nil:
		return msgs, nil, nil
	case errors.Is(err, errBackend):
		if e.spool != nil && ctx.Err() == nil {
			serr := e.spoolMessages(stream, msgs)
			if serr == nil {
				return msgs, nil, nil
			}
			e.log.Warn("spool batch; it stays in the stream for a retry", "stream", stream, "entries", len(msgs), "err", serr)
		}
		return nil, msgs, nil
	case len(msgs) == 1:
		return nil, nil, []deadLetter{{id: msgs[0].id, payload: msgs[0].payload,
			reason: fmt.Sprintf("insert failed after %d attempts: %v", e.cfg.MaxRetries+1, err)}}
	}
	// Capped halves: appending the second half's results to the first's
	// must not write over the first's failed messages.
	half := len(msgs) / 2
	w1, f1, d1 := e.storeMessages(ctx, stream, msgs[:half:half], buf)
	w2, f2, d2 := e.storeMessages(ctx, stream, msgs[half:], buf)
	return append(w1, w2...), append(f1, f2...), append(d1, d2...)
}

func (e *engine) spoolMessages(stream string, msgs []parsed) error {
	arr := make([]telemetry.Message, len(msgs))
	for i := range msgs {
		arr[i] = msgs[i].msg
	}
	data, err := json.Marshal(arr)
	if err != nil {
		return fmt.Errorf("encode spool entry: %w", err)
	}
	if err := e.spool.Append(spool.Entry{Source: stream, Data: data}); err != nil {
		e.spoolFailing.Store(true)
		return err
	}
	e.spoolFailing.Store(false)
	e.m.spooled.Add(float64(len(msgs)))
	return nil
}

// process handles one batch of one stream: decode and check, write,
// dead-letter, then acknowledge what is done. It returns the entries it
// could not write because the database (and the spool, if any) was
// unavailable: they stay pending, and the caller excuses their delivery
// once (excuses). Entries left unwritten because the batch ran out of its
// own time are not returned: a batch that outlasts its budget while the
// backends answer may be what hangs every worker, so it stays pending, and
// reclaim counts its deliveries. It never fails for bad input. It decodes
// into buf and resets it before it returns.
func (e *engine) process(ctx context.Context, stream string, entries []streamstore.Entry, buf *batchBuf) (held []streamstore.Entry) {
	if len(entries) == 0 {
		return nil
	}
	t0 := time.Now()
	defer func() { e.m.batchDuration.Observe(time.Since(t0).Seconds()) }()
	defer buf.reset()
	msgs, dead := decodeEntries(entries, buf)
	written, failed, dead2 := e.storeMessages(ctx, stream, msgs, buf)
	dead = append(dead, dead2...)
	done := make([]string, 0, len(written)+len(dead))
	for i := range written {
		if r := written[i].rejects; r != nil {
			// Acknowledged with its dead letter, so neither half is lost.
			dead = append(dead, *r)
			continue
		}
		done = append(done, written[i].id)
	}
	done = append(done, e.toDLQ(ctx, stream, dead)...)
	e.ack(ctx, stream, done)
	if len(failed) == 0 {
		return nil
	}
	if ctx.Err() != nil && e.breaker.Allow() {
		e.log.Warn("batch ran past its time budget; it stays pending for reclaim", "stream", stream, "entries", len(failed), "err", ctx.Err())
		return nil
	}
	ids := make(map[string]bool, len(failed))
	for i := range failed {
		ids[failed[i].id] = true
	}
	for _, en := range entries {
		if ids[en.ID] {
			held = append(held, en)
		}
	}
	e.log.Warn("batch not written: database unavailable; it waits in the stream", "stream", stream, "entries", len(held))
	return held
}

// processBounded is process with the batch's time bounded by
// processBudget, even once ctx ends, so shutdown does not strand
// half-written work.
func (e *engine) processBounded(ctx context.Context, stream string, entries []streamstore.Entry, buf *batchBuf) []streamstore.Entry {
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), processBudget(e.every.processTO, entries))
	defer cancel()
	return e.process(pctx, stream, entries, buf)
}

// processBudget is processTO for each MaxPayloadBytes of data in entries
// (at least one). A batch that runs out of time stays pending for reclaim,
// which counts the delivery, so a budget too small for a valid batch would
// send it to the dead-letter stream: entries may hold up to
// MaxMessageBytes, far more than a usual batch's few MiB.
func processBudget(processTO time.Duration, entries []streamstore.Entry) time.Duration {
	n := 0
	for _, en := range entries {
		n += len(en.Values[telemetry.StreamField])
	}
	return processTO * time.Duration(1+n/telemetry.MaxPayloadBytes)
}

// processDetached is a worker's processBounded: a batch the database could
// not take waits behind the breaker and is written when the database is
// back, still pending for this worker, rather than being read again and
// again by reclaim. Its delivery is excused once, however many times it is
// tried, and reclaim leaves it alone while this worker holds it. It gives
// up when ctx ends; the entries stay pending.
func (e *engine) processDetached(ctx context.Context, stream string, entries []streamstore.Entry, buf *batchBuf) {
	held := e.processBounded(ctx, stream, entries, buf)
	if len(held) == 0 {
		return
	}
	e.excused.add(stream, held)
	e.holding.add(stream, held)
	defer e.holding.remove(stream, held)
	for len(held) > 0 && e.waitForBackend(ctx) {
		held = e.processBounded(ctx, stream, held, buf)
	}
}

// waitForBackend waits until a write may succeed: the breaker closed, or,
// with a spool, a second later (an append may succeed again once the disk
// has room). False when ctx ended first.
func (e *engine) waitForBackend(ctx context.Context) bool {
	for {
		if !lifecycle.Sleep(ctx, time.Second) {
			return false
		}
		if e.breaker.Allow() || e.spool != nil {
			return true
		}
	}
}

// canWrite reports whether a batch has anywhere to go now.
func (e *engine) canWrite() bool {
	return e.breaker.Allow() || (e.spool != nil && !e.spoolFailing.Load())
}

// excuses counts, per pending entry, the deliveries that ended because the
// database or the spool was unavailable. Reclaim subtracts them from the
// entry's delivery count: an outage is not a poison message, however many
// times it made an entry come back. The counts live in this process only;
// an entry left by a process that died counts all its deliveries, as
// before. Entries leave when acknowledged; maxExcused bounds the map should
// entries leave another way (trimmed, or acknowledged by another process).
type excuses struct {
	mu sync.Mutex
	n  map[string]int64
}

const maxExcused = 1 << 20

func excuseKey(stream, id string) string { return stream + "\x00" + id }

func (x *excuses) add(stream string, entries []streamstore.Entry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.n == nil {
		x.n = make(map[string]int64)
	}
	for _, en := range entries {
		k := excuseKey(stream, en.ID)
		if _, ok := x.n[k]; !ok && len(x.n) >= maxExcused {
			clear(x.n)
		}
		x.n[k]++
	}
}

func (x *excuses) get(stream, id string) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.n[excuseKey(stream, id)]
}

// held is the set of pending entries a worker of this process holds for a
// retry (processDetached). Reclaim leaves them to it: taking them over
// would write them, and dead-letter their refused readings, twice.
type held struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func (h *held) add(stream string, entries []streamstore.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ids == nil {
		h.ids = make(map[string]struct{})
	}
	for _, en := range entries {
		h.ids[excuseKey(stream, en.ID)] = struct{}{}
	}
}

func (h *held) remove(stream string, entries []streamstore.Entry) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, en := range entries {
		delete(h.ids, excuseKey(stream, en.ID))
	}
}

func (h *held) has(stream, id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.ids[excuseKey(stream, id)]
	return ok
}

func (x *excuses) forget(stream string, ids []string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, id := range ids {
		delete(x.n, excuseKey(stream, id))
	}
}
