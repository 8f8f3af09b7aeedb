// Package rt defines Runtime, the small set of process-wide things cmd hands
// to every role: logger, metrics registry and health registry. They are
// parameters, never globals, so all-in-one can share one of each across
// roles and tests can build their own.
package rt

import (
	"log/slog"

	"github.com/edgeplat/edgeplat/core/health"
	"github.com/prometheus/client_golang/prometheus"
)

// Runtime is what every role's constructor receives besides its config.
type Runtime struct {
	Logger  *slog.Logger
	Metrics *prometheus.Registry
	Health  *health.Registry
}

// Component returns a logger labelled with the component name, the way
// every package should log.
func (r *Runtime) Component(name string) *slog.Logger {
	return r.Logger.With("component", name)
}
