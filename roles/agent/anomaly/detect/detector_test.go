package detect

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newDetector(t testing.TB, cfg Config) *Detector {
	t.Helper()
	cfg.Enabled = true
	d, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// feed observes one reading per batch, a second apart from start, and
// returns the results of the last one.
func feed(d *Detector, metric string, start time.Time, vals ...float64) []Result {
	var rs []Result
	for i, v := range vals {
		rs = d.Observe([]Observation{{Metric: metric, Device: "plc1", Value: v, At: start.Add(time.Duration(i) * time.Second)}})
	}
	return rs
}

func repeat(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestWarmup(t *testing.T) {
	d := newDetector(t, Config{})
	for i := range WarmupBatches {
		// A wild value during the warm-up neither alerts nor enriches.
		v := 10.0
		if i == 5 {
			v = 1e6
		}
		if rs := feed(d, "temp", t0.Add(time.Duration(i)*time.Second), v); rs != nil {
			t.Fatalf("batch %d of the warm-up returned %+v, want no enrichment", i+1, rs)
		}
	}
	rs := feed(d, "temp", t0.Add(time.Hour), 10)
	if len(rs) != 1 {
		t.Fatalf("batch %d returned %d results, want 1", WarmupBatches+1, len(rs))
	}
	if rs[0].BaselineSamples != WarmupBatches || rs[0].AnomalyThreshold != 0.5 || rs[0].Trend == "" {
		t.Errorf("first enriched result %+v, want %d baseline samples, threshold 0.5 and a trend", rs[0], WarmupBatches)
	}
	if _, n := d.Alerts(AlertFilter{}); n != 0 {
		t.Errorf("%d alerts after the warm-up, want 0", n)
	}
	// Several readings of one series in one batch count as one batch.
	d2 := newDetector(t, Config{})
	batch := []Observation{{Metric: "m", Value: 1, At: t0}, {Metric: "m", Value: 1, At: t0}}
	for range WarmupBatches {
		if rs := d2.Observe(batch); rs != nil {
			t.Fatal("a batch of two readings counted as two batches of the warm-up")
		}
	}
}

// TestSteadySeriesNeverAlert: series whose changes stay within their
// resolution or the relative floor never alert.
func TestSteadySeriesNeverAlert(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	tests := []struct {
		name string
		gen  func(i int) float64
	}{
		{"constant", func(int) float64 { return 42 }},
		{"constant zero", func(int) float64 { return 0 }},
		// The register flickers from its first readings on, so its
		// resolution is known (a constant register's first change alerts:
		// TestStepAlertsCritical).
		{"integer register flickering one step", func(i int) float64 {
			if i == 1 || r.IntN(20) == 0 {
				return 101
			}
			return 100
		}},
		{"float32 jitter", func(int) float64 { return float64(float32(3.3) + float32(r.IntN(3)-1)*2.4e-7) }},
		{"scaled register flickering", func(i int) float64 { return 12.5 + 0.1*float64(r.IntN(2)) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{})
			for i := range 5000 {
				v := tt.gen(i)
				rs := d.Observe([]Observation{{Metric: "m", Value: v, At: t0.Add(time.Duration(i) * time.Second)}})
				if len(rs) == 1 && rs[0].Alert != nil {
					t.Fatalf("reading %d (%v) alerted: %+v", i, v, rs[0])
				}
			}
			if st := d.Stats(); st.Stats.TotalAnomalies != 0 || st.Stats.TotalDataPoints != 5000 {
				t.Errorf("stats %+v, want 5000 points and no anomaly", st.Stats)
			}
		})
	}
}

// TestGaussianFalseAlarmRate: on white Gaussian noise a 4σ threshold is
// passed by 6.3e-5 of the readings per method; the level methods flag
// nearly the same readings and the rate method others, so 1.4 to 2e-4 of
// the readings alert (measured over 200000 readings per window size),
// whatever the window, thanks to the small-sample correction. 50000
// readings expect 7 to 10; 20 would be a defect (at window 10, with the
// biweight's asymptotic 0.87·(n-1) degrees of freedom, there were 60).
func TestGaussianFalseAlarmRate(t *testing.T) {
	for _, window := range []int{MinWindowSize, DefaultWindowSize} {
		r := rand.New(rand.NewPCG(21, uint64(window)))
		d := newDetector(t, Config{Metrics: []MetricConfig{{Name: "m", WindowSize: window}}})
		alerts := 0
		for i := range 50000 {
			rs := d.Observe([]Observation{{Metric: "m", Value: 230 + 0.05*r.NormFloat64(), At: t0.Add(time.Duration(i) * time.Second)}})
			if len(rs) == 1 && rs[0].Alert != nil {
				alerts++
			}
		}
		if alerts > 20 {
			t.Errorf("window %d: %d alerts in 50000 readings of Gaussian noise, want 7 to 10", window, alerts)
		}
	}
}

func TestStepAlertsCritical(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	noisy := make([]float64, 600)
	for i := range noisy {
		noisy[i] = 50 + 2*r.NormFloat64()
	}
	tests := []struct {
		name    string
		history []float64
		step    float64
	}{
		{"10 sigma on gaussian noise", noisy, 50 + 20},
		{"10 sigma down on gaussian noise", noisy, 50 - 20},
		{"constant register 5 to 7", repeat(5, 600), 7},
		{"constant register 5 to 5.01", repeat(5, 600), 5.01},
		{"constant zero to 1", repeat(0, 600), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{})
			feed(d, "p", t0, tt.history...)
			after := t0.Add(time.Duration(len(tt.history)) * time.Second)
			var got *Result
			for i := range 2 {
				rs := feed(d, "p", after.Add(time.Duration(i)*time.Second), tt.step+0.1*float64(i))
				if rs[0].Alert != nil {
					got = &rs[0]
					break
				}
			}
			if got == nil {
				t.Fatal("no alert on the first two readings after the step")
			}
			if got.Alert.Severity != SeverityCritical {
				t.Errorf("severity %s, want critical", got.Alert.Severity)
			}
			if !(got.AnomalyScore > got.AnomalyThreshold && got.AnomalyScore <= 1) {
				t.Errorf("anomaly_score %v, want in (anomaly_threshold %v, 1]", got.AnomalyScore, got.AnomalyThreshold)
			}
			if got.Alert.AnomalyScore != got.AnomalyScore || got.Alert.Threshold != got.AnomalyThreshold || got.Alert.ID == "" {
				t.Errorf("alert %+v does not match its result", got.Alert)
			}
		})
	}
}

func TestSeverityMapping(t *testing.T) {
	tests := []struct {
		strongest, threshold float64
		want                 string
	}{
		{4.01, 4, SeverityInfo},
		{4.99, 4, SeverityInfo},
		{5, 4, SeverityWarning},
		{5.99, 4, SeverityWarning},
		{6, 4, SeverityCritical},
		{math.Inf(1), 4, SeverityCritical},
		{3.5, 3, SeverityInfo},
		{4.5, 3, SeverityCritical},
		{7, 5, SeverityWarning},
	}
	for _, tt := range tests {
		if got := severityOf(tt.strongest, tt.threshold); got != tt.want {
			t.Errorf("severityOf(%v, %v) = %s, want %s", tt.strongest, tt.threshold, got, tt.want)
		}
	}
}

func TestSensitivityThresholds(t *testing.T) {
	tests := []struct {
		cfg    Config
		metric string
		sigma  float64
		score  float64
	}{
		{Config{}, "m", 4, 0.5},
		{Config{Sensitivity: SensitivityLow}, "m", 5, 5.0 / 9},
		{Config{Sensitivity: SensitivityHigh}, "m", 3, 3.0 / 7},
		{Config{Metrics: []MetricConfig{{Name: "m", Sensitivity: SensitivityHigh}}}, "m", 3, 3.0 / 7},
		{Config{Metrics: []MetricConfig{{Name: "m", Sensitivity: SensitivityHigh, Threshold: 8}}}, "m", 8, 8.0 / 12},
		{Config{Metrics: []MetricConfig{{Name: "other", Threshold: 8}}}, "m", 4, 0.5},
	}
	for _, tt := range tests {
		d := newDetector(t, tt.cfg)
		tu := d.cfg.tuningFor(tt.metric, d.byName)
		if tu.sigma != tt.sigma {
			t.Errorf("%+v: threshold %vσ, want %vσ", tt.cfg, tu.sigma, tt.sigma)
		}
		rs := feed(d, tt.metric, t0, repeat(1, WarmupBatches+1)...)
		if math.Abs(rs[0].AnomalyThreshold-tt.score) > 1e-12 {
			t.Errorf("%+v: anomaly_threshold %v, want %v", tt.cfg, rs[0].AnomalyThreshold, tt.score)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		cfg  Config
		want string
	}{
		{Config{Sensitivity: "extreme"}, "sensitivity"},
		{Config{MaxTracked: -1}, "maxTracked"},
		{Config{MaxAlerts: -1}, "maxAlerts"},
		{Config{Metrics: []MetricConfig{{}}}, "metrics[0].name"},
		{Config{Metrics: []MetricConfig{{Name: "a"}, {Name: "a"}}}, "metrics[1].name"},
		{Config{Metrics: []MetricConfig{{Name: "a", Threshold: 0.5}}}, "metrics[0].threshold"},
		{Config{Metrics: []MetricConfig{{Name: "a", WindowSize: 5}}}, "metrics[0].windowSize"},
		{Config{Metrics: []MetricConfig{{Name: "a", Sensitivity: "x"}}}, "metrics[0].sensitivity"},
	}
	for _, tt := range tests {
		_, err := New(tt.cfg)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error naming %s", tt.cfg, err, tt.want)
		}
	}
}

func TestBaselinesRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	d := newDetector(t, Config{})
	// Two hours of a reading a minute: slots 10 and 11.
	for i := range 120 {
		d.Observe([]Observation{{Metric: "flow", Device: "plc1", Value: 20 + r.NormFloat64(), At: t0.Add(time.Duration(i) * time.Minute)}})
	}
	bs := d.Baselines()
	if len(bs) != 2 {
		t.Fatalf("%d baselines, want the two hour slots: %+v", len(bs), bs)
	}
	for _, b := range bs {
		if b.Metric != "flow" || b.DeviceID != "plc1" || (b.TimeSlot != 10 && b.TimeSlot != 11) || b.SampleCount != 60 ||
			math.Abs(b.Mean-20) > 0.5 || math.Abs(b.Median-20) > 0.5 || math.Abs(b.StdDev-1) > 0.4 || math.Abs(b.MAD-0.6745) > 0.45 ||
			b.CalculatedAt.IsZero() {
			t.Errorf("baseline %+v, want slot 10 or 11 of 60 samples around 20 ± 1", b)
		}
	}

	d2 := newDetector(t, Config{})
	if err := d2.Restore(bs); err != nil {
		t.Fatal(err)
	}
	again := d2.Baselines()
	if len(again) != 2 {
		t.Fatalf("restored detector exports %d baselines, want 2", len(again))
	}
	for _, b := range again {
		var orig Baseline
		for _, o := range bs {
			if o.TimeSlot == b.TimeSlot {
				orig = o
			}
		}
		if b != orig {
			t.Errorf("restored baseline %+v, want %+v", b, orig)
		}
	}
	// No warm-up: the first reading after the restore is enriched, against
	// the restored slot, and a spike alerts.
	rs := feed(d2, "flow", t0.Add(24*time.Hour+10*time.Minute), 20.5)
	if len(rs) != 1 || rs[0].BaselineSamples != 60 || rs[0].Alert != nil {
		t.Fatalf("first reading after restore gave %+v, want an enriched result on 60 samples", rs)
	}
	rs = feed(d2, "flow", t0.Add(24*time.Hour+11*time.Minute), 40)
	if rs[0].Alert == nil {
		t.Errorf("a 20σ spike after restore did not alert: %+v", rs[0])
	}
	// An hour without a restored slot is scored against the pooled
	// restored slots, not against the few readings taken since.
	d3 := newDetector(t, Config{})
	if err := d3.Restore(bs); err != nil {
		t.Fatal(err)
	}
	rs = feed(d3, "flow", t0.Add(5*time.Hour), 20.3, 19.6, 40)
	if len(rs) != 1 || rs[0].BaselineSamples != 120 || rs[0].Alert == nil {
		t.Errorf("a spike in an hour with no restored slot gave %+v, want an alert against the 120 pooled samples", rs)
	}
	for _, b := range d2.Baselines() {
		if b.TimeSlot == 10 && b.SampleCount != 61 {
			t.Errorf("slot 10 sample_count %d after one more reading, want 61", b.SampleCount)
		}
	}
}

func TestRestoreRefusesInvalid(t *testing.T) {
	good := Baseline{Metric: "m", TimeSlot: 3, Mean: 1, StdDev: 1, Median: 1, MAD: 1, SampleCount: 30}
	tests := []struct {
		mod  func(b *Baseline)
		want string
	}{
		{func(b *Baseline) { b.Metric = "" }, "metric"},
		{func(b *Baseline) { b.TimeSlot = 24 }, "time_slot"},
		{func(b *Baseline) { b.SampleCount = -1 }, "sample_count"},
		{func(b *Baseline) { b.Mean = math.NaN() }, "mean"},
		{func(b *Baseline) { b.MAD = math.Inf(1) }, "mad"},
		{func(b *Baseline) { b.StdDev = -1 }, "std_dev"},
	}
	for _, tt := range tests {
		b := good
		tt.mod(&b)
		d := newDetector(t, Config{})
		err := d.Restore([]Baseline{good, b})
		if err == nil || !strings.Contains(err.Error(), "baselines[1]: "+tt.want) {
			t.Errorf("Restore(%+v) = %v, want an error naming baselines[1].%s", b, err, tt.want)
		}
		if len(d.Baselines()) != 0 {
			t.Errorf("a refused restore loaded baselines")
		}
	}
}

func TestForecastAndTrend(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	ramp := make([]float64, 200)
	fall := make([]float64, 200)
	noise := make([]float64, 200)
	for i := range ramp {
		ramp[i] = 100 + 0.5*float64(i) + 0.5*r.NormFloat64()
		fall[i] = 100 - 0.5*float64(i) + 0.5*r.NormFloat64()
		noise[i] = 100 + r.NormFloat64()
	}
	tests := []struct {
		name     string
		vals     []float64
		trend    string
		next     float64
		ttt      bool
		minConf  float64
		strength func(float64) bool
	}{
		{"rising ramp", ramp, TrendRising, 200, true, 0.3, func(s float64) bool { return s > 0.8 }},
		{"falling ramp", fall, TrendFalling, 0, true, 0.3, func(s float64) bool { return s > 0.8 }},
		{"noise", noise, TrendStable, 100, false, 0, func(s float64) bool { return s < stableBelow }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{})
			rs := feed(d, "lvl", t0, tt.vals...)
			res := rs[0]
			if res.Trend != tt.trend || !tt.strength(res.TrendStrength) || res.TrendStrength > 1 {
				t.Errorf("trend %s strength %v, want %s", res.Trend, res.TrendStrength, tt.trend)
			}
			if math.Abs(res.PredictedNext-tt.next) > 3 {
				t.Errorf("predicted_next %v, want about %v", res.PredictedNext, tt.next)
			}
			if res.ForecastConfidence < tt.minConf || res.ForecastConfidence > 1 {
				t.Errorf("forecast_confidence %v, want %v..1", res.ForecastConfidence, tt.minConf)
			}
			if (res.TimeToThreshold != nil) != tt.ttt {
				t.Fatalf("time_to_threshold %+v, want present %v", res.TimeToThreshold, tt.ttt)
			}
			if tt := res.TimeToThreshold; tt != nil {
				// The ramp moves 0.5 a second: the crossing is the distance
				// from the forecast to the bound over that, plus the step the
				// forecast looks ahead.
				want := math.Abs(tt.Threshold-res.PredictedNext)/0.5 + 1
				if tt.EstimatedSeconds <= 0 || math.Abs(tt.EstimatedSeconds-want) > 0.25*want+1 || tt.Confidence < 0 || tt.Confidence > 1 {
					t.Errorf("time_to_threshold %+v, want about %.0f s", tt, want)
				}
			}
		})
	}
}

