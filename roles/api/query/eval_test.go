package query

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var (
	agentA = "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f"
	agentB = "7c9e6679-7425-40de-944b-e07fc1f90ae7"
	agentC = "00000000-0000-4000-8000-00000000000c"
)

// randomSamples makes counters (with resets) and gauges for three agents
// over three hours from testStart, at irregular times, some samples
// without value, some of another tenant.
func randomSamples(seed uint64) []sample {
	rng := rand.New(rand.NewPCG(seed, 1))
	var out []sample
	for _, agent := range []string{agentA, agentB, agentC} {
		for _, m := range []struct{ dev, name, unit string }{{"boiler", "energy", "kWh"}, {"boiler", "temp", "°C"}, {"pump", "flow", ""}} {
			l := labels{agent, m.dev + "." + m.name, m.dev, "modbus", m.unit}
			t := testStart.Add(-30 * time.Minute).Add(time.Duration(rng.IntN(60)) * time.Second)
			v := 0.0
			for t.Before(testStart.Add(3 * time.Hour)) {
				if m.name == "energy" {
					v += float64(rng.IntN(100)) / 4
					if rng.IntN(50) == 0 {
						v = float64(rng.IntN(10))
					}
				} else {
					v = float64(rng.IntN(1000)) / 8
				}
				s := sample{Tenant: testTenant, L: l, Quality: "good", T: t, V: fv(v)}
				switch rng.IntN(20) {
				case 0:
					s.V, s.Quality = nil, "bad"
				case 1:
					s.Quality = "uncertain"
				case 2:
					s.Tenant = "tenant-b"
				}
				out = append(out, s)
				t = t.Add(time.Duration(5+rng.IntN(60)) * time.Second).Add(time.Duration(rng.IntN(1000)) * time.Millisecond)
			}
		}
	}
	return out
}

func randomQuery(rng *rand.Rand) string {
	fns := []Func{FuncRate, FuncIncrease, FuncDelta, FuncAvgOverTime, FuncMinOverTime, FuncMaxOverTime, FuncSumOverTime, FuncCntOverTime, FuncLastOver}
	ranges := []string{"15s", "30s", "1m", "90s", "5m", "7m", "1h"}
	sels := []string{
		`readings`,
		`readings{metric_name=~"boiler.*"}`,
		`readings{metric_name="boiler.energy"}`,
		`readings{quality!="uncertain"}`,
		`readings{agent_uuid!="` + agentB + `", unit=""}`,
		`readings{device_name!~"pump", agent_uuid=~"3f2b.*|7c9e.*"}`,
	}
	q := fmt.Sprintf("%s(%s[%s])", fns[rng.IntN(len(fns))], sels[rng.IntN(len(sels))], ranges[rng.IntN(len(ranges))])
	ops := []string{"sum", "avg", "min", "max", "count", "stddev", "stdvar", "topk", "bottomk", "quantile"}
	groupings := []string{"", "by (agent_uuid)", "by (device_name, unit)", "without (agent_uuid)", "without ()", "by (metric_name)"}
	for range rng.IntN(3) {
		op := ops[rng.IntN(len(ops))]
		param := ""
		switch op {
		case "topk", "bottomk":
			param = fmt.Sprintf("%d, ", 1+rng.IntN(3))
		case "quantile":
			param = fmt.Sprintf("%g, ", float64(rng.IntN(5))/4)
		}
		q = fmt.Sprintf("%s %s (%s%s)", op, groupings[rng.IntN(len(groupings))], param, q)
	}
	return q
}

// TestEvaluateMatchesReference feeds buckets made in Go through the
// window folds and aggregations and compares with the naive evaluator.
func TestEvaluateMatchesReference(t *testing.T) {
	samples := randomSamples(1)
	rng := rand.New(rand.NewPCG(2, 3))
	steps := []time.Duration{15 * time.Second, 30 * time.Second, time.Minute, 5 * time.Minute}
	points := 0
	for i := range 300 {
		src := randomQuery(rng)
		r := Range{
			Start: testStart.Add(time.Duration(rng.IntN(3600)) * time.Second),
			Step:  steps[rng.IntN(len(steps))],
		}
		r.End = r.Start.Add(time.Duration(rng.IntN(7200)) * time.Second)
		p, err := Compile(src, testTenant, r, sqliteD, Limits{})
		if err != nil {
			t.Fatalf("%d %s: %v", i, src, err)
		}
		var got []Series
		if p.points == 0 {
			got = []Series{}
		} else {
			got, err = p.evaluate(goBuckets(t, p, selectorOf(p.Expr()), samples))
			if err != nil {
				t.Fatalf("%d %s: %v", i, src, err)
			}
		}
		if err := sameSeries(got, refEval(p.Expr(), testTenant, samples, r)); err != nil {
			t.Fatalf("%d %s %s..%s step %s:\n%v", i, src, r.Start.Format(time.TimeOnly), r.End.Format(time.TimeOnly), r.Step, err)
		}
		for _, s := range got {
			points += len(s.Points)
		}
	}
	if points < 10000 {
		t.Errorf("only %d points compared: the random queries select too little", points)
	}
	t.Logf("%d points compared", points)
}

