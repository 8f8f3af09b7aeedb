package anomaly

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
	"github.com/edgeplat/edgeplat/roles/agent/batch"
)

// memStore is the agent store's baselines table in memory.
type memStore struct {
	mu    sync.Mutex
	bs    []detect.Baseline
	saves int
}

func (m *memStore) AnomalyBaselines(context.Context) ([]detect.Baseline, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]detect.Baseline(nil), m.bs...), nil
}

func (m *memStore) SaveAnomalyBaselines(_ context.Context, bs []detect.Baseline) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.bs = append([]detect.Baseline(nil), bs...)
	m.saves++
	return nil
}

// events records what would go to the cloud.
type events struct {
	mu  sync.Mutex
	got []control.Event
}

func (e *events) SendEvent(_ context.Context, ev control.Event) (int, error) {
	if err := ev.Validate(); err != nil {
		return 0, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, ev)
	return 1, nil
}

func (e *events) list() []control.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]control.Event(nil), e.got...)
}

func newService(t testing.TB, st *memStore, ev *events) *Service {
	t.Helper()
	s, err := New(Options{Store: func() (Store, error) { return st, nil }, Events: ev, Location: time.UTC})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

var t0 = time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)

// poll is one Modbus-like batch: a numeric register, a boolean and a
// failed read, so indices of the results skip readings that are not
// scored.
func poll(i int, v float64) batch.Batch {
	at := t0.Add(time.Duration(i) * time.Second)
	return batch.Batch{Endpoint: "press", Messages: []batch.Message{{Received: at, Readings: []adapters.Reading{
		{DeviceID: "press-id", Metric: "running", Value: true, Quality: adapters.Good, Timestamp: at},
		{DeviceID: "press-id", Metric: "pressure", Quality: adapters.Bad, QualityCode: "TIMEOUT", Timestamp: at},
		{DeviceID: "press-id", Metric: "temp", Value: v, Quality: adapters.Good, Timestamp: at},
	}}}}
}

func TestObserveBatch(t *testing.T) {
	st, ev := &memStore{}, &events{}
	s := newService(t, st, ev)
	// Uniform noise of standard deviation 1: bounded at 1.73σ, so no
	// correct detector may flag it, whatever its tuning.
	rng := rand.New(rand.NewPCG(1, 2))
	noise := func() float64 { return (2*rng.Float64() - 1) * math.Sqrt(3) }
	i := 0
	for ; i < detect.WarmupBatches-1; i++ {
		b := poll(i, 20+noise())
		s.ObserveBatch("press", &b)
		if b.Anomaly != nil {
			t.Fatalf("batch %d enriched during the warm-up: %+v", i, b.Anomaly)
		}
	}
	// The 20th batch ends the warm-up; whether it is scored itself is
	// the detector's call (docs/anomaly.md).
	b := poll(i, 20+noise())
	s.ObserveBatch("press", &b)
	for i++; i < 200; i++ {
		b := poll(i, 20+noise())
		s.ObserveBatch("press", &b)
		if len(b.Anomaly) != 1 || b.Anomaly[0].Index != 2 || b.Messages[0].Readings[2].Metric != "temp" {
			t.Fatalf("batch %d after the warm-up: %+v", i, b.Anomaly)
		}
	}
	if as, _, _ := s.Alerts(detect.AlertFilter{}); len(as) != 0 {
		t.Fatalf("a steady signal alerted: %+v", as)
	}
	// A step of 10 standard deviations alerts critically within 2 polls.
	critical := false
	for k := 0; k < 2 && !critical; k++ {
		b := poll(i, 30)
		i++
		s.ObserveBatch("press", &b)
		critical = len(b.Anomaly) == 1 && b.Anomaly[0].Alert != nil && b.Anomaly[0].Alert.Severity == detect.SeverityCritical
	}
	if !critical {
		as, _, _ := s.Alerts(detect.AlertFilter{})
		t.Fatalf("no critical alert within 2 polls of a 10σ step: %+v", as)
	}
	// The alert reaches the cloud as a critical event of its own kind.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(5 * time.Second)
	for len(ev.list()) == 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	got := ev.list()
	if len(got) == 0 {
		t.Fatal("the alert was not sent to the cloud")
	}
	var a detect.Alert
	if err := json.Unmarshal(got[0].Data, &a); err != nil || got[0].Kind != control.EventAnomalyAlert ||
		got[0].Severity != a.Severity || a.Metric != "temp" || !strings.HasSuffix(got[0].ID, "-"+a.ID) {
		t.Fatalf("event %+v (%v)", got[0], err)
	}
}