func TestAlertRingAndFilters(t *testing.T) {
	d := newDetector(t, Config{MaxAlerts: 3})
	// Five metrics, each warmed up on a constant and then jumping: five
	// critical alerts, a minute apart.
	for i, m := range []string{"a", "b", "c", "d", "e"} {
		start := t0.Add(time.Duration(i) * time.Minute)
		feed(d, m, start, repeat(1, WarmupBatches+1)...)
		if rs := feed(d, m, start.Add(30*time.Second), 100); rs[0].Alert == nil {
			t.Fatalf("metric %s did not alert", m)
		}
	}
	all, total := d.Alerts(AlertFilter{})
	if total != 3 || len(all) != 3 || all[0].Metric != "e" || all[1].Metric != "d" || all[2].Metric != "c" {
		t.Fatalf("alerts %+v total %d, want the newest three, newest first", all, total)
	}
	tests := []struct {
		name  string
		f     AlertFilter
		want  []string
		total int
	}{
		{"metric", AlertFilter{Metric: "d"}, []string{"d"}, 1},
		{"severity", AlertFilter{Severity: SeverityCritical}, []string{"e", "d", "c"}, 3},
		{"other severity", AlertFilter{Severity: SeverityInfo}, nil, 0},
		{"since", AlertFilter{Since: t0.Add(3 * time.Minute)}, []string{"e", "d"}, 2},
		{"limit", AlertFilter{Limit: 1}, []string{"e"}, 3},
	}
	for _, tt := range tests {
		got, total := d.Alerts(tt.f)
		var names []string
		for _, a := range got {
			names = append(names, a.Metric)
		}
		if strings.Join(names, ",") != strings.Join(tt.want, ",") || total != tt.total {
			t.Errorf("%s: alerts %v total %d, want %v total %d", tt.name, names, total, tt.want, tt.total)
		}
	}
	d.ClearAlerts()
	if got, total := d.Alerts(AlertFilter{}); len(got) != 0 || total != 0 {
		t.Errorf("after ClearAlerts: %v, %d", got, total)
	}
	if st := d.Stats(); st.Stats.TotalAnomalies != 5 {
		t.Errorf("totalAnomalies %d, want 5 (the ring forgets, the count does not)", st.Stats.TotalAnomalies)
	}
}

func TestMaxTrackedEvictsIdlest(t *testing.T) {
	tests := []struct {
		name string
		// c arrives this long after b was last seen.
		after     time.Duration
		kept      []string
		untracked int64
	}{
		{"b idle past the grace is evicted", evictGrace, []string{"a", "c"}, 0},
		{"b seen within the grace stays, c is not tracked", evictGrace - time.Second, []string{"a", "b"}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{MaxTracked: 2})
			feed(d, "a", t0, 1)
			feed(d, "b", t0, 1)
			at := t0.Add(tt.after)
			feed(d, "a", at, 1) // b is now the idlest
			feed(d, "c", at, 1)
			st := d.Stats().Stats
			if st.TrackedMetrics != 2 || st.UntrackedValues != tt.untracked {
				t.Fatalf("%d series tracked, %d untracked; want 2, %d", st.TrackedMetrics, st.UntrackedValues, tt.untracked)
			}
			for _, m := range tt.kept {
				if _, ok := d.series[seriesKey{m, "plc1"}]; !ok {
					t.Errorf("series %s was evicted", m)
				}
			}
		})
	}
}

