package ingest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestAnomalyScoreIntegration: the agent's anomaly score of a reading
// reaches readings.anomaly_score through every write path (a large batch
// by COPY on PostgreSQL, a small one by INSERT, SQLite's inserts), and a
// reading without one stores NULL.
func TestAnomalyScoreIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		base := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
		scored := func(i int) string {
			m := telemetry.Message{AgentUUID: h.agent, DeviceName: fmt.Sprintf("dev%d", i%5), Protocol: "modbus",
				Timestamp: telemetry.TimestampOf(base.Add(time.Duration(i) * time.Second))}
			for r := range 4 {
				v := float64(i + r)
				rd := telemetry.Reading{Name: fmt.Sprintf("r%d", r), Value: &v}
				if r == 1 {
					score := float64(i%100) / 100
					rd.AnomalyScore = &score
				}
				m.Readings = append(m.Readings, rd)
			}
			b, err := json.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			return string(b)
		}
		var big []string
		for i := range 400 {
			big = append(big, scored(i))
		}
		h.add(big...)
		h.start()
		h.drained(30 * time.Second)
		h.add(scored(1000))
		h.drained(30 * time.Second)
		h.stop()

		var withScore, without int
		ctx := context.Background()
		if err := h.db.SQL().QueryRowContext(ctx, `SELECT count(anomaly_score), count(*) - count(anomaly_score) FROM readings WHERE tenant_id = $1`,
			h.tenant).Scan(&withScore, &without); err != nil {
			t.Fatal(err)
		}
		if withScore != 401 || without != 3*401 {
			t.Errorf("%d rows with a score and %d without, want 401 and %d", withScore, without, 3*401)
		}
		for _, i := range []int{37, 1000} {
			var score float64
			if err := h.db.SQL().QueryRowContext(ctx, `SELECT anomaly_score FROM readings WHERE tenant_id = $1 AND metric_name = $2 AND time = $3`,
				h.tenant, fmt.Sprintf("dev%d.r1", i%5), h.db.Dialect().TimeArg(base.Add(time.Duration(i)*time.Second))).Scan(&score); err != nil {
				t.Fatal(err)
			}
			if want := float64(i%100) / 100; score != want {
				t.Errorf("message %d: score %g, want %g", i, score, want)
			}
		}
	})
}
