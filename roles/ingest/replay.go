package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// replayLoop is the breaker's background poller: while the breaker is open
// it probes the database, and once the database answers it closes the
// breaker, then drains the spool oldest first. A spool left over from an
// earlier run is drained too. The breaker does not wait for the spool to be
// empty: a spool that cannot drain (its disk is full, so replay cannot
// record its progress) once held the breaker open for good, and every new
// batch with it. Rows are keyed and inserted ignoring existing keys, so
// spooled batches written after newer ones add exactly what they hold.
func (e *engine) replayLoop(ctx context.Context) {
	open := !e.breaker.Allow()
	if !open && (e.spool == nil || e.spool.Empty()) {
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	err := e.w.Probe(pctx)
	cancel()
	if err != nil {
		return
	}
	if open {
		e.breaker.Reset()
	}
	// Batches go to the database again: a spool append that failed during
	// the outage no longer degrades health.
	e.spoolFailing.Store(false)
	if e.spool != nil && !e.spool.Empty() {
		n, err := e.spool.Replay(ctx, 50, e.replayBatch)
		if n > 0 || err != nil {
			st := e.spool.Stats()
			e.log.Info("spool replay", "entries", n, "left_files", st.Files, "left_bytes", st.Bytes, "err", err)
		}
	}
}

// replayBatch writes spooled entries. It talks to the writer directly, so
// that a replay never spools its own entries again.
func (e *engine) replayBatch(ctx context.Context, entries []spool.Entry) error {
	for _, en := range entries {
		tenant, err := telemetry.TenantOfStream(en.Source)
		if err != nil {
			e.log.Warn("spool entry from an unknown source dropped", "source", en.Source)
			continue
		}
		var msgs []telemetry.Message
		if err := json.Unmarshal(en.Data, &msgs); err != nil {
			e.log.Warn("unreadable spool entry dropped", "source", en.Source, "err", err)
			continue
		}
		var rows []telemetry.Row
		var dead []deadLetter
		for i := range msgs {
			m := &msgs[i]
			if err := m.Validate(); err != nil || m.Timestamp == nil {
				data, _ := json.Marshal(m)
				dead = append(dead, deadLetter{id: "spool", payload: string(data), reason: fmt.Sprintf("invalid spooled message: %v", err)})
				continue
			}
			rows = m.Rows(tenant, m.Timestamp.Time, rows)
		}
		rows = telemetry.Normalize(rows)
		t0 := time.Now()
		n, err := e.w.Write(ctx, rows)
		e.m.insertDuration.Observe(time.Since(t0).Seconds())
		if err != nil {
			if !db.IsDataError(err) {
				return fmt.Errorf("replay %d rows: %w", len(rows), err)
			}
			// Bad rows cannot block the spool forever: park them.
			for i := range msgs {
				data, _ := json.Marshal(msgs[i])
				dead = append(dead, deadLetter{id: "spool", payload: string(data), reason: "replayed insert failed: " + err.Error()})
			}
		} else {
			e.m.inserted.Add(float64(n))
		}
		if len(dead) > 0 && len(e.toDLQ(ctx, en.Source, dead)) < len(dead) {
			return fmt.Errorf("dead-letter spooled messages of %s: stream store failing", en.Source)
		}
	}
	return nil
}
