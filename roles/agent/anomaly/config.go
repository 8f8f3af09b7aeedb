package anomaly

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/edgeplat/edgeplat/roles/agent/anomaly/detect"
)

// Config is the anomaly configuration object (docs/anomaly-agent.md):
// the settings group anomalyDetection, GET and PATCH /v1/anomaly/config.
type Config struct {
	Enabled bool                  `json:"enabled"`
	Metrics []detect.MetricConfig `json:"metrics"`
}

// DefaultConfig is detection on with every metric at medium sensitivity:
// the agent enriches readings and raises alerts unless told otherwise
// (docs/anomaly-agent.md, section Configuration).
func DefaultConfig() Config { return Config{Enabled: true, Metrics: []detect.MetricConfig{}} }

// Validate names every invalid field by its path in the config object.
func (c Config) Validate() error { return c.detector().Validate() }

// Equal reports whether two configs mean the same.
func (c Config) Equal(o Config) bool {
	return c.Enabled == o.Enabled && slices.Equal(c.Metrics, o.Metrics)
}

func (c Config) detector() detect.Config {
	// The detector itself is always enabled: the service switches
	// detection off by not calling it, which keeps its baselines. The
	// host's own metrics come on top of the default limit, so that 1000
	// data points do not leave them untracked.
	return detect.Config{Enabled: true, Metrics: c.Metrics, MaxTracked: detect.DefaultMaxTracked + len(SystemMetrics)}
}

// Normalized returns c with a non-nil metrics list, so it encodes as [].
func (c Config) Normalized() Config {
	if c.Metrics == nil {
		c.Metrics = []detect.MetricConfig{}
	}
	return c
}

// MergeConfig applies a partial config to cur: enabled when given, and
// metrics, when given, replaces the whole list (a metric left out is no
// longer configured). Unknown fields are errors naming them.
func MergeConfig(cur Config, patch []byte) (Config, error) {
	var p struct {
		Enabled *bool                  `json:"enabled"`
		Metrics *[]detect.MetricConfig `json:"metrics"`
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return cur, fmt.Errorf("body: %w", err)
	}
	if dec.More() {
		return cur, errors.New("body: one JSON object expected")
	}
	out := cur
	if p.Enabled != nil {
		out.Enabled = *p.Enabled
	}
	if p.Metrics != nil {
		out.Metrics = slices.Clone(*p.Metrics)
	}
	out = out.Normalized()
	if err := out.Validate(); err != nil {
		return cur, err
	}
	return out, nil
}
