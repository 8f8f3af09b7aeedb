package detect

import (
	"encoding/csv"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the recorded series in testdata")

type point struct {
	at    time.Time
	value float64
	label bool
}

// seriesStart is a Monday midnight UTC, so the hour slots line up with
// the generated daily cycle.
var seriesStart = time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)

// recorded lists the generated series: name, generator. Each series is one
// reading a minute; labelled points are the anomalies the detector must
// find.
var recorded = []struct {
	name string
	gen  func(r *rand.Rand) []point
}{
	{"steady_spikes", genSteadySpikes},
	{"daily_cycle", genDailyCycle},
	{"drift_step", genDriftStep},
	{"constant_step", genConstantStep},
	{"counter", genCounter},
}

func minutes(n int, f func(i int, at time.Time) (float64, bool)) []point {
	out := make([]point, n)
	for i := range out {
		at := seriesStart.Add(time.Duration(i) * time.Minute)
		v, l := f(i, at)
		out[i] = point{at: at, value: v, label: l}
	}
	return out
}

// spikeAt returns n distinct indexes in [lo, hi), at least 30 apart.
func spikeAt(r *rand.Rand, n, lo, hi int) map[int]bool {
	out := map[int]bool{}
	for len(out) < n {
		i := lo + r.IntN(hi-lo)
		ok := true
		for j := range out {
			if i-j < 30 && j-i < 30 {
				ok = false
			}
		}
		if ok {
			out[i] = true
		}
	}
	return out
}

// genSteadySpikes: 50 ± N(0,1) for two days, 12 spikes of 6 to 12σ either way.
func genSteadySpikes(r *rand.Rand) []point {
	spikes := spikeAt(r, 12, 100, 2880)
	return minutes(2880, func(i int, _ time.Time) (float64, bool) {
		v := 50 + r.NormFloat64()
		if spikes[i] {
			mag := 6 + 6*r.Float64()
			if r.IntN(2) == 0 {
				mag = -mag
			}
			return v + mag, true
		}
		return v, false
	})
}

// genDailyCycle: 20 + 10·sin(2π·hour/24) ± N(0,0.5) for three days; on
// days two and three, 8 readings take the value of the opposite hour
// (12 h away). Those values are inside the signal's daily range, so only
// an hour-of-day baseline sees them.
func genDailyCycle(r *rand.Rand) []point {
	cycle := func(at time.Time) float64 {
		h := float64(at.Hour()) + float64(at.Minute())/60
		return 20 + 10*math.Sin(2*math.Pi*h/24)
	}
	off := map[int]bool{}
	for len(off) < 8 {
		i := 1440 + r.IntN(2880)
		at := seriesStart.Add(time.Duration(i) * time.Minute)
		// Only hours where the opposite value is far (≥ 6) from this one.
		if math.Abs(cycle(at)-cycle(at.Add(12*time.Hour))) >= 6 && !off[i-1] && !off[i+1] {
			off[i] = true
		}
	}
	return minutes(4320, func(i int, at time.Time) (float64, bool) {
		if off[i] {
			return cycle(at.Add(12*time.Hour)) + 0.5*r.NormFloat64(), true
		}
		return cycle(at) + 0.5*r.NormFloat64(), false
	})
}

// genDriftStep: 30 drifting up 1 a day ± N(0,1) for two days, a lasting
// step of +8 at reading 2000 (the step itself is the labelled anomaly).
func genDriftStep(r *rand.Rand) []point {
	return minutes(2880, func(i int, _ time.Time) (float64, bool) {
		v := 30 + float64(i)/1440 + r.NormFloat64()
		if i >= 2000 {
			v += 8
		}
		return v, i == 2000
	})
}

// genConstantStep: 5 for 900 readings, then 7 for good.
func genConstantStep(*rand.Rand) []point {
	return minutes(1440, func(i int, _ time.Time) (float64, bool) {
		if i >= 900 {
			return 7, i == 900
		}
		return 5, false
	})
}

// genCounter: a counter growing by round(10 ± 2) a minute for two days,
// with 4 bursts of +60 in one minute and one reset to 0.
func genCounter(r *rand.Rand) []point {
	bursts := spikeAt(r, 5, 100, 2880)
	reset := -1
	for i := range bursts {
		reset = max(reset, i) // the last burst slot becomes the reset
	}
	c := 1000.0
	return minutes(2880, func(i int, _ time.Time) (float64, bool) {
		inc := math.Max(0, math.Round(10+2*r.NormFloat64()))
		switch {
		case i == reset:
			c = inc
			return c, true
		case bursts[i]:
			c += inc + 60
			return c, true
		}
		c += inc
		return c, false
	})
}

func csvPath(name string) string { return filepath.Join("testdata", name+".csv") }