func selectorOf(e Expr) *Selector {
	switch e := e.(type) {
	case *Selector:
		return e
	case *Call:
		return e.Selector
	case *Aggregate:
		return selectorOf(e.Expr)
	}
	return nil
}

// TestRateByHand pins rate, increase and delta on a counter with a reset.
func TestRateByHand(t *testing.T) {
	l := labels{agentA, "m.c", "m", "", ""}
	at := func(sec int, v float64) sample {
		return sample{Tenant: testTenant, L: l, T: testStart.Add(time.Duration(sec) * time.Second), V: fv(v)}
	}
	// In [10:00, 10:01): 10 at :00, 40 at :20, reset to 5 at :40;
	// in [10:01, 10:02): 15 at :10 (after the bucket boundary).
	samples := []sample{at(0, 10), at(20, 40), at(40, 5), at(70, 15)}
	r := Range{Start: testStart.Add(time.Minute), End: testStart.Add(2 * time.Minute), Step: time.Minute}
	for _, tt := range []struct {
		src  string
		want []float64 // at 10:01, 10:02
	}{
		// 10:01 window [10:00, 10:01): increase 30 + 5 (reset) = 35 over 40 s.
		// 10:02 window [10:01, 10:02): one sample, no rate.
		{`rate(readings[1m])`, []float64{35.0 / 40}},
		{`increase(readings[1m])`, []float64{35}},
		{`delta(readings[1m])`, []float64{-5}},
		// 10:02 window [10:00, 10:02): 35 + 10 over 70 s.
		{`rate(readings[2m])`, []float64{35.0 / 40, 45.0 / 70}},
		{`increase(readings[2m])`, []float64{35, 45}},
		{`last_over_time(readings[1m])`, []float64{5, 15}},
		{`count_over_time(readings[2m])`, []float64{3, 4}},
		{`avg_over_time(readings[2m])`, []float64{55.0 / 3, 70.0 / 4}},
	} {
		p, err := Compile(tt.src, testTenant, r, sqliteD, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.evaluate(goBuckets(t, p, selectorOf(p.Expr()), samples))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 1 || len(got[0].Points) != len(tt.want) {
			t.Fatalf("%s: %+v", tt.src, got)
		}
		for i, w := range tt.want {
			if !closeTo(got[0].Points[i].V, w) {
				t.Errorf("%s point %d = %v, want %v", tt.src, i, got[0].Points[i].V, w)
			}
		}
	}
}

func TestAggregationSeriesLimit(t *testing.T) {
	samples := randomSamples(4)
	r := Range{Start: testStart, End: testStart.Add(time.Hour), Step: time.Minute}
	for _, tt := range []struct{ src, what string }{
		{`rate(readings[5m])`, "series more than 2"},
		{`sum by (metric_name, agent_uuid) (rate(readings[5m]))`, "series in the result of sum more than 2"},
		{`quantile by (metric_name) (0.5, rate(readings[5m]))`, "series in the result of quantile more than 2"},
		{`topk(3, rate(readings[5m]))`, "series in the result of topk more than 2"},
		{`max(sum by (metric_name, agent_uuid) (rate(readings[5m])))`, "series in the result of sum more than 2"},
	} {
		p, err := Compile(tt.src, testTenant, r, sqliteD, Limits{MaxSeries: 2})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.evaluate(goBuckets(t, p, selectorOf(p.Expr()), samples))
		var le *LimitError
		if !errors.As(err, &le) || le.Limit != "max_series" || le.Max != "2" {
			t.Errorf("%s: %v, want a max_series error", tt.src, err)
			continue
		}
		if want := tt.what + " exceeds the limit of 2 (max_series)"; len(err.Error()) < len(want) || err.Error()[:len(want)] != want {
			t.Errorf("%s: %q, want prefix %q", tt.src, err, want)
		}
	}
	// An aggregation may read more series than it returns.
	p, err := Compile(`sum(rate(readings[5m]))`, testTenant, r, sqliteD, Limits{MaxSeries: 2})
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.evaluate(goBuckets(t, p, selectorOf(p.Expr()), samples))
	if err != nil || len(got) != 1 {
		t.Errorf("sum over 9 series with max_series 2: %v, %v", got, err)
	}
}

func TestPointJSON(t *testing.T) {
	for _, v := range []float64{0, 0.5, -3, 1e300, 5e-324, math.NaN(), math.Inf(1), math.Inf(-1)} {
		p := Point{T: testStart.Add(1500 * time.Microsecond), V: v}
		b, err := json.Marshal(Series{Labels: map[string]string{"unit": "°C"}, Points: []Point{p}})
		if err != nil {
			t.Fatalf("%v: %v", v, err)
		}
		var s Series
		if err := json.Unmarshal(b, &s); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got := s.Points[0]
		if !got.T.Equal(p.T) || !(got.V == v || math.IsNaN(got.V) && math.IsNaN(v)) {
			t.Errorf("%s decodes to %+v, want %+v", b, got, p)
		}
	}
	b, _ := json.Marshal(Point{T: testStart, V: 0.25})
	if want := `{"t":"2024-03-10T10:00:00Z","v":0.25}`; string(b) != want {
		t.Errorf("got %s, want %s", b, want)
	}
}