// TestObserveBatchIndices checks that every result names its reading,
// across messages, whether every reading is scored or some are left out
// early, late or not at all.
func TestObserveBatchIndices(t *testing.T) {
	tests := []struct {
		name string
		// values of the readings, one message per inner slice; nil is a
		// failed read and a string a value that is not scored.
		msgs [][]any
	}{
		{"every reading scored", [][]any{{1.0, 2.0, 3.0}, {4.0, 5.0}}},
		{"left out first", [][]any{{nil, 2.0, 3.0}, {4.0, "on"}}},
		{"left out late", [][]any{{1.0, 2.0, 3.0}, {4.0, nil, 6.0, 7.0}}},
		{"left out in the last message", [][]any{{1.0, 2.0}, {3.0, "x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newService(t, &memStore{}, &events{})
			mk := func(i int) batch.Batch {
				at := t0.Add(time.Duration(i) * time.Second)
				b := batch.Batch{Endpoint: "ep"}
				k := 0
				for _, vals := range tt.msgs {
					m := batch.Message{Received: at}
					for _, v := range vals {
						r := adapters.Reading{DeviceID: "dev", Metric: fmt.Sprintf("m%d", k), Value: v, Quality: adapters.Good, Timestamp: at}
						if v == nil {
							r.Quality = adapters.Bad
						} else if f, ok := v.(float64); ok {
							// A value of its own per reading, so a result
							// pointing at another reading shows.
							r.Value = f * 1000
						}
						m.Readings = append(m.Readings, r)
						k++
					}
					b.Messages = append(b.Messages, m)
				}
				return b
			}
			var b batch.Batch
			for i := range detect.WarmupBatches + 5 {
				b = mk(i)
				s.ObserveBatch("ep", &b).Release()
			}
			b = mk(detect.WarmupBatches + 5)
			sc := s.ObserveBatch("ep", &b)
			defer sc.Release()
			var flat []adapters.Reading
			for _, m := range b.Messages {
				flat = append(flat, m.Readings...)
			}
			var want []int
			for i, r := range flat {
				if _, ok := r.Value.(float64); ok && r.Quality != adapters.Bad {
					want = append(want, i)
				}
			}
			var got []int
			for _, r := range b.Anomaly {
				got = append(got, r.Index)
				if v, _ := flat[r.Index].Value.(float64); math.Abs(r.PredictedNext-v) > 1e-9*v {
					t.Errorf("result %d forecasts %v, its reading is %v", r.Index, r.PredictedNext, v)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("result indices %v, want %v", got, want)
			}
		})
	}
}

func TestDisabledCostsNothing(t *testing.T) {
	s := newService(t, &memStore{}, &events{})
	cfg := DefaultConfig()
	cfg.Enabled = false
	if err := s.Configure(cfg); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		b := poll(i, float64(i%3))
		s.ObserveBatch("press", &b)
		if b.Anomaly != nil {
			t.Fatal("enriched while off")
		}
	}
	if st, _ := s.Stats(); st.Stats.TotalDataPoints != 0 {
		t.Fatalf("observed while off: %+v", st.Stats)
	}
	if _, err := s.Inject("x", 1, 1); err != ErrDisabled {
		t.Fatalf("inject while off: %v", err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		b := poll(1, 1)
		s.ObserveBatch("press", &b)
	})
	base := testing.AllocsPerRun(100, func() { _ = poll(1, 1) })
	if allocs > base {
		t.Fatalf("ObserveBatch allocates %v times per batch while off", allocs-base)
	}
}

// TestBaselinesSurviveRestart: a new run restores what the last one saved
// at stop, keeps sample_count and enriches the first batch at once.
func TestBaselinesSurviveRestart(t *testing.T) {
	st := &memStore{}
	s := newService(t, st, &events{})
	for i := range 30 {
		b := poll(i, 20+float64(i%5)/10)
		s.ObserveBatch("press", &b)
	}
	before, _, _ := s.Baselines("temp", 0)
	if err := s.Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(before) != 1 || before[0].SampleCount != 30 || len(st.bs) != 1 {
		t.Fatalf("saved %+v from %+v", st.bs, before)
	}
	s2 := newService(t, st, &events{})
	after, total, _ := s2.Baselines("", 0)
	if total != 1 || after[0].SampleCount != 30 {
		t.Fatalf("restored %+v", after)
	}
	b := poll(31, 20.2)
	s2.ObserveBatch("press", &b)
	if len(b.Anomaly) != 1 || b.Anomaly[0].BaselineSamples < 30 {
		t.Fatalf("first batch after a restart: %+v", b.Anomaly)
	}
	// A factory reset is about to delete them: no save writes them back.
	s2.Forget()
	saves := st.saves
	if n, err := s2.Save(t.Context()); err != nil || n != 0 || st.saves != saves {
		t.Fatalf("save after Forget: %d %v", n, err)
	}
}

// TestConfigureKeepsBaselines: new metric tuning rebuilds the detector
// from the baselines; switching off and on keeps it.
func TestConfigureKeepsBaselines(t *testing.T) {
	s := newService(t, &memStore{}, &events{})
	for i := range 25 {
		b := poll(i, 20+float64(i%3))
		s.ObserveBatch("press", &b)
	}
	for _, cfg := range []Config{
		{Enabled: false},
		{Enabled: true},
		{Enabled: true, Metrics: []detect.MetricConfig{{Name: "temp", Threshold: 6, Sensitivity: "high", WindowSize: 60}}},
	} {
		if err := s.Configure(cfg); err != nil {
			t.Fatal(err)
		}
		bs, _, _ := s.Baselines("temp", 0)
		if len(bs) != 1 || bs[0].SampleCount != 25 {
			t.Fatalf("after %+v: %+v", cfg, bs)
		}
	}
	if err := s.Configure(Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "temp", WindowSize: 3}}}); err == nil {
		t.Fatal("an invalid window was applied")
	}
	if got := s.Config(); len(got.Metrics) != 1 || got.Metrics[0].Threshold != 6 {
		t.Fatalf("config after a refused change: %+v", got)
	}
}

