package rollup

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// sample is one reading a test writes.
type sample struct {
	t              time.Time
	agent, metric  string
	value          *float64
	device, tenant string
}

// key is a rollup row's key with its bucket.
type key struct {
	agent, metric, tenant, device string
	b                             time.Time
}

// stats is a rollup row's values.
type stats struct {
	n             int64
	sum, min, max float64
	ft, lt        time.Time
	fv, lv, inc   float64
}

const (
	agent1 = "0b5e4a1c-0000-4000-8000-000000000001"
	agent2 = "0b5e4a1c-0000-4000-8000-000000000002"
)

// testBase is midnight ten days ago: readings there are older than the
// late trigger's five minutes whatever the test's own clock says.
func testBase() time.Time { return time.Now().UTC().Truncate(day).Add(-10 * day) }

func ptr(v float64) *float64 { return &v }

// series writes a reading every step from `from` for n steps: a counter
// that grows by quarters and resets every 37 readings, so sums are exact
// in binary and increases cross resets.
func series(from time.Time, step time.Duration, n int, agent, metric, tenant string) []sample {
	var out []sample
	v := 0.0
	for i := range n {
		if i%37 == 36 {
			v = 0.25
		} else {
			v += float64(i%5) * 0.25
		}
		s := sample{t: from.Add(time.Duration(i) * step), agent: agent, metric: metric, value: ptr(v), tenant: tenant}
		if i%11 == 3 {
			s.value = nil // a BAD read
		}
		if i%200 > 150 {
			s.device = "plc-2" // a second series under the same agent and metric
		}
		out = append(out, s)
	}
	return out
}

func insert(t testing.TB, d *db.DB, rows []sample) {
	t.Helper()
	dl := d.Dialect()
	tx, err := d.SQL().BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		var v, dev, ten any
		if r.value != nil {
			v = *r.value
		}
		if r.device != "" {
			dev = r.device
		}
		if r.tenant != "" {
			ten = r.tenant
		}
		if _, err := tx.ExecContext(t.Context(), `INSERT INTO readings (time, agent_uuid, metric_name, value, device_name, tenant_id)
VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`, dl.TimeArg(r.t), r.agent, r.metric, v, dev, ten); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
}

// expect computes the rollup rows of rows in buckets of width w, as
// the worker must store them: by series, in time order.
func expect(rows []sample, w time.Duration) map[key]stats {
	sorted := slices.Clone(rows)
	slices.SortFunc(sorted, func(a, b sample) int { return a.t.Compare(b.t) })
	out := map[key]stats{}
	for _, r := range sorted {
		if r.value == nil || r.tenant == "" {
			continue
		}
		k := key{r.agent, r.metric, r.tenant, r.device, r.t.Truncate(w)}
		v := *r.value
		s, seen := out[k]
		if !seen {
			out[k] = stats{n: 1, sum: v, min: v, max: v, ft: r.t, lt: r.t, fv: v, lv: v}
			continue
		}
		s.n++
		s.sum += v
		s.min, s.max = math.Min(s.min, v), math.Max(s.max, v)
		if d := v - s.lv; d < 0 {
			s.inc += v
		} else {
			s.inc += d
		}
		s.lt, s.lv = r.t, v
		out[k] = s
	}
	return out
}

