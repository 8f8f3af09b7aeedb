package ingest

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// logsLoop moves agent log batches from the tenants' logs streams into
// agent_logs. Log volume is small next to telemetry, so one loop serves all
// tenants. Each line is keyed by its entry id and position, so an entry
// delivered twice adds no line; a malformed entry goes to the tenant's
// dead-letter stream; a failing database leaves entries pending, to be
// taken up again once they have been idle for RECLAIM_IDLE_MS.
func (e *engine) logsLoop(ctx context.Context) {
	consumer := e.prefix + "-logs"
	var streams []string
	var lastScan time.Time
	for ctx.Err() == nil {
		if time.Since(lastScan) >= e.every.discover {
			lastScan = time.Now()
			added, err := e.newStreams(ctx, e.every.logsPattern, streams, telemetry.LogWriterGroup)
			if err != nil && ctx.Err() == nil {
				e.log.Warn("discover agent log streams", "err", err)
			}
			streams = append(streams, added...)
		}
		got := false
		for _, s := range streams {
			if e.logsStream(ctx, s, consumer) {
				got = true
			}
		}
		if !got {
			lifecycle.Sleep(ctx, e.idleBlock())
		}
	}
}

// logsStream handles one read of one logs stream and reports whether it
// found entries.
func (e *engine) logsStream(ctx context.Context, stream, consumer string) bool {
	tenant, _ := telemetry.TenantOfStream(stream)
	group := telemetry.LogWriterGroup(tenant)
	entries, _, err := e.store.AutoClaim(ctx, stream, group, consumer, config.Millis(e.cfg.ReclaimIdleMS), "0-0", e.cfg.BatchSize)
	if err != nil || len(entries) == 0 {
		entries, err = e.store.ReadGroup(ctx, stream, group, consumer, e.cfg.BatchSize, 0)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("read agent logs", "stream", stream, "err", err)
		}
		return false
	}
	if len(entries) == 0 {
		return false
	}
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.every.processTO)
	defer cancel()
	var dead []deadLetter
	var good []string
	type batch struct {
		id string
		b  telemetry.LogBatch
	}
	var batches []batch
	for _, en := range entries {
		data := en.Values[telemetry.StreamField]
		b, err := telemetry.ParseLogBatch([]byte(data))
		if err != nil {
			dead = append(dead, deadLetter{id: en.ID, payload: data, reason: "agent log batch: " + err.Error()})
			continue
		}
		batches = append(batches, batch{en.ID, b})
		good = append(good, en.ID)
	}
	if len(batches) > 0 {
		if err := e.writeLogs(pctx, tenant, func(stmt *sql.Stmt) error {
			for _, b := range batches {
				agent, _ := telemetry.ParseAgentUUID(b.b.AgentUUID)
				for i, l := range b.b.Logs {
					// A device's log text may hold NUL, which PostgreSQL
					// refuses: a line that can never be written would
					// stay pending forever and hold up the rest.
					var extra any
					if len(l.Extra) > 0 {
						raw, err := db.StorableJSON(l.Extra)
						if err != nil {
							return fmt.Errorf("log line %s/%d: %w", b.id, i, err)
						}
						extra = string(raw)
					}
					if _, err := stmt.ExecContext(pctx, tenant, agent.String(), e.db.Dialect().TimeArg(l.Timestamp.Time), l.Level, db.StorableText(l.Message),
						nullable(db.StorableText(l.Component)), nullable(db.StorableText(l.Source)), extra, b.id, i); err != nil {
						return fmt.Errorf("insert log line %s/%d: %w", b.id, i, err)
					}
				}
			}
			return nil
		}); err != nil {
			e.log.Warn("agent logs not written; they stay pending", "stream", stream, "entries", len(batches), "err", err)
			good = nil
		}
	}
	good = append(good, e.toDLQ(pctx, stream, dead)...)
	if len(good) > 0 {
		if _, err := e.store.Ack(pctx, stream, group, good...); err != nil {
			e.log.Warn("acknowledge agent logs", "stream", stream, "err", err)
		}
	}
	return true
}

func (e *engine) writeLogs(ctx context.Context, tenant string, fill func(*sql.Stmt) error) error {
	tx, err := e.db.SQL().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO agent_logs (tenant_id, agent_uuid, time, level, message, component, source, data, entry_id, line)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (tenant_id, entry_id, line) DO NOTHING`)
	if err != nil {
		return fmt.Errorf("prepare log insert: %w", err)
	}
	defer stmt.Close()
	if err := fill(stmt); err != nil {
		return err
	}
	return tx.Commit()
}
