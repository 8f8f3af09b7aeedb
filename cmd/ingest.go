package cmd

import (
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/ingest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newIngestCmd() *cobra.Command {
	spec := roleSpec{
		role:     config.RoleIngest,
		flagKeys: map[string]string{"port": "ingest.port", "bind": "ingest.bind", "profile": "ingest.profile"},
		build: func(cfg *config.Config, r *rt.Runtime) ([]lifecycle.Service, error) {
			b, err := newBackends(cfg, r)
			if err != nil {
				return nil, err
			}
			svcs, err := ingest.New(cfg, r, b.handles(), ingest.Options{PortHint: "--port or " + config.EnvNames("ingest.port")})
			if err != nil {
				return nil, err
			}
			return append([]lifecycle.Service{b}, svcs...), nil
		},
	}
	return roleCommand("ingest", "Run the ingestion service (stream store to readings table)",
		`Run the ingestion service. It serves only GET /health and GET /metrics.
The ingestion profile (--profile, INGESTION_PROFILE) sets worker, batch and
insert defaults; any single variable overrides its profile value.`,
		spec, func(fs *pflag.FlagSet) {
			addKeyFlag(fs, "port", "ingest.port", config.RoleIngest, "HTTP port for /health and /metrics")
			addKeyFlag(fs, "bind", "ingest.bind", config.RoleIngest, "HTTP listen address")
			addKeyFlag(fs, "profile", "ingest.profile", config.RoleIngest, "ingestion profile: batch, balanced, streaming, benchmark, hp or none")
		})
}