// TestMoreLiveSeriesThanTrackedStayWarm: 1003 series polled every second
// by a detector that tracks 1000 (the agent's 1000 registers and its
// system metrics). Evicting the idlest would evict the next series to be
// polled, over and over, and none would ever warm up; instead the
// newcomers are not tracked and the others are scored.
func TestMoreLiveSeriesThanTrackedStayWarm(t *testing.T) {
	d := newDetector(t, Config{})
	var scored int
	for sec := range 3 * WarmupBatches {
		at := t0.Add(time.Duration(sec) * time.Second)
		scored = 0
		for dev := range 10 {
			b := make([]Observation, 100)
			for r := range b {
				b[r] = Observation{Metric: fmt.Sprint("r", r), Device: fmt.Sprint("d", dev), Value: float64(r + sec%2), At: at}
			}
			scored += len(d.Observe(b))
		}
		d.Observe([]Observation{{Metric: "cpu", Device: "system", Value: 1, At: at},
			{Metric: "mem", Device: "system", Value: 1, At: at}, {Metric: "disk", Device: "system", Value: 1, At: at}})
	}
	if scored != 1000 {
		t.Errorf("%d of the 1000 register series scored in the last poll round, want all", scored)
	}
	if st := d.Stats().Stats; st.UntrackedValues != 3*3*WarmupBatches {
		t.Errorf("%d observations untracked, want the system series' %d", st.UntrackedValues, 3*3*WarmupBatches)
	}
}

func TestNonFiniteIgnored(t *testing.T) {
	d := newDetector(t, Config{})
	for i := range WarmupBatches {
		feed(d, "m", t0.Add(time.Duration(i)*time.Second), 5)
		// Bad values neither count as a batch nor reach the baselines.
		for _, v := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			if rs := feed(d, "m", t0, v); rs != nil {
				t.Fatalf("non-finite value returned %+v", rs)
			}
		}
	}
	st := d.Stats()
	if st.Stats.IgnoredValues != 3*WarmupBatches || st.Stats.TotalDataPoints != WarmupBatches {
		t.Errorf("stats %+v, want %d ignored and %d points", st.Stats, 3*WarmupBatches, WarmupBatches)
	}
	if rs := feed(d, "m", t0.Add(time.Minute), 5); len(rs) != 1 || rs[0].Alert != nil || rs[0].AnomalyScore != 0 {
		t.Errorf("first reading after the warm-up gave %+v, want a quiet result", rs)
	}
}

func TestDisabledLearnsNothing(t *testing.T) {
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if rs := feed(d, "m", t0, repeat(1, 50)...); rs != nil || d.Stats().Stats.TotalDataPoints != 0 {
		t.Errorf("disabled detector returned %v and counted %d points", rs, d.Stats().Stats.TotalDataPoints)
	}
}

func TestObserveAppendReusesDst(t *testing.T) {
	d := newDetector(t, Config{})
	batch := []Observation{{Metric: "a", Value: 1, At: t0}, {Metric: "b", Value: math.NaN(), At: t0}, {Metric: "c", Value: 3, At: t0}}
	for range WarmupBatches {
		d.Observe(batch)
	}
	prior := Result{Index: -1}
	out := d.ObserveAppend([]Result{prior}, batch)
	if len(out) != 3 || out[0].Index != -1 || out[1].Index != 0 || out[2].Index != 2 {
		t.Fatalf("ObserveAppend gave %+v, want the prior result then a (index 0) and c (index 2)", out)
	}
	// The steady path allocates nothing once dst has room.
	allocs := testing.AllocsPerRun(200, func() { out = d.ObserveAppend(out[:0], batch) })
	if allocs != 0 {
		t.Errorf("steady ObserveAppend allocates %v times per call, want 0", allocs)
	}
}

