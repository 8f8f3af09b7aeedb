package cmd

import (
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newServeAPICmd() *cobra.Command {
	spec := roleSpec{
		role:     config.RoleAPI,
		flagKeys: map[string]string{"port": "api.port", "bind": "api.bind"},
		build: func(cfg *config.Config, r *rt.Runtime) ([]lifecycle.Service, error) {
			b, err := newBackends(cfg, r)
			if err != nil {
				return nil, err
			}
			svcs, err := api.New(cfg, r, b.handles(), api.Options{PortHint: "--port or " + config.EnvNames("api.port")})
			if err != nil {
				return nil, err
			}
			return append([]lifecycle.Service{b}, svcs...), nil
		},
	}
	return roleCommand("serve-api", "Run the Cloud API (REST under /api/v1, health, metrics)",
		`Run the Cloud API: the REST API under /api/v1 plus GET /health, GET /metrics
and GET /. Configure it with --config, environment variables (DB_HOST, PORT,
...) or flags; see docs/configuration.md.`,
		spec, func(fs *pflag.FlagSet) {
			addKeyFlag(fs, "port", "api.port", config.RoleAPI, "HTTP port")
			addKeyFlag(fs, "bind", "api.bind", config.RoleAPI, "HTTP listen address")
		})
}