// TestGenerateSeries rewrites testdata/*.csv with -update; without it, it
// checks that the committed files are what the generators produce.
func TestGenerateSeries(t *testing.T) {
	for k, rec := range recorded {
		pts := rec.gen(rand.New(rand.NewPCG(uint64(k+1), 0x5eed)))
		if *update {
			if err := writeSeries(csvPath(rec.name), pts); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := readSeries(csvPath(rec.name))
		if err != nil {
			t.Fatalf("%v (regenerate: go test ./roles/agent/anomaly/detect -run TestGenerateSeries -update)", err)
		}
		if len(got) != len(pts) {
			t.Fatalf("%s: %d points recorded, generator makes %d", rec.name, len(got), len(pts))
		}
		for i := range pts {
			if !got[i].at.Equal(pts[i].at) || got[i].value != pts[i].value || got[i].label != pts[i].label {
				t.Fatalf("%s line %d: recorded %+v, generator makes %+v", rec.name, i+2, got[i], pts[i])
			}
		}
	}
}

func writeSeries(path string, pts []point) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"timestamp", "value", "label"})
	for _, p := range pts {
		l := "0"
		if p.label {
			l = "1"
		}
		_ = w.Write([]string{p.at.Format(time.RFC3339), strconv.FormatFloat(p.value, 'g', -1, 64), l})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

func readSeries(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(rows) == 0 || rows[0][0] != "timestamp" {
		return nil, fmt.Errorf("%s: missing header timestamp,value,label", path)
	}
	out := make([]point, 0, len(rows)-1)
	for i, row := range rows[1:] {
		at, err := time.Parse(time.RFC3339, row[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+2, err)
		}
		v, err := strconv.ParseFloat(row[1], 64)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", path, i+2, err)
		}
		out = append(out, point{at: at, value: v, label: row[2] == "1"})
	}
	return out, nil
}

// eventScores compares flags with labels event by event: a run of
// consecutive labelled points is one anomaly, detected when any of its
// points is flagged; a run of consecutive flagged points is one alert
// event, correct when it starts on a labelled point. A lasting step is one
// event however many readings alert before the step becomes the new
// normal.
func eventScores(labels, flags []bool) (tp, alertEvents, found, anomalies int) {
	for i := range labels {
		if labels[i] && (i == 0 || !labels[i-1]) {
			anomalies++
			for j := i; j < len(labels) && labels[j]; j++ {
				if flags[j] {
					found++
					break
				}
			}
		}
		if flags[i] && (i == 0 || !flags[i-1]) {
			alertEvents++
			if labels[i] {
				tp++
			}
		}
	}
	return tp, alertEvents, found, anomalies
}

func TestRecordedSeries(t *testing.T) {
	floors := map[string]struct{ precision, recall float64 }{
		"steady_spikes": {0.9, 1},
		"daily_cycle":   {0.8, 1},
		"drift_step":    {0.5, 1},
		"constant_step": {1, 1},
		"counter":       {0.8, 1},
	}
	var sumTP, sumAlerts, sumFound, sumAnoms int
	for _, rec := range recorded {
		pts, err := readSeries(csvPath(rec.name))
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(Config{Enabled: true})
		if err != nil {
			t.Fatal(err)
		}
		labels := make([]bool, len(pts))
		flags := make([]bool, len(pts))
		for i, p := range pts {
			labels[i] = p.label
			rs := d.Observe([]Observation{{Metric: rec.name, Device: "dev", Value: p.value, At: p.at}})
			flags[i] = len(rs) == 1 && rs[0].Alert != nil
		}
		tp, alerts, found, anoms := eventScores(labels, flags)
		precision, recall := ratio(tp, alerts), ratio(found, anoms)
		t.Logf("%-14s precision %.3f (%d/%d alert events)  recall %.3f (%d/%d anomalies)",
			rec.name, precision, tp, alerts, recall, found, anoms)
		if f := floors[rec.name]; precision < f.precision || recall < f.recall {
			t.Errorf("%s: precision %.3f recall %.3f, want at least %.2f and %.2f", rec.name, precision, recall, f.precision, f.recall)
		}
		sumTP, sumAlerts, sumFound, sumAnoms = sumTP+tp, sumAlerts+alerts, sumFound+found, sumAnoms+anoms
	}
	precision, recall := ratio(sumTP, sumAlerts), ratio(sumFound, sumAnoms)
	t.Logf("%-14s precision %.3f  recall %.3f", "overall", precision, recall)
	if precision < 0.85 || recall < 0.95 {
		t.Errorf("overall precision %.3f recall %.3f, want at least 0.85 and 0.95", precision, recall)
	}
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 1
	}
	return float64(a) / float64(b)
}
