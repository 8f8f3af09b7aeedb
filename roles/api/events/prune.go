package events

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/lifecycle"
)

// DefaultRetention is api.events_retention's default.
const DefaultRetention = 90 * 24 * time.Hour

// DefaultPruneEvery is how often the pruner runs.
const DefaultPruneEvery = time.Hour

// pruneBatch bounds the rows one DELETE removes, so a first run over a
// long history holds no lock for long.
const pruneBatch = 5000

// Pruner deletes the event log's rows older than the retention: state
// snapshots (but each agent's newest, the baseline of a comparison with
// "now") and audit records. Target-state history keeps its last 100
// versions per agent and incidents belong to anomaly detection, so
// neither is pruned here.
type Pruner struct {
	db *db.DB
	// retention changes at run time (SetRetention, from the system
	// config); in nanoseconds.
	retention atomic.Int64
	every     time.Duration
	snaps     *Snapshots
	m         *Metrics
	log       *slog.Logger
	now       func() time.Time
}

// NewPruner returns the pruning service; retention <= 0 keeps everything
// (the service then only waits), every <= 0 is DefaultPruneEvery.
func NewPruner(d *db.DB, retention, every time.Duration, snaps *Snapshots, m *Metrics, log *slog.Logger) *Pruner {
	if every <= 0 {
		every = DefaultPruneEvery
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &Pruner{db: d, every: every, snaps: snaps, m: m, log: log, now: time.Now}
	p.retention.Store(int64(retention))
	return p
}

// SetRetention changes the retention from the next round on; <= 0 keeps
// everything.
func (p *Pruner) SetRetention(d time.Duration) { p.retention.Store(int64(d)) }

// Retention is the retention in effect.
func (p *Pruner) Retention() time.Duration { return time.Duration(p.retention.Load()) }

// Name implements lifecycle.Service.
func (p *Pruner) Name() string { return "api-events-prune" }

// Start implements lifecycle.Service.
func (p *Pruner) Start(context.Context) error { return nil }

// Stop implements lifecycle.Service.
func (p *Pruner) Stop(context.Context) error { return nil }

// Run prunes at once and then every p.every until ctx ends; a failed
// round is logged and counted, and the next one tries again.
// A retention of 0 skips the rounds until it changes.
func (p *Pruner) Run(ctx context.Context) error {
	t := time.NewTicker(p.every)
	defer t.Stop()
	for {
		if _, err := p.Prune(ctx); err != nil && ctx.Err() == nil {
			p.m.pruneErrs.Inc()
			p.log.Warn("prune event log", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Prune deletes what is older than the retention and returns how many
// rows went, by table.
func (p *Pruner) Prune(ctx context.Context) (map[string]int64, error) {
	retention := p.Retention()
	if retention <= 0 {
		return map[string]int64{}, nil
	}
	cut := p.db.Dialect().TimeArg(p.now().Add(-retention))
	out := map[string]int64{}
	steps := []struct{ table, q string }{
		{"agent_state_snapshots", `DELETE FROM agent_state_snapshots WHERE id IN (
			SELECT s.id FROM agent_state_snapshots s WHERE s.reported_at < $1 AND s.id <> (
				SELECT l.id FROM agent_state_snapshots l WHERE l.agent_uuid = s.agent_uuid ORDER BY l.reported_at DESC, l.id DESC LIMIT 1)
			LIMIT $2)`},
		{"audit_events", `DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < $1 LIMIT $2)`},
	}
	for _, s := range steps {
		for {
			res, err := p.db.SQL().ExecContext(ctx, s.q, cut, pruneBatch)
			if err != nil {
				return out, fmt.Errorf("prune %s: %w", s.table, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return out, fmt.Errorf("prune %s: %w", s.table, err)
			}
			out[s.table] += n
			p.m.pruned.WithLabelValues(s.table).Add(float64(n))
			if n < pruneBatch {
				break
			}
		}
	}
	if out["agent_state_snapshots"] > 0 && p.snaps != nil {
		p.snaps.forget()
	}
	if n := out["agent_state_snapshots"] + out["audit_events"]; n > 0 {
		p.log.Info("event log pruned", "snapshots", out["agent_state_snapshots"], "audit_events", out["audit_events"], "retention", retention)
	}
	return out, nil
}

var _ lifecycle.Service = (*Pruner)(nil)
