package query

import (
	"errors"
	"math/rand/v2"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// integrationDB opens and migrates a fresh database of the given engine.
func integrationDB(t *testing.T, engine string) *db.DB { return dbtest.Migrated(t, engine) }

// nullable stores "" as NULL, as ingest does for a missing attribute.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func insertSamples(t *testing.T, d *db.DB, samples []sample) {
	t.Helper()
	ctx := t.Context()
	tx, err := d.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after Commit
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`)
	if err != nil {
		t.Fatal(err)
	}
	defer stmt.Close()
	dialect := d.Dialect()
	for _, s := range samples {
		var v any
		if s.V != nil {
			v = *s.V
		}
		if _, err := stmt.ExecContext(ctx, dialect.TimeArg(s.T), s.L[0], s.L[1], v, nullable(s.L[3]), nullable(s.L[4]),
			nullable(s.Quality), nullable(s.L[2]), s.Tenant); err != nil {
			t.Fatalf("insert %+v: %v", s, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// fixedSamples have values simple enough to check by hand, and labels
// that exercise NULL columns, a unit change within one (agent, metric) and
// strings no SQL should ever see as text.
func fixedSamples() []sample {
	var out []sample
	add := func(tenant string, l labels, q string, at time.Time, v *float64) {
		out = append(out, sample{Tenant: tenant, L: l, Quality: q, T: at, V: v})
	}
	// A counter rising 15 every 30 s from 09:00: rate 0.5/s, with a
	// reset at 10:20:00 (to 0, then rising again).
	counter := labels{agentA, "boiler.energy", "boiler", "modbus", "kWh"}
	v := 0.0
	for i := range 240 {
		at := testStart.Add(-time.Hour).Add(time.Duration(i) * 30 * time.Second)
		if at.Equal(testStart.Add(20 * time.Minute)) {
			v = 0
		}
		add("tenant-fixed", counter, "good", at, fv(v))
		v += 15
	}
	// A gauge on agent B: 20 at even minutes, 30 at odd ones.
	gauge := labels{agentB, "boiler.temp", "boiler", "opcua", "°C"}
	for i := range 120 {
		at := testStart.Add(-time.Hour).Add(time.Duration(i) * time.Minute)
		add("tenant-fixed", gauge, "good", at, fv(float64(20+10*(i%2))))
	}
	// NULL device, protocol and unit; then the unit appears: two series.
	for i := range 60 {
		l := labels{agentC, "line.speed", "", "", ""}
		if i >= 30 {
			l[4] = "m/s"
		}
		add("tenant-fixed", l, "", testStart.Add(time.Duration(i)*time.Minute), fv(float64(i)))
	}
	// Names no SQL should ever see as text.
	for i, name := range []string{`weird'name"; DROP TABLE readings;--`, "ünïcödé.温度", "multi\nline", `back\slash`, "$1"} {
		l := labels{agentC, name, "odd", "mqtt", "%"}
		for j := range 10 {
			add("tenant-fixed", l, "good", testStart.Add(time.Duration(j)*time.Minute+time.Duration(i)*time.Second), fv(float64(i*10+j)))
		}
	}
	// BAD reads without value are never selected.
	add("tenant-fixed", counter, "bad", testStart.Add(5*time.Second), nil)
	return out
}

