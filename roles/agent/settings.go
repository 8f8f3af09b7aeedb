package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Settings are the agent's adjustable settings (edge-agent.md §2). The
// read-only agent group is added when they are shown.
type Settings struct {
	Logging          LoggingSettings  `json:"logging"`
	Features         FeatureSettings  `json:"features"`
	Intervals        IntervalSettings `json:"intervals"`
	Runtime          RuntimeSettings  `json:"runtime"`
	AnomalyDetection AnomalySettings  `json:"anomalyDetection"`
}

// LoggingSettings: level applies at once to the agent's log.
type LoggingSettings struct {
	Level        string `json:"level"`
	CloudEnabled bool   `json:"cloudEnabled"`
}

// FeatureSettings switch optional subsystems.
type FeatureSettings struct {
	AnomalyDetection bool `json:"anomalyDetection"`
	Discovery        bool `json:"discovery"`
}

// IntervalSettings time the cloud state exchange.
type IntervalSettings struct {
	StateReportMS int `json:"stateReportMs"`
	StatePollMS   int `json:"statePollMs"`
}

// RuntimeSettings bound the agent's resources; maxMemoryMb 0 turns the
// memory restart policy off.
type RuntimeSettings struct {
	MaxMemoryMB int `json:"maxMemoryMb"`
}

// AnomalySettings is the anomaly detection config.
type AnomalySettings struct {
	Enabled bool            `json:"enabled"`
	Metrics []AnomalyMetric `json:"metrics"`
}

// AnomalyMetric configures detection for one metric.
type AnomalyMetric struct {
	Name        string  `json:"name"`
	Threshold   float64 `json:"threshold"`
	Sensitivity string  `json:"sensitivity,omitempty"`
	WindowSize  int     `json:"windowSize,omitempty"`
}

func defaultSettings() Settings {
	return Settings{
		Logging:          LoggingSettings{Level: "info"},
		Intervals:        IntervalSettings{StateReportMS: 10000, StatePollMS: 60000},
		AnomalyDetection: AnomalySettings{Metrics: []AnomalyMetric{}},
	}
}

// settingsGroups are the keys PATCH /v1/settings accepts; any other
// top-level key is ignored, as the spec says.
var settingsGroups = []string{"logging", "features", "intervals", "runtime", "anomalyDetection"}

func (s Settings) validate() error {
	var errs []error
	if _, err := parseLevel(s.Logging.Level); err != nil {
		errs = append(errs, adapters.Fieldf("logging.level", "must be one of debug, info, warn, error, got %q", s.Logging.Level))
	}
	if s.Intervals.StateReportMS < 1000 || s.Intervals.StateReportMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.stateReportMs", "must be 1000..86400000, got %d", s.Intervals.StateReportMS))
	}
	if s.Intervals.StatePollMS < 1000 || s.Intervals.StatePollMS > 86400000 {
		errs = append(errs, adapters.Fieldf("intervals.statePollMs", "must be 1000..86400000, got %d", s.Intervals.StatePollMS))
	}
	if s.Runtime.MaxMemoryMB < 0 || s.Runtime.MaxMemoryMB > 1<<20 {
		errs = append(errs, adapters.Fieldf("runtime.maxMemoryMb", "must be 0 (off) or a size in MB, got %d", s.Runtime.MaxMemoryMB))
	}
	for i, m := range s.AnomalyDetection.Metrics {
		f := fmt.Sprintf("anomalyDetection.metrics[%d]", i)
		if m.Name == "" {
			errs = append(errs, adapters.Fieldf(f+".name", "is required"))
		}
		if m.WindowSize < 0 || m.WindowSize > 100000 {
			errs = append(errs, adapters.Fieldf(f+".windowSize", "must be 0..100000, got %d", m.WindowSize))
		}
		switch m.Sensitivity {
		case "", "low", "medium", "high":
		default:
			errs = append(errs, adapters.Fieldf(f+".sensitivity", "must be low, medium or high, got %q", m.Sensitivity))
		}
	}
	return errors.Join(errs...)
}

func parseLevel(s string) (slog.Level, error) {
	var l slog.Level
	switch s {
	case "debug", "info", "warn", "error":
		return l, l.UnmarshalText([]byte(s))
	}
	return l, fmt.Errorf("unknown level %q", s)
}

// mergeSettings applies a partial settings document to cur: accepted
// groups are merged key by key (objects recursively, everything else
// replaced), other top-level keys are ignored. The result is decoded
// strictly, so a misspelt key inside a group is an error naming it.
func mergeSettings(cur Settings, patch []byte) (Settings, []string, error) {
	var p map[string]json.RawMessage
	if err := httpx.DecodeStrict(patch, &p); err != nil {
		return cur, nil, err
	}
	if p == nil {
		return cur, nil, errors.New("body: settings must be a JSON object")
	}
	base, err := json.Marshal(cur)
	if err != nil {
		return cur, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(base, &doc); err != nil {
		return cur, nil, err
	}
	var ignored []string
	accepted := map[string]bool{}
	for _, g := range settingsGroups {
		accepted[g] = true
	}
	for k, raw := range p {
		if !accepted[k] {
			ignored = append(ignored, k)
			continue
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return cur, nil, fmt.Errorf("%s: %w", k, err)
		}
		doc[k] = mergeValue(doc[k], v)
	}
	merged, err := json.Marshal(doc)
	if err != nil {
		return cur, nil, err
	}
	var out Settings
	if err := httpx.DecodeStrict(merged, &out); err != nil {
		return cur, nil, err
	}
	if out.AnomalyDetection.Metrics == nil {
		out.AnomalyDetection.Metrics = []AnomalyMetric{}
	}
	return out, ignored, out.validate()
}

func mergeValue(dst, src any) any {
	d, dok := dst.(map[string]any)
	s, sok := src.(map[string]any)
	if !dok || !sok {
		return src
	}
	for k, v := range s {
		d[k] = mergeValue(d[k], v)
	}
	return d
}

// loadSettings reads the stored settings (defaults when none) and applies
// them.
func (a *Agent) loadSettings(ctx context.Context) error {
	body, err := a.st.Load().Settings(ctx)
	if err != nil {
		return err
	}
	s := defaultSettings()
	if body != nil {
		if s, _, err = mergeSettings(s, body); err != nil {
			// A document a newer or older build wrote must not keep the
			// agent from starting; its valid parts are lost, and said so.
			a.log.Error("stored settings are invalid; using defaults", "err", err)
			s = defaultSettings()
		}
	}
	a.applySettings(s)
	return nil
}

func (a *Agent) applySettings(s Settings) {
	if l, err := parseLevel(s.Logging.Level); err == nil {
		a.level.Set(l)
	}
	a.memory.SetMaxMemoryMb(s.Runtime.MaxMemoryMB)
	a.settings.Store(&s)
}