// TestConfigureKeepsAlerts: a rebuild for new metric tuning keeps the
// run's alerts and totals, and the next alert gets a new id.
func TestConfigureKeepsAlerts(t *testing.T) {
	s := newService(t, &memStore{}, &events{})
	i := 0
	spike := func() {
		for range 25 {
			b := poll(i, 20+float64(i%3))
			s.ObserveBatch("press", &b)
			i++
		}
		b := poll(i, 500)
		s.ObserveBatch("press", &b)
		i++
	}
	spike()
	before, n, err := s.Alerts(detect.AlertFilter{})
	if err != nil || n != 1 {
		t.Fatalf("before the change: %d alerts (%v), want 1", n, err)
	}
	if err := s.Configure(Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "temp", Sensitivity: "high"}}}); err != nil {
		t.Fatal(err)
	}
	spike()
	after, n, err := s.Alerts(detect.AlertFilter{})
	if err != nil || n != 2 {
		t.Fatalf("after the change: %d alerts (%v), want the old and a new one", n, err)
	}
	if after[1] != before[0] || after[0].ID == before[0].ID {
		t.Errorf("alerts after the change %+v, want the new one and %+v, ids distinct", after, before[0])
	}
	if st, _ := s.Stats(); st.Stats.TotalAnomalies != 2 || st.Stats.TotalDataPoints != int64(i) {
		t.Errorf("totals %+v, want 2 anomalies of %d points", st.Stats, i)
	}
}