// integrationQueries are run on both engines and checked against refEval;
// byHand adds exact expectations for some.
var integrationQueries = []string{
	`readings{metric_name="boiler.energy"}`,
	`readings{metric_name=~"boiler.*", agent_uuid="` + agentB + `"}`,
	`readings{metric_name="weird'name\"; DROP TABLE readings;--"}`,
	`readings{metric_name=~"ünïcödé\\..*"}`,
	`readings{metric_name=~"multi.line"}`,
	`readings{metric_name=~"(?s)multi.line"}`,
	`readings{metric_name=~"back\\\\slash|\\$1"}`,
	`readings{device_name=""}`,
	`readings{unit!~"m/s|%|kWh|°C"}`,
	`readings{quality=""}`,
	`readings{agent_uuid=~"(?i)3F2B.*"}`,
	`rate(readings{metric_name="boiler.energy"}[5m])`,
	`avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`,
	`increase(readings{metric_name="boiler.energy"}[1m])`,
	`delta(readings{metric_name="boiler.energy"}[90s])`,
	`avg_over_time(readings{metric_name="boiler.temp"}[2m])`,
	`max_over_time(readings{metric_name="boiler.temp"}[1m])`,
	`min_over_time(readings{metric_name="boiler.temp"}[1m])`,
	`sum_over_time(readings{metric_name="line.speed"}[10m])`,
	`count_over_time(readings[10m])`,
	`last_over_time(readings{agent_uuid="` + agentC + `"}[3m])`,
	`sum by (unit) (count_over_time(readings{metric_name="line.speed"}[10m]))`,
	`count without (agent_uuid, metric_name, unit) (last_over_time(readings[5m]))`,
	`topk(2, max_over_time(readings{device_name="odd"}[5m]))`,
	`quantile(0.5, last_over_time(readings{device_name="odd"}[5m]))`,
	`stddev by (device_name) (avg_over_time(readings[5m]))`,
	`max(sum by (agent_uuid) (rate(readings[5m])))`,
}

// byHand are exact values for tenant-fixed over testStart..+30m step 5m.
var byHand = map[string][]Series{
	`rate(readings{metric_name="boiler.energy"}[5m])`: {{
		Labels: map[string]string{"agent_uuid": agentA, "metric_name": "boiler.energy", "device_name": "boiler", "protocol": "modbus", "unit": "kWh"},
		// 0.5/s throughout: the reset at 10:20 counts the new value, 0.
		Points: gridPoints(0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5),
	}},
	`avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`: {
		{Labels: map[string]string{"agent_uuid": agentA}, Points: gridPoints(0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5)},
		// The gauge alternates 20, 30: increases of 10 and "resets" to 20
		// over four minutes: (10+20+10+20) / 240 s.
		{Labels: map[string]string{"agent_uuid": agentB}, Points: gridPoints(0.25, 0.25, 0.25, 0.25, 0.25, 0.25, 0.25)},
	},
	`avg_over_time(readings{metric_name="boiler.temp"}[2m])`: {{
		Labels: map[string]string{"agent_uuid": agentB, "metric_name": "boiler.temp", "device_name": "boiler", "protocol": "opcua", "unit": "°C"},
		Points: gridPoints(25, 25, 25, 25, 25, 25, 25),
	}},
	`sum by (unit) (count_over_time(readings{metric_name="line.speed"}[10m]))`: {
		// line.speed starts at 10:00 with one sample a minute; from 10:30
		// it has a unit. At 10:00 the window [09:50, 10:00) is empty.
		{Labels: map[string]string{}, Points: []Point{
			{testStart.Add(5 * time.Minute), 5}, {testStart.Add(10 * time.Minute), 10}, {testStart.Add(15 * time.Minute), 10},
			{testStart.Add(20 * time.Minute), 10}, {testStart.Add(25 * time.Minute), 10}, {testStart.Add(30 * time.Minute), 10},
		}},
	},
}

func gridPoints(vs ...float64) []Point {
	ps := make([]Point, len(vs))
	for i, v := range vs {
		ps[i] = Point{T: testStart.Add(time.Duration(i) * 5 * time.Minute), V: v}
	}
	return ps
}

