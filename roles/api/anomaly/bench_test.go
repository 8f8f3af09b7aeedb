package anomaly

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// BenchmarkEvaluate judges 50-reading messages from 40 devices against
// 100 z-score rules, two per reading name, as bench ingest --anomaly-rules
// 100 does, without a database (no rule fires).
func BenchmarkEvaluate(b *testing.B) {
	k := 4.0
	tenant := "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	tr := &tenantRules{match: map[string][]int{}}
	for i := range 100 {
		r := Rule{ID: fmt.Sprintf("r%d", i), Name: "bench", Condition: Condition{Type: TypeZScore, Metric: fmt.Sprintf("m%d", i%50), K: &k,
			Window: "10m", MinSamples: 10}, RecoverAfter: "1m"}
		tr.rules = append(tr.rules, &compiled{rule: r, version: ruleVersion(r), det: compile(r.Condition), recoverAfter: time.Minute})
	}
	e := newEvaluator(nil, &Deps{Now: time.Now, Log: slog.New(slog.DiscardHandler)}, nil, newMetrics(nil))
	e.tenants[tenant] = tr
	tu, _ := codec.ParseUUID(tenant)
	key := codec.EncodeID(tu)
	base := time.Now()
	msgs := make([]telemetry.Message, 40)
	for d := range msgs {
		msgs[d] = telemetry.Message{AgentUUID: codec.NewUUID().String(), DeviceName: fmt.Sprintf("plc-%02d", d)}
		for r := range 50 {
			v := float64(d*50 + r)
			msgs[d].Readings = append(msgs[d].Readings, telemetry.Reading{Name: fmt.Sprintf("m%d", r), Value: &v})
		}
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := range b.N {
		m := msgs[i%len(msgs)]
		m.Timestamp = telemetry.TimestampOf(base.Add(time.Duration(i/len(msgs)) * time.Second))
		v := float64(i % 97)
		for r := range m.Readings {
			m.Readings[r].Value = &v
		}
		e.process(ctx, batch{tenantKey: key, msgs: []telemetry.Message{m}})
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*50), "ns/reading")
}