func TestMergeConfig(t *testing.T) {
	cur := Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "temp", Threshold: 5}}}
	for _, tc := range []struct {
		name, patch, field string
		want               Config
	}{
		{name: "off", patch: `{"enabled":false}`, want: Config{Enabled: false, Metrics: cur.Metrics}},
		{name: "metrics replaced", patch: `{"metrics":[{"name":"rpm","sensitivity":"low","windowSize":50}]}`,
			want: Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "rpm", Sensitivity: "low", WindowSize: 50}}}},
		{name: "metrics cleared", patch: `{"metrics":[]}`, want: Config{Enabled: true, Metrics: []detect.MetricConfig{}}},
		{name: "empty patch", patch: `{}`, want: cur},
		{name: "unknown field", patch: `{"enable":true}`, field: "enable"},
		{name: "bad sensitivity", patch: `{"metrics":[{"name":"a","sensitivity":"extreme"}]}`, field: "metrics[0].sensitivity"},
		{name: "bad threshold", patch: `{"metrics":[{"name":"a","threshold":0.5}]}`, field: "metrics[0].threshold"},
		{name: "threshold not a number", patch: `{"metrics":[{"name":"a","threshold":"abc"}]}`, field: "threshold"},
		{name: "no name", patch: `{"metrics":[{"threshold":3}]}`, field: "metrics[0].name"},
		{name: "duplicate", patch: `{"metrics":[{"name":"a"},{"name":"a"}]}`, field: "metrics[1].name"},
		{name: "window", patch: `{"metrics":[{"name":"a","windowSize":5000}]}`, field: "metrics[0].windowSize"},
		{name: "not an object", patch: `[1]`, field: "body"},
	} {
		got, err := MergeConfig(cur, []byte(tc.patch))
		if tc.field != "" {
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: err %v, want one naming %s", tc.name, err, tc.field)
			}
			continue
		}
		if err != nil || !got.Equal(tc.want) {
			t.Errorf("%s: %+v, %v; want %+v", tc.name, got, err, tc.want)
		}
	}
}

func TestMetricsAndBaselineQueries(t *testing.T) {
	s, err := New(Options{Store: func() (Store, error) { return &memStore{}, nil }, Events: &events{}, Location: time.UTC,
		Endpoints: func(context.Context) ([]EndpointPoints, error) {
			return []EndpointPoints{{Name: "press", Points: []string{"temp", "flow"}}}, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Baselines("", 0); err != ErrNotRunning {
		t.Fatalf("before Start: %v", err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Configure(Config{Enabled: true, Metrics: []detect.MetricConfig{{Name: "flow"}, {Name: "other"}}}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		b := poll(i, 20+float64(i%3))
		s.ObserveBatch("press", &b)
	}
	ms, err := s.Metrics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]MetricInfo{}
	for _, m := range ms {
		byName[m.Name] = m
	}
	for name, want := range map[string]MetricInfo{
		"temp": {Source: SourceLive, EndpointName: "press"}, "flow": {Source: SourceEndpoint, EndpointName: "press", Configured: true},
		"other": {Source: SourceLive, Configured: true}, "cpu_usage": {Source: SourceSystem}, "disk_usage": {Source: SourceSystem},
	} {
		got := byName[name]
		if got.Source != want.Source || got.EndpointName != want.EndpointName || got.Configured != want.Configured {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if byName["temp"].Score == nil || byName["flow"].Score != nil {
		t.Errorf("scores: temp %v flow %v", byName["temp"].Score, byName["flow"].Score)
	}
	// Injected points are a series of the test device.
	if n, err := s.Inject("inj", 5, 3); n != 3 || err != nil {
		t.Fatal(n, err)
	}
	for _, tc := range []struct {
		metric      string
		limit       int
		n, total    int
		firstMetric string
	}{
		{"", 0, 2, 2, "inj"}, {"", 1, 1, 2, "inj"}, {"temp", 0, 1, 1, "temp"}, {"none", 0, 0, 0, ""},
	} {
		bs, total, err := s.Baselines(tc.metric, tc.limit)
		if err != nil || len(bs) != tc.n || total != tc.total || (tc.n > 0 && bs[0].Metric != tc.firstMetric) || bs == nil {
			t.Errorf("Baselines(%q, %d) = %+v, %d, %v", tc.metric, tc.limit, bs, total, err)
		}
	}
}