// TestQueryIntegration runs the same queries on SQLite and PostgreSQL
// over the same data and checks both against the reference evaluator, the
// hand-computed values, and each other.
func TestQueryIntegration(t *testing.T) {
	random := randomSamples(7)
	for i := range random {
		random[i].Tenant = map[string]string{testTenant: "tenant-random", "tenant-b": "tenant-other"}[random[i].Tenant]
	}
	samples := append(fixedSamples(), random...)

	type result struct {
		series []Series
		err    error
	}
	var mu sync.Mutex
	results := map[string]map[string]result{} // engine -> key -> result

	type run struct {
		key, src, tenant string
		rng              Range
	}
	var runs []run
	fixedRange := Range{Start: testStart, End: testStart.Add(30 * time.Minute), Step: 5 * time.Minute}
	for _, q := range integrationQueries {
		runs = append(runs, run{"fixed " + q, q, "tenant-fixed", fixedRange})
	}
	rng := rand.New(rand.NewPCG(11, 12))
	steps := []time.Duration{15 * time.Second, time.Minute, 5 * time.Minute}
	randomRuns := 120
	if raceEnabled {
		randomRuns = 25
	}
	for range randomRuns {
		src := randomQuery(rng)
		r := Range{Start: testStart.Add(time.Duration(rng.IntN(3600)) * time.Second), Step: steps[rng.IntN(len(steps))]}
		r.End = r.Start.Add(time.Duration(rng.IntN(7200)) * time.Second)
		runs = append(runs, run{"random " + src + " " + r.Start.Format(time.TimeOnly) + " " + r.End.Format(time.TimeOnly) + " " + r.Step.String(), src, "tenant-random", r})
	}

	t.Run("engines", func(t *testing.T) {
		for _, engine := range []string{"sqlite", "postgres"} {
			t.Run(engine, func(t *testing.T) {
				t.Parallel()
				d := integrationDB(t, engine)
				insertSamples(t, d, samples)
				got := map[string]result{}
				points, empty := 0, 0
				defer func() { t.Logf("%d queries, %d points checked, %d empty results", len(runs), points, empty) }()
				for _, r := range runs {
					p, err := Compile(r.src, r.tenant, r.rng, d.Dialect(), Limits{})
					if err != nil {
						t.Fatalf("%s: %v", r.key, err)
					}
					series, err := Run(t.Context(), d.ReadSQL(), p)
					if err != nil {
						t.Errorf("%s: %v", r.key, err)
						continue
					}
					got[r.key] = result{series, err}
					for _, s := range series {
						points += len(s.Points)
					}
					if len(series) == 0 {
						empty++
					}
					if err := sameSeries(series, refEval(p.Expr(), r.tenant, samples, r.rng)); err != nil {
						t.Errorf("%s: against the reference: %v", r.key, err)
					}
					if want, ok := byHand[r.src]; ok && r.tenant == "tenant-fixed" {
						if err := sameSeries(series, want); err != nil {
							t.Errorf("%s: against the values by hand: %v", r.key, err)
						}
					}
				}
				mu.Lock()
				results[engine] = got
				mu.Unlock()
			})
		}
	})
	if len(results) < 2 {
		return // an engine was skipped
	}
	exact, total := 0, 0
	for key, s := range results["sqlite"] {
		p := results["postgres"][key]
		total++
		if err := sameSeries(s.series, p.series); err != nil {
			t.Errorf("%s: SQLite and PostgreSQL differ: %v", key, err)
		} else if exactlyEqual(s.series, p.series) {
			exact++
		}
	}
	t.Logf("%d of %d queries gave bit-identical results on both engines; the rest agree to 1e-9", exact, total)
}

func exactlyEqual(a, b []Series) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if len(a[i].Points) != len(b[i].Points) {
			return false
		}
		for j := range a[i].Points {
			if a[i].Points[j] != b[i].Points[j] {
				return false
			}
		}
	}
	return true
}

