package ingest

import (
	"context"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// signals are the autoscaler's inputs; its thresholds are the
// ingest.autoscale settings (docs/configuration.md, section ingest).
type signals struct {
	lagMS    int64   // age of the oldest unacknowledged entry
	poolPct  float64 // database connections in use
	depthPct float64 // fullest ingestion stream relative to its max length
	memPct   float64 // stream store memory relative to its maximum (0: no maximum)
}

// scaler decides one step per sample, at most one worker either way.
// Scaling up: lag over lag_scale_up_ms, a stream over 60 % full or the
// stream store over 75 % of its memory, unless the pool is over
// db_block_pct (more workers would only queue for connections) or the last
// step was within cooldown_ms; a lag over lag_critical_ms ignores the
// cooldown. Scaling down: scale_down_stable_checks samples in a row with lag
// under 500 ms (or lag_target_ms, when lower), pool under 40 %, streams under
// 20 % and memory under 50 %, and the cooldown passed.
type scaler struct {
	cfg        config.Autoscale
	lastChange time.Time
	calm       int
}

func newScaler(cfg config.Autoscale) *scaler { return &scaler{cfg: cfg} }

func (s *scaler) decide(now time.Time, sig signals, workers int) int {
	cooled := now.Sub(s.lastChange) >= config.Millis(s.cfg.CooldownMS)
	pressure := sig.lagMS > int64(s.cfg.LagScaleUpMS) || sig.depthPct > 60 || sig.memPct > 75
	critical := sig.lagMS > int64(s.cfg.LagCriticalMS)
	if pressure {
		s.calm = 0
		if workers < s.cfg.MaxWorkers && sig.poolPct <= float64(s.cfg.DBBlockPct) && (cooled || critical) {
			s.lastChange = now
			return +1
		}
		return 0
	}
	calmLag := min(int64(500), int64(s.cfg.LagTargetMS))
	if sig.lagMS < calmLag && sig.poolPct < 40 && sig.depthPct < 20 && sig.memPct < 50 {
		s.calm++
	} else {
		s.calm = 0
	}
	if s.calm >= s.cfg.ScaleDownStableChecks && workers > s.cfg.MinWorkers && cooled {
		s.calm = 0
		s.lastChange = now
		return -1
	}
	return 0
}

// sampleAndScale measures the signals, publishes them as metrics and lets
// the scaler act. Workers below the minimum or above the maximum (a profile
// changed under a running process) are corrected at once.
func (e *engine) sampleAndScale(ctx context.Context) {
	sig, streamLen, dlqLen := e.sample(ctx)
	if ctx.Err() != nil {
		return
	}
	e.lagMS.Store(sig.lagMS)
	e.m.lag.Set(float64(sig.lagMS) / 1000)
	e.m.streamLength.Set(float64(streamLen))
	e.m.dlqLength.Set(float64(dlqLen))
	e.saturated.Store(sig.poolPct > float64(e.cfg.DBSaturationHighWatermarkPct))

	n := e.workerCount()
	switch d := e.scaler.decide(time.Now(), sig, n); {
	case n < e.cfg.Autoscale.MinWorkers, d > 0:
		e.addWorker()
		e.log.Info("scaled workers up", "workers", e.workerCount(), "lag_ms", sig.lagMS, "pool_pct", sig.poolPct, "depth_pct", sig.depthPct)
	case n > e.cfg.Autoscale.MaxWorkers, d < 0:
		e.removeWorker()
		e.log.Info("scaled workers down", "workers", e.workerCount(), "lag_ms", sig.lagMS)
	}
}

func (e *engine) sample(ctx context.Context) (sig signals, streamLen, dlqLen int64) {
	now := time.Now()
	for _, s := range e.snapshot() {
		tenant, _ := telemetry.TenantOfStream(s)
		group := telemetry.WriterGroup(tenant)
		if n, err := e.store.Len(ctx, telemetry.DLQStream(tenant)); err == nil {
			dlqLen += n
		}
		g, err := e.store.Group(ctx, s, group)
		if err != nil {
			continue
		}
		if g.Lag > 0 {
			streamLen += g.Lag
		}
		streamLen += g.Pending
		if l, err := e.store.Len(ctx, s); err == nil && e.maxLen > 0 {
			sig.depthPct = max(sig.depthPct, 100*float64(l)/float64(e.maxLen))
		}
		// The oldest unacknowledged entry: the oldest pending one, or else
		// the first not yet delivered.
		var oldest string
		if p, err := e.store.PendingEntries(ctx, s, group, 1); err == nil && len(p) > 0 {
			oldest = p[0].ID
		} else if next, err := e.store.Range(ctx, s, "("+g.LastDeliveredID, "+", 1); err == nil && len(next) > 0 {
			oldest = next[0].ID
		}
		if oldest != "" {
			if t, err := streamstore.IDTime(oldest); err == nil {
				sig.lagMS = max(sig.lagMS, now.Sub(t).Milliseconds())
			}
		}
	}
	sig.poolPct = 100 * e.db.PoolStats().Saturation()
	if used, maxMem, err := e.store.Memory(ctx); err == nil && maxMem > 0 {
		sig.memPct = 100 * float64(used) / float64(maxMem)
	}
	return sig, streamLen, dlqLen
}
