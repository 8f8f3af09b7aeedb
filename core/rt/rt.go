// Package rt defines Runtime, the small set of process-wide things cmd hands
// to every role: logger, metrics registry, health registry and the shared
// backends. They are parameters, never globals, so all-in-one can share one
// of each across roles and tests can build their own.
package rt

import (
	"log/slog"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/prometheus/client_golang/prometheus"
)

// Runtime is what every role's constructor receives besides its config.
type Runtime struct {
	Logger  *slog.Logger
	Metrics *prometheus.Registry
	Health  *health.Registry

	// DB and Streams are opened by cmd's backends service, which starts
	// before every role service: they are nil while roles are being built
	// and set by the time a role's Start runs. all-in-one's roles share
	// them, which is how its ingest workers read what its API appends.
	DB      *db.DB
	Streams streamstore.Store
}

// Component returns a logger labelled with the component name, the way
// every package should log.
func (r *Runtime) Component(name string) *slog.Logger {
	return r.Logger.With("component", name)
}
