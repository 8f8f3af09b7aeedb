package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
)

// anomalyRules makes the bench tenant a tenants row and n z-score rules,
// and the evaluator that runs them. Rule i watches reading name i modulo
// the readings per message, so with 100 rules and 50 readings every
// reading is judged by two rules: the evaluator's cost grows with the
// rules a reading matches, and a tenant's rules each watch some metrics,
// not all of them.
func (b *bench) anomalyRules(ctx context.Context, g *benchGen, d *db.DB, r *rt.Runtime, n int) (*anomaly.Anomaly, error) {
	tu, err := codec.DecodeID(g.tenant)
	if err != nil {
		return nil, fmt.Errorf("bench tenant: %w", err)
	}
	if _, err := d.SQL().ExecContext(ctx, `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
		tu.String(), "edgeplat-bench-"+g.tenant, d.Dialect().TimeArg(time.Now())); err != nil {
		return nil, fmt.Errorf("bench tenant: %w", err)
	}
	an := anomaly.New(anomaly.Deps{DB: d, Registerer: r.Metrics, Log: b.log})
	name, k := "bench", 4.0
	for i := range n {
		in := anomaly.RuleInput{Name: &name, Type: anomaly.TypeZScore,
			Condition: anomaly.Condition{Metric: g.names[i%len(g.names)], K: &k, Window: "10m"}}
		if _, err := an.CreateRule(ctx, tu.String(), in); err != nil {
			return nil, fmt.Errorf("bench anomaly rule %d: %w", i, err)
		}
	}
	return an, nil
}

// dropAnomalyTenant deletes the bench tenant's row, and with it its rules
// and incidents.
func (b *bench) dropAnomalyTenant(ctx context.Context, g *benchGen) {
	tu, err := codec.DecodeID(g.tenant)
	if err != nil {
		return
	}
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := b.db.SQL().ExecContext(cctx, `DELETE FROM tenants WHERE uuid = $1`, tu.String()); err != nil {
		fmt.Fprintf(b.progress, "warning: delete bench tenant %s: %v\n", g.tenant, err)
	}
}

// feedAnomaly hands the evaluator every bench message, one publish each,
// as the Cloud API's pipeline does on the same host, keeping its queue at
// most half full so nothing is dropped for want of room: the measurement
// is of judging every message. It returns the time from t0 until the last
// batch was judged.
func (b *bench) feedAnomaly(ctx context.Context, an *anomaly.Anomaly, g *benchGen, r *rt.Runtime, t0 time.Time) time.Duration {
	// The evaluator takes batches once its Start has loaded the rules;
	// before, as for a tenant without rules, Observe ignores them.
	for {
		if n, _ := roleMetric(r, "edgeplat_api_anomaly_rules"); n > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return time.Since(t0)
		case <-time.After(time.Millisecond):
		}
	}
	for i := range b.o.Messages {
		for an.Backlog() >= 512 {
			select {
			case <-ctx.Done():
				return time.Since(t0)
			case <-time.After(time.Millisecond):
			}
		}
		an.Observe(g.tenant, []telemetry.Message{g.message(i)})
	}
	for pipelineMetricLabel(r, "edgeplat_api_anomaly_batches_total", "outcome", "evaluated")+
		pipelineMetricLabel(r, "edgeplat_api_anomaly_batches_total", "outcome", "dropped") <
		float64(b.o.Messages) {
		select {
		case <-ctx.Done():
			return time.Since(t0)
		case <-time.After(5 * time.Millisecond):
		}
	}
	return time.Since(t0)
}
