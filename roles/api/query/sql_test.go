package query

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	pg       = db.Dialect{Engine: db.Postgres}
	pgTS     = db.Dialect{Engine: db.Postgres, Timescale: true}
	sqliteD  = db.Dialect{Engine: db.SQLite}
	dialects = []db.Dialect{pg, pgTS, sqliteD}
)

const testTenant = "tenant-a"

var testStart = time.Date(2024, 3, 10, 10, 0, 0, 0, time.UTC)

// TestSQLGolden pins the SQL and arguments of representative queries per
// dialect. Run with -update to rewrite testdata/sql/ after a deliberate
// change, and review the diff.
func TestSQLGolden(t *testing.T) {
	hour := Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute}
	// Rollups holding the days before testStart's and its hours up to 06:00.
	cov := &rollup.Coverage{
		Hourly: rollup.Window{From: testStart.Add(-72 * time.Hour), To: testStart.Add(20 * time.Hour)},
		Daily:  rollup.Window{From: testStart.Add(-72 * time.Hour).Truncate(24 * time.Hour), To: testStart.Truncate(24 * time.Hour)},
	}
	tests := []struct {
		name string
		src  string
		rng  Range
		cov  *rollup.Coverage
	}{
		{"raw_all", `readings`, hour, nil},
		{"raw_matchers", `readings{metric_name="boiler.temp", agent_uuid="3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F", device_name!="", unit=~"°C|K", protocol!~"opc.*", quality="good"}`, hour, nil},
		{"raw_agent_regex", `readings{agent_uuid=~"3f2b.*", agent_uuid!="00000000-0000-0000-0000-000000000000"}`, hour, nil},
		{"rate_regex", `rate(readings{metric_name=~"boiler.*"}[5m])`, hour, nil},
		{"avg_by_agent_rate", `avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`, hour, nil},
		{"increase_gcd_bucket", `increase(readings{metric_name="m"}[90s])`, hour, nil},
		{"avg_over_time", `avg_over_time(readings{metric_name="boiler.temp"}[1m])`, hour, nil},
		{"sum_without_max_over_time", `sum without (unit) (max_over_time(readings{device_name=~"(?i)pump"}[1h]))`, Range{Start: testStart, End: testStart.Add(24 * time.Hour), Step: time.Hour}, nil},
		{"quoted_values", `readings{metric_name="it's \"quoted\"; DROP TABLE readings; --", device_name=~"a'b|\\d+"}`, hour, nil},
		// Over rollups: a counter in hour buckets (rows as they are), a
		// gauge in day buckets (daily, hourly and raw spans combined).
		{"rollup_rate_1h", `rate(readings{metric_name="energy"}[1h])`,
			Range{Start: testStart.Add(-30*time.Hour - 20*time.Minute), End: testStart.Add(23 * time.Hour), Step: time.Hour}, cov},
		{"rollup_avg_over_time_1d", `avg_over_time(readings{device_name=~"pump.*"}[1d])`,
			Range{Start: testStart.Add(-60 * time.Hour), End: testStart.Add(40 * time.Hour), Step: 24 * time.Hour}, cov},
	}
	for _, tt := range tests {
		for _, d := range dialects {
			name := tt.name + "." + strings.ReplaceAll(d.String(), "+", "_") + ".sql"
			t.Run(name, func(t *testing.T) {
				p, err := Compile(tt.src, testTenant, tt.rng, d, Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if tt.cov != nil {
					if p = p.WithRollups(*tt.cov); !p.Rollups() {
						t.Fatal("the plan reads no rollup")
					}
				}
				got := renderPlan(tt.src, tt.rng, p)
				path := filepath.Join("testdata", "sql", name)
				if *update {
					if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
						t.Fatal(err)
					}
					return
				}
				want, err := os.ReadFile(path)
				if err != nil {
					t.Fatalf("%v (run go test -run TestSQLGolden -update to create it)", err)
				}
				if got != string(want) {
					t.Errorf("%s changed (go test -run TestSQLGolden -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
				}
			})
		}
	}
}

func renderPlan(src string, r Range, p *Plan) string {
	sql, args := p.SQL()
	var b strings.Builder
	fmt.Fprintf(&b, "-- query: %s\n-- range: %s .. %s step %s\n", src, r.Start.Format(time.RFC3339), r.End.Format(time.RFC3339), r.Step)
	b.WriteString(sql)
	b.WriteString("\n-- args:\n")
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			fmt.Fprintf(&b, "-- $%d = %s (time)\n", i+1, v.Format(time.RFC3339Nano))
		default:
			fmt.Fprintf(&b, "-- $%d = %#v\n", i+1, v)
		}
	}
	return b.String()
}
