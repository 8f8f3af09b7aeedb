package cmd

import (
	"os"
	"runtime/debug"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/agent"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// agentGCPercent is the agent's GC target unless GOGC is set.
const agentGCPercent = 50

func newAgentCmd() *cobra.Command {
	spec := roleSpec{
		role:     config.RoleAgent,
		flagKeys: map[string]string{"port": "agent.port", "data-dir": "agent.data_dir", "security-mode": "agent.security_mode"},
		build: func(cfg *config.Config, r *rt.Runtime) ([]lifecycle.Service, error) {
			// A device's memory is scarcer than its CPU: at half the
			// default GC target the agent's heap stays about 2 MB smaller
			// for no measurable CPU (docs/benchmarks.md). GOGC overrides.
			if os.Getenv("GOGC") == "" {
				debug.SetGCPercent(agentGCPercent)
			}
			return agent.New(cfg, r, agent.Options{PortHint: "--port or " + config.EnvNames("agent.port"), ReleaseStartupPages: true})
		},
	}
	return roleCommand("agent", "Run the edge agent (local API on 127.0.0.1:48484)",
		`Run the edge agent on a device. In LOCALHOST_ONLY mode (the default) its API
listens on 127.0.0.1 only; API_SECURITY_MODE=API_KEY with API_KEY set listens
on every interface and requires the key in X-Api-Key.`,
		spec, func(fs *pflag.FlagSet) {
			addKeyFlag(fs, "port", "agent.port", config.RoleAgent, "local API port")
			addKeyFlag(fs, "data-dir", "agent.data_dir", config.RoleAgent, "state directory")
			addKeyFlag(fs, "security-mode", "agent.security_mode", config.RoleAgent, "LOCALHOST_ONLY or API_KEY")
		})
}