// TestPlansFollowBatchShape: series found by position (planFor) are the
// readings' own whatever the order of the next batch, and an evicted
// series is not used again.
func TestPlansFollowBatchShape(t *testing.T) {
	obs := func(at time.Time, kv ...any) []Observation {
		var b []Observation
		for i := 0; i < len(kv); i += 2 {
			b = append(b, Observation{Metric: kv[i].(string), Device: "plc1", Value: kv[i+1].(float64), At: at})
		}
		return b
	}
	tests := []struct {
		name    string
		max     int
		batches [][]any
		// want is each tracked series' last value.
		want map[string]float64
	}{
		{"same shape", 0, [][]any{{"a", 1.0, "b", 2.0}, {"a", 3.0, "b", 4.0}}, map[string]float64{"a": 3, "b": 4}},
		{"reordered", 0, [][]any{{"a", 1.0, "b", 2.0, "c", 3.0}, {"a", 4.0, "c", 5.0, "b", 6.0}}, map[string]float64{"a": 4, "b": 6, "c": 5}},
		{"shorter then longer", 0, [][]any{{"a", 1.0}, {"a", 2.0, "b", 3.0}}, map[string]float64{"a": 2, "b": 3}},
		{"evicted in between", 2, [][]any{{"a", 1.0, "b", 2.0}, {"c", 3.0, "d", 4.0}, {"a", 5.0, "b", 6.0}}, map[string]float64{"a": 5, "b": 6}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := newDetector(t, Config{MaxTracked: tt.max})
			for i, kv := range tt.batches {
				// Two minutes apart: past the eviction grace.
				d.Observe(obs(t0.Add(time.Duration(i)*2*time.Minute), kv...))
			}
			if len(d.series) != len(tt.want) {
				t.Fatalf("%d series tracked, want %d", len(d.series), len(tt.want))
			}
			for m, v := range tt.want {
				s := d.series[seriesKey{m, "plc1"}]
				if s == nil || s.prev != v {
					t.Errorf("series %s: %+v, want last value %g", m, s, v)
				}
			}
		})
	}
}

// TestObserveAppendSeriesCountsNewSeries: the agent updates its metric
// catalog only for a batch that created series, so every batch that
// does, and none that does not, must say so; a series evicted and seen
// again is new again.
func TestObserveAppendSeriesCountsNewSeries(t *testing.T) {
	d := newDetector(t, Config{MaxTracked: 2})
	obs := func(at time.Time, metrics ...string) int {
		b := make([]Observation, len(metrics))
		for i, m := range metrics {
			b[i] = Observation{Metric: m, Device: "plc1", Value: 1, At: at}
		}
		_, n := d.ObserveAppendSeries(nil, b)
		return n
	}
	steps := []struct {
		name    string
		at      time.Time
		metrics []string
		want    int
	}{
		{"first poll", t0, []string{"a", "b"}, 2},
		{"same poll again", t0.Add(time.Second), []string{"a", "b"}, 0},
		{"new metric while full and nothing idle: untracked", t0.Add(2 * time.Second), []string{"c"}, 0},
		{"a seen, b idle past the grace: c evicts b", t0.Add(evictGrace + 2*time.Second), []string{"a", "c"}, 1},
		{"b again evicts a", t0.Add(3*evictGrace + 3*time.Second), []string{"b"}, 1},
	}
	for _, st := range steps {
		if got := obs(st.at, st.metrics...); got != st.want {
			t.Errorf("%s: %d new series, want %d", st.name, got, st.want)
		}
	}
}

// TestInstantSince checks that the answer since remembers for a poll is
// the one working it out every time gives, whatever order the series'
// last times come in.
func TestInstantSince(t *testing.T) {
	now := time.Now() // with a monotonic reading
	lasts := []time.Time{
		{}, t0.Add(-time.Second), t0, t0.Add(-time.Second), t0.Add(time.Second),
		t0.Add(-time.Second).In(time.FixedZone("x", 3600)), now.Add(-1500 * time.Millisecond), now, {},
		now.Add(-1500 * time.Millisecond).Round(0),
	}
	for _, at := range []time.Time{t0, now} {
		ts := instant{at: at}
		for i, last := range lasts {
			after, dt := ts.since(last)
			wantAfter, wantDT := at.After(last), 0.0
			if wantAfter && !last.IsZero() {
				wantDT = at.Sub(last).Seconds()
			}
			if after != wantAfter || dt != wantDT {
				t.Errorf("at %v, last[%d] %v: %v %v, want %v %v", at, i, last, after, dt, wantAfter, wantDT)
			}
		}
	}
}
