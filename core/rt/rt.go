// Package rt defines what cmd hands to the roles: Runtime, the process-wide
// logger, metrics registry and health registry, and Backends, the shared
// database and stream store. They are parameters, never globals, so
// all-in-one can share one of each across roles and tests can build their
// own.
package rt

import (
	"log/slog"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/httpx/redislimit"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/prometheus/client_golang/prometheus"
)

// Runtime is what every role's constructor receives besides its config.
// It is filled in once, where it is built, and never written afterwards:
// roles may keep the pointer and read it from any goroutine.
type Runtime struct {
	Logger  *slog.Logger
	Metrics *prometheus.Registry
	Health  *health.Registry
	// Level is Logger's level when it can change while the process runs;
	// nil when it is fixed (tests, tools).
	Level *slog.LevelVar
}

// Component returns a logger labelled with the component name, the way
// every package should log.
func (r *Runtime) Component(name string) *slog.Logger {
	return r.Logger.With("component", name)
}

// Backends are the handles of the shared database and stream store, given
// to the roles that use them when the process is composed. The handles
// exist before any I/O: cmd's backends service connects, migrates and pings
// them and starts before every role service, so a role uses them from its
// Start on. all-in-one's roles get the same Backends, which is how its
// ingest workers read what its API appends.
type Backends struct {
	DB      *db.DB
	Streams streamstore.Store
	// RateLimits counts the Cloud API's rate limits once for every
	// replica, on the stream store's Redis (streamstore.driver=redis); nil
	// with the memory driver, where each process counts its own.
	RateLimits *redislimit.Store
}
