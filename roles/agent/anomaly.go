package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly"
	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
	"github.com/edgeplat/edgeplat/roles/agent/sysinfo"
)

// FeatureSettings switch the agent's optional capabilities.
// anomalyDetection is the same switch as anomalyDetection.enabled: a
// change of either changes both (docs/anomaly-agent.md, section
// Configuration).
type FeatureSettings struct {
	AnomalyDetection bool `json:"anomalyDetection"`
	// Discovery gates the discovery routes and the rules' scheduler
	// (docs/discovery.md).
	Discovery bool `json:"discovery"`
}

// syncAnomalySwitch keeps features.anomalyDetection and
// anomalyDetection.enabled one value: the one the patch p sets wins, and
// a patch that sets both to different values is refused.
func syncAnomalySwitch(p map[string]json.RawMessage, out *Settings) error {
	has := func(group, key string) bool {
		var m map[string]json.RawMessage
		if json.Unmarshal(p[group], &m) != nil {
			return false
		}
		_, ok := m[key]
		return ok
	}
	feature, config := has("features", "anomalyDetection"), has("anomalyDetection", "enabled")
	switch {
	case feature && config && out.Features.AnomalyDetection != out.AnomalyDetection.Enabled:
		return adapters.Fieldf("features.anomalyDetection", "is %v while anomalyDetection.enabled is %v; they are one switch, set one",
			out.Features.AnomalyDetection, out.AnomalyDetection.Enabled)
	case feature:
		out.AnomalyDetection.Enabled = out.Features.AnomalyDetection
	case config:
		out.Features.AnomalyDetection = out.AnomalyDetection.Enabled
	}
	out.AnomalyDetection = out.AnomalyDetection.Normalized()
	return nil
}

// anomalyErrors names the invalid fields of the anomalyDetection group.
func (s Settings) anomalyErrors() error {
	if err := s.AnomalyDetection.Validate(); err != nil {
		return fmt.Errorf("anomalyDetection.%w", err)
	}
	return nil
}

// newAnomaly builds the anomaly service over the agent's store, publisher
// and host sampler (its own, so its CPU figures do not shorten the
// dashboard's rate window).
func newAnomaly(p *parts, reg prometheus.Registerer) (*anomaly.Service, error) {
	sampler := sysinfo.NewSampler("/proc", p.cfg.DataDir)
	return anomaly.New(anomaly.Options{
		Store: func() (anomaly.Store, error) {
			st, err := p.st.Open()
			if err != nil {
				return nil, err
			}
			return st.Baselines(), nil
		},
		Events: p.pub,
		System: func(ctx context.Context) (map[string]float64, error) {
			d, err := sampler.Sample(ctx)
			if err != nil {
				return nil, err
			}
			m := map[string]float64{"cpu_usage": d.CPUUsage, "memory_percent": d.MemoryPercent, "disk_usage": d.StoragePercent}
			if c, ok := sysinfo.Temperature("/sys"); ok {
				m["cpu_temp"] = c
			}
			return m, nil
		},
		Endpoints: func(ctx context.Context) ([]anomaly.EndpointPoints, error) {
			st, err := p.st.Open()
			if err != nil {
				return nil, err
			}
			eps, err := st.Endpoints().List(ctx, "")
			if err != nil {
				return nil, err
			}
			out := make([]anomaly.EndpointPoints, 0, len(eps))
			for _, ep := range eps {
				e := anomaly.EndpointPoints{Name: ep.Name}
				for _, dp := range ep.DataPoints {
					e.Points = append(e.Points, dp.Name)
				}
				out = append(out, e)
			}
			return out, nil
		},
		Log:     p.log.With("component", "anomaly"),
		Metrics: reg,
	})
}

// anomalyAPI is httpapi.Anomaly over the anomaly service; the config goes
// through the settings, so it is stored, guarded when the cloud manages
// it, and applied like any other setting.
type anomalyAPI struct {
	s           *anomaly.Service
	settings    *settingsService
	development bool
}

func anomalyError(err error) error {
	switch {
	case errors.Is(err, anomaly.ErrNotRunning):
		return fmt.Errorf("%w (%w)", httpapi.ErrNotReady, err)
	case errors.Is(err, anomaly.ErrDisabled):
		return httpapi.Errorf(http.StatusConflict, "%v", err)
	}
	return err
}

func (a anomalyAPI) Metrics(ctx context.Context) (any, error) {
	ms, err := a.s.Metrics(ctx)
	if err != nil {
		return nil, anomalyError(err)
	}
	return map[string]any{"metrics": ms}, nil
}

func (a anomalyAPI) Config() any { return map[string]any{"config": a.s.Config()} }

func (a anomalyAPI) PatchConfig(ctx context.Context, body []byte) (any, error) {
	// Checked here first, so an error names the field of this body
	// (metrics[0].threshold), not of the settings document.
	if _, err := anomaly.MergeConfig(a.s.Config(), body); err != nil {
		return nil, httpapi.Invalid(err)
	}
	doc, err := json.Marshal(map[string]json.RawMessage{"anomalyDetection": body})
	if err != nil {
		return nil, httpapi.Invalid(err)
	}
	if err := a.settings.Patch(ctx, doc); err != nil {
		return nil, err
	}
	return a.Config(), nil
}

func (a anomalyAPI) Alerts(q httpapi.AlertQuery) (any, error) {
	f := detect.AlertFilter{Severity: q.Severity, Metric: q.Metric, Limit: q.Limit}
	if q.SinceMS > 0 {
		f.Since = time.UnixMilli(q.SinceMS)
	}
	as, total, err := a.s.Alerts(f)
	if err != nil {
		return nil, anomalyError(err)
	}
	return map[string]any{"alerts": as, "total": total}, nil
}

func (a anomalyAPI) ClearAlerts() error { return anomalyError(a.s.ClearAlerts()) }

func (a anomalyAPI) Stats() (any, error) {
	st, err := a.s.Stats()
	return st, anomalyError(err)
}

func (a anomalyAPI) Baselines(metric string, limit int) (any, error) {
	bs, total, err := a.s.Baselines(metric, limit)
	if err != nil {
		return nil, anomalyError(err)
	}
	return map[string]any{"baselines": bs, "total": total}, nil
}

func (a anomalyAPI) SaveBaselines(ctx context.Context) (any, error) {
	n, err := a.s.Save(ctx)
	if err != nil {
		return nil, anomalyError(err)
	}
	st, err := a.s.Stats()
	if err != nil {
		return nil, anomalyError(err)
	}
	return map[string]any{"message": fmt.Sprintf("%d baselines saved", n), "stats": st}, nil
}

func (a anomalyAPI) Development() bool { return a.development }

func (a anomalyAPI) Inject(_ context.Context, in httpapi.TestAnomaly) (any, error) {
	n, err := a.s.Inject(in.Metric, *in.Value, in.Count)
	if err != nil {
		return nil, anomalyError(err)
	}
	st, err := a.s.Stats()
	if err != nil {
		return nil, anomalyError(err)
	}
	recent, _, err := a.s.Alerts(detect.AlertFilter{Limit: 10})
	if err != nil {
		return nil, anomalyError(err)
	}
	return map[string]any{
		"message":        fmt.Sprintf("injected %d points of %s = %g on device %q", n, in.Metric, *in.Value, anomaly.TestDevice),
		"injectedPoints": n, "currentStats": st, "recentAlerts": recent,
	}, nil
}

var _ httpapi.Anomaly = anomalyAPI{}