// TestLimitsIntegration checks that each run-time cap stops a query with
// its LimitError, on both engines.
func TestLimitsIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			insertSamples(t, d, fixedSamples())
			r := Range{Start: testStart, End: testStart.Add(30 * time.Minute), Step: time.Minute}
			for _, tt := range []struct {
				src   string
				lim   Limits
				limit string
			}{
				{`readings`, Limits{MaxSeries: 3}, "max_series"},
				{`readings{metric_name="boiler.energy"}`, Limits{MaxPointsPerSeries: 10}, "max_points_per_series"},
				{`rate(readings[5m])`, Limits{MaxSeries: 2}, "max_series"},
				{`sum(rate(readings[5m]))`, Limits{MaxRows: 20}, "max_rows"},
				{`readings`, Limits{MaxRows: 20}, "max_rows"},
				{`sum by (metric_name) (rate(readings[5m]))`, Limits{MaxSeries: 2}, "max_series"},
			} {
				p, err := Compile(tt.src, "tenant-fixed", r, d.Dialect(), tt.lim)
				if err != nil {
					t.Fatal(err)
				}
				_, err = Run(t.Context(), d.ReadSQL(), p)
				var le *LimitError
				if !errors.As(err, &le) || le.Limit != tt.limit {
					t.Errorf("%s with %+v: %v, want a %s error", tt.src, tt.lim, err, tt.limit)
				}
			}
			// The same queries under the default limits run.
			p, err := Compile(`readings`, "tenant-fixed", r, d.Dialect(), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Run(t.Context(), d.ReadSQL(), p); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestTenantIsolationIntegration: a query only ever sees its tenant.
func TestTenantIsolationIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			l := labels{agentA, "m", "dev", "", ""}
			insertSamples(t, d, []sample{
				{Tenant: "t1", L: l, T: testStart, V: fv(1)},
				{Tenant: "t2", L: l, T: testStart.Add(time.Second), V: fv(2)},
				{Tenant: "t1' OR '1'='1", L: l, T: testStart.Add(2 * time.Second), V: fv(3)},
			})
			r := Range{Start: testStart, End: testStart.Add(time.Minute), Step: time.Minute}
			for tenant, want := range map[string]float64{"t1": 1, "t2": 2, "t1' OR '1'='1": 3} {
				p, err := Compile(`readings{metric_name=~".*"}`, tenant, r, d.Dialect(), Limits{})
				if err != nil {
					t.Fatal(err)
				}
				got, err := Run(t.Context(), d.ReadSQL(), p)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 1 || len(got[0].Points) != 1 || got[0].Points[0].V != want {
					t.Errorf("tenant %q sees %+v, want only its value %v", tenant, got, want)
				}
			}
			p, err := Compile(`readings`, "nobody", r, d.Dialect(), Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := Run(t.Context(), d.ReadSQL(), p); err != nil || len(got) != 0 {
				t.Errorf("unknown tenant sees %v, %v", got, err)
			}
		})
	}
}

// TestRegexPostgresIntegration: PostgreSQL's ~ with the translated pattern
// agrees with Go's RE2 on every pattern and subject of the regex tests.
func TestRegexPostgresIntegration(t *testing.T) {
	d := integrationDB(t, "postgres")
	ctx := t.Context()
	for _, pat := range regexPatterns {
		are, err := pgRegex(pat)
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		re := regexp.MustCompile(anchored(pat))
		rows, err := d.ReadSQL().QueryContext(ctx, `SELECT s, s ~ $1 FROM unnest($2::text[]) AS s`, are, regexSubjects)
		if err != nil {
			t.Fatalf("%q as %q: %v", pat, are, err)
		}
		n := 0
		for rows.Next() {
			var s string
			var got bool
			if err := rows.Scan(&s, &got); err != nil {
				t.Fatal(err)
			}
			n++
			if want := re.MatchString(s); got != want {
				t.Errorf("%q ~ %q (RE2 %q): PostgreSQL %v, RE2 %v", s, are, pat, got, want)
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		if n != len(regexSubjects) {
			t.Fatalf("%d rows, want %d", n, len(regexSubjects))
		}
	}
}
