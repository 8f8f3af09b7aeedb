package detect

import (
	"errors"
	"fmt"
	"time"
)

// Sensitivity picks the detection threshold of a metric.
type Sensitivity string

// The sensitivities a metric may have; medium is the default.
const (
	SensitivityLow    Sensitivity = "low"
	SensitivityMedium Sensitivity = "medium"
	SensitivityHigh   Sensitivity = "high"
)

// Defaults and bounds of the configuration (docs/anomaly.md, "Limits").
const (
	DefaultWindowSize = 120
	MinWindowSize     = 10
	MaxWindowSize     = 1000
	DefaultMaxTracked = 1000
	DefaultMaxAlerts  = 1000
	// MinThreshold and MaxThreshold bound an explicit threshold, in
	// standard deviations: below 1 nearly every reading would alert.
	MinThreshold = 1.0
	MaxThreshold = 50.0
)

// sigmaThreshold is the method score, in robust standard deviations, at
// which a sensitivity flags. Gaussian noise passes 4σ once in ~16000
// readings per method, so medium stays quiet on healthy signals.
func (s Sensitivity) sigmaThreshold() float64 {
	switch s {
	case SensitivityLow:
		return 5
	case SensitivityHigh:
		return 3
	default:
		return 4
	}
}

func (s Sensitivity) valid() bool {
	switch s {
	case "", SensitivityLow, SensitivityMedium, SensitivityHigh:
		return true
	}
	return false
}

// MetricConfig tunes the detection of one metric name (all its devices).
type MetricConfig struct {
	Name string `json:"name"`
	// Threshold, when not zero, replaces the sensitivity's threshold; it is
	// in standard deviations (the unit of the z-score and MAD methods).
	Threshold   float64     `json:"threshold"`
	Sensitivity Sensitivity `json:"sensitivity"`
	// WindowSize is the number of samples each hour-of-day baseline keeps;
	// zero means DefaultWindowSize.
	WindowSize int `json:"windowSize"`
}

// Config is the detector's configuration.
type Config struct {
	Enabled bool           `json:"enabled"`
	Metrics []MetricConfig `json:"metrics"`
	// Sensitivity applies to metrics without their own; empty means medium.
	Sensitivity Sensitivity `json:"sensitivity"`
	// MaxTracked bounds the number of (metric, device) series; the series
	// idle the longest is evicted to make room. Zero means DefaultMaxTracked.
	MaxTracked int `json:"maxTracked"`
	// MaxAlerts bounds the alert ring; zero means DefaultMaxAlerts.
	MaxAlerts int `json:"maxAlerts"`
	// Location decides the hour-of-day slot of an observation; nil is UTC.
	Location *time.Location `json:"-"`
}

// Validate reports every invalid field, each named by its JSON path.
func (c Config) Validate() error {
	var errs []error
	if !c.Sensitivity.valid() {
		errs = append(errs, fmt.Errorf("sensitivity: must be low, medium or high, got %q", c.Sensitivity))
	}
	if c.MaxTracked < 0 {
		errs = append(errs, fmt.Errorf("maxTracked: must be 0 (default %d) or positive, got %d", DefaultMaxTracked, c.MaxTracked))
	}
	if c.MaxAlerts < 0 {
		errs = append(errs, fmt.Errorf("maxAlerts: must be 0 (default %d) or positive, got %d", DefaultMaxAlerts, c.MaxAlerts))
	}
	seen := make(map[string]int, len(c.Metrics))
	for i, m := range c.Metrics {
		p := fmt.Sprintf("metrics[%d]", i)
		if m.Name == "" {
			errs = append(errs, fmt.Errorf("%s.name: must not be empty", p))
		} else if j, dup := seen[m.Name]; dup {
			errs = append(errs, fmt.Errorf("%s.name: %q already configured by metrics[%d]", p, m.Name, j))
		} else {
			seen[m.Name] = i
		}
		if !m.Sensitivity.valid() {
			errs = append(errs, fmt.Errorf("%s.sensitivity: must be low, medium or high, got %q", p, m.Sensitivity))
		}
		if m.Threshold != 0 && !(m.Threshold >= MinThreshold && m.Threshold <= MaxThreshold) {
			errs = append(errs, fmt.Errorf("%s.threshold: must be 0 (use the sensitivity) or %g..%g standard deviations, got %g",
				p, MinThreshold, MaxThreshold, m.Threshold))
		}
		if m.WindowSize != 0 && (m.WindowSize < MinWindowSize || m.WindowSize > MaxWindowSize) {
			errs = append(errs, fmt.Errorf("%s.windowSize: must be 0 (default %d) or %d..%d, got %d",
				p, DefaultWindowSize, MinWindowSize, MaxWindowSize, m.WindowSize))
		}
	}
	return errors.Join(errs...)
}

// tuning is the resolved configuration of one metric.
type tuning struct {
	sigma  float64 // method-score threshold, standard deviations
	window int
}

func (c Config) tuningFor(metric string, byName map[string]MetricConfig) tuning {
	t := tuning{sigma: c.Sensitivity.sigmaThreshold(), window: DefaultWindowSize}
	m, ok := byName[metric]
	if !ok {
		return t
	}
	if m.Sensitivity != "" {
		t.sigma = m.Sensitivity.sigmaThreshold()
	}
	if m.Threshold != 0 {
		t.sigma = m.Threshold
	}
	if m.WindowSize != 0 {
		t.window = m.WindowSize
	}
	return t
}
