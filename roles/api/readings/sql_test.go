package readings

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// TestSQLCarriesNoInput: whatever the tenant, agent and metric, they reach
// the database as arguments, never as SQL text, and the placeholders
// match the arguments one to one.
func TestSQLCarriesNoInput(t *testing.T) {
	const (
		tenant = `tenant'); DROP TABLE readings;--`
		agent  = `agent"sentinel`
		metric = `metric'sentinel $1`
	)
	lo, hi := time.Unix(0, 0), time.Unix(1, 0)
	for _, d := range []db.Dialect{{Engine: db.Postgres}, {Engine: db.Postgres, Timescale: true}, {Engine: db.SQLite}} {
		bucket, err := d.TimeBucket(time.Hour, "r.time")
		if err != nil {
			t.Fatal(err)
		}
		type built struct {
			name string
			text string
			args []any
			want []any // inputs that must be arguments
		}
		var all []built
		add := func(name, text string, args []any, want ...any) {
			all = append(all, built{name, text, args, want})
		}
		for _, f := range []seriesFilter{{}, {agent: agent}, {metric: metric}, {agent: agent, metric: metric}} {
			want := []any{tenant}
			if f.agent != "" {
				want = append(want, agent)
			}
			if f.metric != "" {
				want = append(want, metric)
			}
			text, args := latestSQL(d, tenant, f, false, 10)
			add("latest", text, args, want...)
			text, args = latestSQL(d, tenant, f, true, 10)
			add("latest with stats", text, args, want...)
			text, args = bucketSQL(d, tenant, f, bucket, d.TimeArg(lo), d.TimeArg(hi), 10)
			add("buckets", text, args, append(want, d.TimeArg(lo), d.TimeArg(hi))...)
			// Over rollups: raw, daily, hourly and raw spans.
			d0 := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
			spans := []rollup.Span{{Table: rollup.Raw, From: d0, To: d0.Add(time.Hour)}, {Table: rollup.Daily, From: d0.Add(day), To: d0.Add(3 * day)},
				{Table: rollup.Hourly, From: d0.Add(3 * day), To: d0.Add(80 * time.Hour)}, {Table: rollup.Raw, From: d0.Add(80 * time.Hour), To: d0.Add(81 * time.Hour)}}
			text, args = bucketSpansSQL(d, tenant, f, day, spans, 10)
			add("buckets over rollups", text, args, append(want, d.TimeArg(d0), d.TimeArg(d0.Add(81*time.Hour)))...)
		}
		// An export's selection: several agents and metrics.
		const agent2, metric2 = `agent2"sentinel`, `metric2'sentinel`
		multi := seriesFilter{agents: []string{agent, agent2}, metrics: []string{metric, metric2}}
		text, args := seriesRawSQL(d, tenant, multi, d.TimeArg(lo), d.TimeArg(hi))
		add("export raw", text, args, tenant, agent, agent2, metric, metric2, d.TimeArg(lo), d.TimeArg(hi))
		text, args = bucketSQL(d, tenant, multi, bucket, d.TimeArg(lo), d.TimeArg(hi), 0)
		add("export buckets", text, args, tenant, agent, agent2, metric, metric2, d.TimeArg(lo), d.TimeArg(hi))
		text, args = metricNamesSQL(d, tenant, 10)
		add("metric names", text, args, tenant)
		text, args = rawSQL(tenant, agent, metric, d.TimeArg(lo), d.TimeArg(hi), 10)
		add("raw", text, args, tenant, agent, metric, d.TimeArg(lo), d.TimeArg(hi))

		for _, b := range all {
			name := d.String() + " " + b.name
			for _, s := range []string{tenant, agent, metric, "sentinel", "DROP"} {
				if strings.Contains(b.text, s) {
					t.Errorf("%s: input %q is in the SQL:\n%s", name, s, b.text)
				}
			}
			for _, w := range b.want {
				if !slices.Contains(b.args, w) {
					t.Errorf("%s: %v is not among the arguments %v", name, w, b.args)
				}
			}
			checkPlaceholders(t, name, b.text, len(b.args))
		}
	}
}

// checkPlaceholders: every argument has a placeholder and every
// placeholder an argument.
func checkPlaceholders(t *testing.T, name, text string, nargs int) {
	t.Helper()
	used := map[int]bool{}
	for _, m := range regexp.MustCompile(`\$(\d+)`).FindAllStringSubmatch(text, -1) {
		n, _ := strconv.Atoi(m[1])
		used[n] = true
	}
	for n := 1; n <= nargs; n++ {
		if !used[n] {
			t.Errorf("%s: argument $%d is never used", name, n)
		}
	}
	if len(used) != nargs {
		t.Errorf("%s: %d placeholders for %d arguments", name, len(used), nargs)
	}
}

// TestByteOrder: PostgreSQL sorts text by bytes whatever the database's
// collation, as SQLite does by default.
func TestByteOrder(t *testing.T) {
	if got := byteOrder(db.Dialect{Engine: db.Postgres}, "m"); got != `m COLLATE "C"` {
		t.Errorf("postgres: %s", got)
	}
	if got := byteOrder(db.Dialect{Engine: db.SQLite}, "m"); got != "m" {
		t.Errorf("sqlite: %s", got)
	}
}