func stored(t testing.TB, d *db.DB, table string) map[key]stats {
	t.Helper()
	rows, err := d.SQL().QueryContext(t.Context(), `SELECT agent_uuid, metric_name, tenant_id, device_name, bucket,
  count, sum, min, max, first_time, last_time, first_value, last_value, increase FROM `+table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[key]stats{}
	for rows.Next() {
		var k key
		var s stats
		var b, ft, lt db.Timestamp
		if err := rows.Scan(&k.agent, &k.metric, &k.tenant, &k.device, &b, &s.n, &s.sum, &s.min, &s.max, &ft, &lt, &s.fv, &s.lv, &s.inc); err != nil {
			t.Fatal(err)
		}
		k.b, s.ft, s.lt = b.Time, ft.Time, lt.Time
		out[k] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// same reports the first difference between got and want.
func same(got, want map[key]stats) error {
	keys := slices.SortedFunc(maps.Keys(want), func(a, b key) int {
		return cmp.Or(cmp.Compare(a.agent, b.agent), cmp.Compare(a.metric, b.metric), cmp.Compare(a.device, b.device), a.b.Compare(b.b))
	})
	for _, k := range keys {
		g, ok := got[k]
		if !ok {
			return fmt.Errorf("missing %+v", k)
		}
		w := want[k]
		if !g.ft.Equal(w.ft) || !g.lt.Equal(w.lt) {
			return fmt.Errorf("%+v: times %v..%v, want %v..%v", k, g.ft, g.lt, w.ft, w.lt)
		}
		g.ft, g.lt, w.ft, w.lt = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if g != w {
			return fmt.Errorf("%+v: %+v, want %+v", k, g, w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			return fmt.Errorf("unexpected %+v", k)
		}
	}
	return nil
}

// within keeps the rows in [from, to).
func within(rows []sample, from, to time.Time) []sample {
	var out []sample
	for _, r := range rows {
		if !r.t.Before(from) && r.t.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

func newWorker(d *db.DB, now time.Time, o Options) *Worker {
	o.Now = func() time.Time { return now }
	return New(d, o)
}

func mustRound(t testing.TB, w *Worker) {
	t.Helper()
	ran, err := w.Round(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("round skipped: lock held")
	}
}

var engines = []string{"postgres", "sqlite"}

// TestRollupMatchesRawIntegration: hourly and daily rows equal what the
// samples give, a reading arriving late for a rolled-up hour is reflected
// at the next round, as is a backfill older than everything rolled up,
// and hours not settled yet are left to raw reads.
func TestRollupMatchesRawIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			d := dbtest.Migrated(t, engine)
			base := testBase()
			var rows []sample
			rows = append(rows, series(base.Add(2*day), 7*time.Minute, 600, agent1, "flow", "tenant-a")...)
			rows = append(rows, series(base.Add(2*day+13*time.Second), 11*time.Minute, 400, agent1, "temp", "tenant-a")...)
			rows = append(rows, series(base.Add(2*day+5*time.Second), 9*time.Minute, 500, agent2, "flow", "tenant-b")...)
			// No tenant: no endpoint reads it, so no rollup keeps it.
			rows = append(rows, series(base.Add(2*day), time.Hour, 30, agent2, "orphan", "")...)
			insert(t, d, rows)
			now := base.Add(5*day + 30*time.Minute)
			w := newWorker(d, now, Options{})
			mustRound(t, w)

			hourEnd := now.Add(-Settle).Truncate(time.Hour)
			if err := same(stored(t, d, Hourly), expect(within(rows, base, hourEnd), time.Hour)); err != nil {
				t.Fatalf("hourly: %v", err)
			}
			if err := same(stored(t, d, Daily), expect(within(rows, base, hourEnd.Truncate(day)), day)); err != nil {
				t.Fatalf("daily: %v", err)
			}
			c, err := Load(t.Context(), d.SQL())
			if err != nil {
				t.Fatal(err)
			}
			if want := (Window{From: base.Add(2 * day), To: hourEnd}); c.Hourly != want {
				t.Errorf("hourly coverage %+v, want %+v", c.Hourly, want)
			}
			if want := (Window{From: base.Add(2 * day), To: hourEnd.Truncate(day)}); c.Daily != want {
				t.Errorf("daily coverage %+v, want %+v", c.Daily, want)
			}

			// Late readings: into a rolled-up hour (between two samples,
			// and a counter reset), and a backfill a day before the start.
			late := []sample{
				{t: base.Add(2*day + 3*time.Hour + 30*time.Second), agent: agent1, metric: "flow", value: ptr(-2.5), tenant: "tenant-a"},
				{t: base.Add(2*day + 3*time.Hour + 59*time.Minute), agent: agent1, metric: "flow", value: ptr(1000), tenant: "tenant-a"},
				{t: base.Add(day + 5*time.Hour), agent: agent2, metric: "flow", value: ptr(4.75), tenant: "tenant-b"},
				{t: base.Add(day + 5*time.Hour + time.Minute), agent: agent2, metric: "new", value: ptr(1), tenant: "tenant-b"},
			}
			insert(t, d, late)
			rows = append(rows, late...)
			mustRound(t, w)
			if err := same(stored(t, d, Hourly), expect(within(rows, base, hourEnd), time.Hour)); err != nil {
				t.Fatalf("hourly after late readings: %v", err)
			}
			if err := same(stored(t, d, Daily), expect(within(rows, base, hourEnd.Truncate(day)), day)); err != nil {
				t.Fatalf("daily after late readings: %v", err)
			}
			if c, _ := Load(t.Context(), d.SQL()); !c.Hourly.From.Equal(base.Add(day+5*time.Hour)) || !c.Daily.From.Equal(base.Add(day)) {
				t.Errorf("coverage after a backfill %+v, want hourly from %v, daily from %v", c, base.Add(day+5*time.Hour), base.Add(day))
			}

			// Time goes on: the next hours and days are rolled up.
			now2 := now.Add(2 * day)
			mustRound(t, newWorker(d, now2, Options{}))
			end2 := now2.Add(-Settle).Truncate(time.Hour)
			if err := same(stored(t, d, Hourly), expect(within(rows, base, end2), time.Hour)); err != nil {
				t.Fatalf("hourly two days later: %v", err)
			}
		})
	}
}

// TestReplicasTakeTurnsIntegration: a round finds the lock another
// replica holds and does nothing; replicas running rounds at once leave
// each bucket counted once.
func TestReplicasTakeTurnsIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "postgres")
	base := testBase()
	rows := series(base.Add(2*day), 3*time.Minute, 1500, agent1, "flow", "tenant-a")
	insert(t, d, rows)
	now := base.Add(6 * day)

	conn, err := d.SQL().Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(t.Context(), "SELECT pg_advisory_lock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	w := newWorker(d, now, Options{Registerer: reg})
	if ran, err := w.Round(t.Context()); err != nil || ran {
		t.Fatalf("round with the lock held elsewhere = %v, %v; want skipped", ran, err)
	}
	if _, err := conn.ExecContext(t.Context(), "SELECT pg_advisory_unlock($1)", lockKey); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for i := range 4 {
		wg.Go(func() {
			w := newWorker(d, now.Add(time.Duration(i)*time.Hour), Options{})
			for range 3 {
				if _, err := w.Round(context.Background()); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Which replica won which round varies: compare what the coverage
	// says is done, then once more after a last round.
	for _, last := range []bool{false, true} {
		if last {
			mustRound(t, newWorker(d, now.Add(3*time.Hour), Options{}))
		}
		c, err := Load(t.Context(), d.SQL())
		if err != nil {
			t.Fatal(err)
		}
		if err := same(stored(t, d, Hourly), expect(within(rows, base, c.Hourly.To), time.Hour)); err != nil {
			t.Fatalf("hourly after concurrent rounds: %v", err)
		}
		if err := same(stored(t, d, Daily), expect(within(rows, base, c.Daily.To), day)); err != nil {
			t.Fatalf("daily after concurrent rounds: %v", err)
		}
	}
}

// TestRollupRetentionSettings: api.rollup_hourly_retention and
// api.rollup_daily_retention delete rollups past their age, hours only
// once their day is rolled up, and move the coverage's start with them;
// 0 keeps everything.
func TestRollupRetentionSettings(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			def, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
			if err != nil {
				t.Fatal(err)
			}
			if o := OptionsFrom(def.API); o.HourlyRetention != DefaultHourlyRetention || o.DailyRetention != DefaultDailyRetention {
				t.Fatalf("defaults: api.rollup_hourly_retention %s, api.rollup_daily_retention %s; want %s, %s",
					o.HourlyRetention, o.DailyRetention, DefaultHourlyRetention, time.Duration(DefaultDailyRetention))
			}
			d := dbtest.Migrated(t, engine)
			base := testBase()
			rows := series(base, 10*time.Minute, 9*24*6, agent1, "flow", "tenant-a")
			insert(t, d, rows)
			now := base.Add(9*day + time.Hour)
			mustRound(t, newWorker(d, now, OptionsFrom(def.API)))
			c0, _ := Load(t.Context(), d.SQL())
			if !c0.Hourly.From.Equal(base) || !c0.Daily.From.Equal(base) {
				t.Fatalf("no retention: coverage %+v, want both from %v", c0, base)
			}
			cfg := def.API
			cfg.RollupHourlyRetention, cfg.RollupDailyRetention = 3*day, 5*day
			mustRound(t, newWorker(d, now, OptionsFrom(cfg)))
			c, err := Load(t.Context(), d.SQL())
			if err != nil {
				t.Fatal(err)
			}
			hcut, dcut := ceilTo(now.Add(-3*day), time.Hour), ceilTo(now.Add(-5*day), day)
			if !c.Hourly.From.Equal(hcut) || !c.Daily.From.Equal(dcut) {
				t.Errorf("coverage %+v, want hourly from %v, daily from %v", c, hcut, dcut)
			}
			if err := same(stored(t, d, Hourly), expect(within(rows, hcut, c.Hourly.To), time.Hour)); err != nil {
				t.Errorf("hourly after retention: %v", err)
			}
			if err := same(stored(t, d, Daily), expect(within(rows, dcut, c.Daily.To), day)); err != nil {
				t.Errorf("daily after retention: %v", err)
			}
		})
	}
}
