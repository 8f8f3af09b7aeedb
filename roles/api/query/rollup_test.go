package query

import (
	"fmt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// rollupSamples are four days of a counter with resets and a gauge, every
// seven minutes, values in quarters (sums exact in binary), a device that
// changes half way (two series) and BAD reads without value.
func rollupSamples(start time.Time) []sample {
	var out []sample
	c := 0.0
	for i := range 4 * 24 * 60 / 7 {
		at := start.Add(time.Duration(i)*7*time.Minute + 13*time.Second)
		c += float64(i%9) * 0.25
		if i%97 == 96 {
			c = 0.5
		}
		dev := "meter"
		if i > 400 {
			dev = "meter-2"
		}
		out = append(out, sample{Tenant: "tenant-roll", L: labels{agentA, "energy", dev, "modbus", "kWh"}, Quality: "good", T: at, V: fv(c)})
		out = append(out, sample{Tenant: "tenant-roll", L: labels{agentB, "temp", "boiler", "opcua", "°C"}, Quality: "good", T: at.Add(time.Minute), V: fv(float64(i%23) * 0.75)})
		if i%13 == 0 {
			out = append(out, sample{Tenant: "tenant-roll", L: labels{agentB, "temp", "boiler", "opcua", "°C"}, Quality: "bad", T: at.Add(2 * time.Minute)})
		}
	}
	return out
}

// TestQueryOverRollupsIntegration: range functions whose buckets are
// whole hours or days read the rollups where they hold the range and raw
// readings elsewhere, and answer as over raw readings alone; the others
// keep reading raw readings.
func TestQueryOverRollupsIntegration(t *testing.T) {
	const day = 24 * time.Hour
	start := time.Date(2024, 5, 6, 0, 0, 0, 0, time.UTC)
	samples := rollupSamples(start)
	queries := []struct {
		src     string
		step    time.Duration
		rollups bool
	}{
		{`rate(readings[1h])`, time.Hour, true},
		{`increase(readings{metric_name="energy"}[1d])`, time.Hour, true},
		{`increase(readings{metric_name="energy"}[1d])`, day, true},
		{`delta(readings[2h])`, 2 * time.Hour, false}, // a counter in 2 h buckets: raw
		{`last_over_time(readings[1h])`, time.Hour, true},
		{`avg_over_time(readings[3h])`, time.Hour, true},
		{`max_over_time(readings{device_name=~"meter.*"}[2h])`, 2 * time.Hour, true},
		{`min_over_time(readings[1d])`, day, true},
		{`sum_over_time(readings{unit!="°C"}[6h])`, 3 * time.Hour, true},
		{`count_over_time(readings[1d])`, 6 * time.Hour, true},
		{`sum by (agent_uuid) (count_over_time(readings[1d]))`, day, true},
		{`avg_over_time(readings[90m])`, time.Hour, false},                // 30 min buckets
		{`avg_over_time(readings{quality="good"}[1h])`, time.Hour, false}, // rollups keep no quality
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			insertSamples(t, d, samples)
			rng := func(step time.Duration) Range {
				return Range{Start: start.Add(29*time.Hour + 17*time.Minute), End: start.Add(3*day + 20*time.Hour), Step: step}
			}
			raw := map[string][]Series{}
			for _, q := range queries {
				p, err := Compile(q.src, "tenant-roll", rng(q.step), d.Dialect(), Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if raw[q.src+q.step.String()], err = Run(t.Context(), d.ReadSQL(), p); err != nil {
					t.Fatal(err)
				}
			}
			now := start.Add(3*day + 5*time.Hour)
			w := rollup.New(d, rollup.Options{Now: func() time.Time { return now }})
			if _, err := w.Round(t.Context()); err != nil {
				t.Fatal(err)
			}
			c, err := rollup.Load(t.Context(), d.ReadSQL())
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range queries {
				name := fmt.Sprintf("%s step %s", q.src, q.step)
				p, err := Compile(q.src, "tenant-roll", rng(q.step), d.Dialect(), Limits{})
				if err != nil {
					t.Fatal(err)
				}
				if got := p.WithRollups(c).Rollups(); got != q.rollups {
					t.Errorf("%s: reads rollups %v, want %v", name, got, q.rollups)
				}
				got, err := Run(t.Context(), d.ReadSQL(), p)
				if err != nil {
					t.Errorf("%s: %v", name, err)
					continue
				}
				want := raw[q.src+q.step.String()]
				if len(want) == 0 {
					t.Errorf("%s: no series: the test reads nothing", name)
				}
				if err := sameSeries(got, want); err != nil {
					t.Errorf("%s: over rollups: %v", name, err)
				}
			}
		})
	}
}
