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
	tests := []struct {
		name string
		src  string
		rng  Range
	}{
		{"raw_all", `readings`, hour},
		{"raw_matchers", `readings{metric_name="boiler.temp", agent_uuid="3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F", device_name!="", unit=~"°C|K", protocol!~"opc.*", quality="good"}`, hour},
		{"raw_agent_regex", `readings{agent_uuid=~"3f2b.*", agent_uuid!="00000000-0000-0000-0000-000000000000"}`, hour},
		{"rate_regex", `rate(readings{metric_name=~"boiler.*"}[5m])`, hour},
		{"avg_by_agent_rate", `avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`, hour},
		{"increase_gcd_bucket", `increase(readings{metric_name="m"}[90s])`, hour},
		{"avg_over_time", `avg_over_time(readings{metric_name="boiler.temp"}[1m])`, hour},
		{"sum_without_max_over_time", `sum without (unit) (max_over_time(readings{device_name=~"(?i)pump"}[1h]))`, Range{Start: testStart, End: testStart.Add(24 * time.Hour), Step: time.Hour}},
		{"quoted_values", `readings{metric_name="it's \"quoted\"; DROP TABLE readings; --", device_name=~"a'b|\\d+"}`, hour},
	}
	for _, tt := range tests {
		for _, d := range dialects {
			name := tt.name + "." + strings.ReplaceAll(d.String(), "+", "_") + ".sql"
			t.Run(name, func(t *testing.T) {
				p, err := Compile(tt.src, testTenant, tt.rng, d, Limits{})
				if err != nil {
					t.Fatal(err)
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
