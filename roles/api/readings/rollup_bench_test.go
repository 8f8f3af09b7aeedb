package readings

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/query"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// BenchmarkStatisticsIntegration is the tenant-wide statistics endpoints
// on PostgreSQL over 60 days of one tenant's readings: 20 agents of 5
// metrics, a reading every 2 minutes (4.3 million rows), read from raw
// readings alone and with the rollups (docs/benchmarks.md, section
// Readings statistics). Seeding takes about a minute.
//
//	go test -run '^$' -bench StatisticsIntegration -benchtime 30x ./roles/api/readings/
func BenchmarkStatisticsIntegration(b *testing.B) {
	const (
		agents, metrics = 20, 5
		every           = 2 * time.Minute
		span            = 60 * day
	)
	d := dbtest.Migrated(b, "postgres")
	ctx := b.Context()
	now := time.Now().UTC().Truncate(time.Minute)
	start := now.Add(-span)
	// The late-reading trigger is for what comes after the rollups; a
	// seed loaded at once has nothing to re-roll.
	if _, err := d.SQL().ExecContext(ctx, `ALTER TABLE readings DISABLE TRIGGER readings_rollup_late`); err != nil {
		b.Fatal(err)
	}
	seedStart := time.Now()
	for a := range agents {
		agent := fmt.Sprintf("bbbbbbbb-0000-4000-8000-%012d", a)
		var rows [][]any
		for m := range metrics {
			metric := fmt.Sprintf("line.sensor%d", m)
			i := 0
			for at := start; at.Before(now); at = at.Add(every) {
				rows = append(rows, []any{at, agent, metric, float64((i*7+m)%100) * 0.5, "modbus", "C", "GOOD", "plc", tenantA})
				i++
			}
		}
		if _, err := d.Pool().CopyFrom(ctx, pgx.Identifier{"readings"},
			[]string{"time", "agent_uuid", "metric_name", "value", "protocol", "unit", "quality", "device_name", "tenant_id"},
			pgx.CopyFromRows(rows)); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := d.SQL().ExecContext(ctx, `ANALYZE readings`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d rows in %s", agents*metrics*int(span/every), time.Since(seedStart).Round(time.Second))
	rollStart := time.Now()
	w := rollup.New(d, rollup.Options{})
	if _, err := w.Round(ctx); err != nil {
		b.Fatal(err)
	}
	c, err := rollup.Load(ctx, d.SQL())
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("first rollup round in %s: hourly %s to %s", time.Since(rollStart).Round(time.Second), c.Hourly.From, c.Hourly.To)
	if _, err := d.SQL().ExecContext(ctx, `ANALYZE readings_hourly; ANALYZE readings_daily`); err != nil {
		b.Fatal(err)
	}
	h := newRouter(b, d, query.Limits{}, now)
	// Raw: the rollups' state says they hold nothing, as before them.
	setState := func(hourly, daily rollup.Window) {
		for name, win := range map[string]rollup.Window{"hourly": hourly, "daily": daily} {
			var lo, hi any
			if !win.From.IsZero() {
				lo, hi = win.From, win.To
			}
			if _, err := d.SQL().ExecContext(ctx, `UPDATE readings_rollup_state SET low = $1, high = $2 WHERE name = $3`, lo, hi, name); err != nil {
				b.Fatal(err)
			}
		}
	}
	for _, path := range []string{
		"/api/v1/readings/hourly",
		"/api/v1/readings/hourly?start=" + now.Add(-7*day).Truncate(time.Hour).Format(time.RFC3339),
		"/api/v1/readings/daily",
		"/api/v1/readings/daily?start=" + start.Truncate(day).Add(day).Format(time.RFC3339),
		"/api/v1/readings/bbbbbbbb-0000-4000-8000-000000000003/aggregate?granularity=daily",
	} {
		for _, mode := range []string{"raw", "rollups"} {
			b.Run(mode+" "+path[len("/api/v1/readings"):], func(b *testing.B) {
				if mode == "raw" {
					setState(rollup.Window{}, rollup.Window{})
				} else {
					setState(c.Hourly, c.Daily)
				}
				for b.Loop() {
					rec := httptest.NewRecorder()
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.Header.Set(tenantHeader, tenantA)
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK {
						b.Fatalf("%s = %d %s", path, rec.Code, rec.Body)
					}
				}
			})
		}
	}
}
