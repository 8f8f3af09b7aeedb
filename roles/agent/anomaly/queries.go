package anomaly

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// ErrNotRunning: the detector of this run is not built yet (the agent
// initialises) or already retired (it stops).
var ErrNotRunning = errors.New("anomaly detection is not running; the agent initialises")

// ErrDisabled: the request needs detection on.
var ErrDisabled = errors.New("anomaly detection is off; PATCH /v1/anomaly/config {\"enabled\":true} first")

// Limits of GET /v1/anomaly/baselines.
const (
	DefaultBaselineLimit = 100
	MaxBaselineLimit     = 500
	// MaxInjectCount bounds POST /v1/test/anomaly's count.
	MaxInjectCount = 1000
)

// Alerts returns the matching alerts, newest first, and how many matched.
func (s *Service) Alerts(f detect.AlertFilter) ([]detect.Alert, int, error) {
	d := s.detector()
	if d == nil {
		return nil, 0, ErrNotRunning
	}
	as, total := d.Alerts(f)
	return as, total, nil
}

// ClearAlerts empties the alert list.
func (s *Service) ClearAlerts() error {
	d := s.detector()
	if d == nil {
		return ErrNotRunning
	}
	d.ClearAlerts()
	return nil
}

// Stats is the detector's snapshot.
func (s *Service) Stats() (detect.Stats, error) {
	d := s.detector()
	if d == nil {
		return detect.Stats{}, ErrNotRunning
	}
	return d.Stats(), nil
}

// Baselines returns the baselines of metric (all when empty), ordered by
// metric, device and slot, at most limit of them, and how many matched.
func (s *Service) Baselines(metric string, limit int) ([]detect.Baseline, int, error) {
	d := s.detector()
	if d == nil {
		return nil, 0, ErrNotRunning
	}
	all := d.Baselines()
	out := all[:0]
	for _, b := range all {
		if metric == "" || b.Metric == metric {
			out = append(out, b)
		}
	}
	slices.SortFunc(out, func(a, b detect.Baseline) int {
		return cmp.Or(cmp.Compare(a.Metric, b.Metric), cmp.Compare(a.DeviceID, b.DeviceID), cmp.Compare(a.TimeSlot, b.TimeSlot))
	})
	total := len(out)
	if limit <= 0 {
		limit = DefaultBaselineLimit
	}
	if len(out) > limit {
		out = out[:limit]
	}
	if out == nil {
		out = []detect.Baseline{}
	}
	return out, total, nil
}

// MetricInfo is one item of GET /v1/anomaly/metrics.
type MetricInfo struct {
	Name string `json:"name"`
	// Source is live (seen in readings), system or endpoint (a
	// configured data point not seen yet).
	Source       string   `json:"source"`
	Score        *float64 `json:"score"`
	EndpointName string   `json:"endpointName,omitempty"`
	Configured   bool     `json:"configured"`
}

// Metric sources.
const (
	SourceLive     = "live"
	SourceSystem   = "system"
	SourceEndpoint = "endpoint"
)

// Metrics merges the live catalog, the system metrics and the endpoints'
// configured data points, one item per name, sorted by name. A metric
// only the configuration names is listed as live, without a score.
func (s *Service) Metrics(ctx context.Context) ([]MetricInfo, error) {
	items := map[string]*MetricInfo{}
	for name, ep := range s.cat.snapshot() {
		items[name] = &MetricInfo{Name: name, Source: SourceLive, EndpointName: ep}
	}
	for _, name := range SystemMetrics {
		items[name] = &MetricInfo{Name: name, Source: SourceSystem}
	}
	if s.o.Endpoints != nil {
		eps, err := s.o.Endpoints(ctx)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			for _, p := range ep.Points {
				if _, ok := items[p]; !ok {
					items[p] = &MetricInfo{Name: p, Source: SourceEndpoint, EndpointName: ep.Name}
				}
			}
		}
	}
	for _, m := range s.Config().Metrics {
		it, ok := items[m.Name]
		if !ok {
			it = &MetricInfo{Name: m.Name, Source: SourceLive}
			items[m.Name] = it
		}
		it.Configured = true
	}
	if d := s.detector(); d != nil {
		for name, sc := range d.Stats().Scores {
			if it, ok := items[name]; ok {
				it.Score = &sc
			}
		}
	}
	out := make([]MetricInfo, 0, len(items))
	for _, it := range items {
		out = append(out, *it)
	}
	slices.SortFunc(out, func(a, b MetricInfo) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}

// Inject observes value count times for metric on the test device, each
// as its own batch one second apart ending now, as POST /v1/test/anomaly
// does in development mode; alerts go out as any other. It reports how
// many points the detector took.
func (s *Service) Inject(metric string, value float64, count int) (int, error) {
	if !s.on.Load() {
		return 0, ErrDisabled
	}
	d := s.detector()
	if d == nil {
		return 0, ErrNotRunning
	}
	now := time.Now()
	for i := range count {
		at := now.Add(time.Duration(i-count+1) * time.Second)
		for _, r := range d.Observe([]detect.Observation{{Metric: metric, Device: TestDevice, Value: value, At: at}}) {
			if r.Alert != nil {
				s.raise(*r.Alert)
			}
		}
	}
	s.cat.see(TestDevice, []detect.Observation{{Metric: metric}})
	return count, nil
}

// TestDevice is the device of the points POST /v1/test/anomaly injects.
const TestDevice = "test"
