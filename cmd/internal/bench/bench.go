// Package bench measures the platform against real backends: the ingest
// role (bench ingest), MQTT to committed rows through the api and ingest
// roles (bench pipeline), the same through several serve-api and ingest
// processes with crashes (bench cluster), and the edge agent's footprint
// (bench agent), and the pipeline's load alone for measuring another
// collector on it (bench publish). cmd parses the flags and calls
// RunIngest, RunPipeline, RunCluster, RunAgent or RunPublish; see
// docs/benchmarks.md and docs/scaling.md.
package bench

import (
	"io"

	"github.com/edgeplat/edgeplat/config"
)

// Env is what a benchmark takes from the command line besides its options.
type Env struct {
	// Load loads role's configuration from --config, the environment and
	// the flags; a profile that is not empty is applied as if given by
	// --profile (which only the ingest role's configuration reads).
	Load func(role, profile string) (*config.Config, error)
	// ProfileSet is whether --profile was given.
	ProfileSet bool
	// PrintConfig prints the effective configuration instead of running.
	PrintConfig bool
	// Stdout takes the results, Stderr the progress and the logs.
	Stdout, Stderr io.Writer
}

// UsageError is an error the operator fixes in the flags or the settings
// before trying again.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// ConfigError is a configuration that does not load, for the benchmark
// Role ("bench ingest", "bench pipeline").
type ConfigError struct {
	Role string
	Err  error
}

func (e *ConfigError) Error() string { return e.Role + ": invalid configuration: " + e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }
