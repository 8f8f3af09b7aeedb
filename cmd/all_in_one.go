package cmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edgeplat/edgeplat/cmd/internal/autoprovision"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/agent"
	"github.com/edgeplat/edgeplat/roles/agent/simulation"
	"github.com/edgeplat/edgeplat/roles/api"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/broker"
	"github.com/edgeplat/edgeplat/roles/ingest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

func newAllInOneCmd() *cobra.Command {
	// The command is built below; build runs only once it executes, and
	// prints a generated admin password to the command's own output.
	var c *cobra.Command
	spec := roleSpec{
		role: config.RoleAllInOne,
		flagKeys: map[string]string{
			"data-dir":       "all_in_one.data_dir",
			"api-port":       "api.port",
			"ingest-port":    "ingest.port",
			"agent-port":     "agent.port",
			"mqtt-port":      "all_in_one.mqtt_port",
			"auto-provision": "all_in_one.auto_provision",
		},
		build: func(cfg *config.Config, r *rt.Runtime) ([]lifecycle.Service, error) {
			scenario, err := simulateFlag(c.Flags())
			if err != nil {
				return nil, err
			}
			if scenario != "" {
				cfg.Agent.SimulationMode = true
			}
			return buildAllInOneWith(cfg, r, c.OutOrStdout(), scenario)
		},
	}
	c = roleCommand("all-in-one", "Run every role in one process with an embedded MQTT broker",
		`Run the embedded MQTT broker and every role in one process, on embedded
defaults only: SQLite files and agent state under --data-dir, an in-process
stream store, and the broker on --mqtt-port. Needs no external service; meant
for laptops, demos and trials. Ctrl-C stops it cleanly.

On start it provisions its own agent against its own Cloud API, unless the
agent is provisioned already or --auto-provision=false: it creates the first
admin (EDGEPLAT_ADMIN_EMAIL, EDGEPLAT_ADMIN_PASSWORD; without a password a
random one is printed once), logs in, creates a provisioning key and hands it
to the agent. The two variables only create the first admin: on a data
directory that has one, it is kept and a warning says so; start fresh with
an empty --data-dir.

--simulate[=scenario] turns the agent's simulation mode on and starts a
scenario (default steady) once the agent runs, so its simulated devices'
readings reach the cloud without a Modbus server (docs/simulation.md).`,
		spec, func(fs *pflag.FlagSet) {
			role := config.RoleAllInOne
			addKeyFlag(fs, "data-dir", "all_in_one.data_dir", role, "directory for SQLite files and agent state")
			addKeyFlag(fs, "api-port", "api.port", role, "Cloud API port")
			addKeyFlag(fs, "ingest-port", "ingest.port", role, "ingestion service port")
			addKeyFlag(fs, "agent-port", "agent.port", role, "agent API port")
			addKeyFlag(fs, "mqtt-port", "all_in_one.mqtt_port", role, "embedded MQTT broker port")
			addKeyFlag(fs, "auto-provision", "all_in_one.auto_provision", role, "provision the built-in agent against the built-in Cloud API at start")
			fs.String("simulate", "", "turn simulation mode on (SIMULATION_MODE) and start this scenario: "+strings.Join(simulation.Names(), ", "))
			fs.Lookup("simulate").NoOptDefVal = "steady"
		})
	return c
}

// buildAllInOne lists the services in start order: the data directory, the
// shared SQLite database and in-process stream store, the writer of the
// broker's refusals to the audit log, the broker, which must own its port
// before anything dials it, then each role, then the agent's
// auto-provisioning, which talks to the roles. They stop in reverse order.
// A generated admin password is shown on out.
func buildAllInOne(cfg *config.Config, r *rt.Runtime, out io.Writer) ([]lifecycle.Service, error) {
	return buildAllInOneWith(cfg, r, out, "")
}

// simulateFlag is --simulate's scenario, empty when the flag is not
// given; an unknown scenario is an error naming the flag.
func simulateFlag(fs *pflag.FlagSet) (string, error) {
	name, err := fs.GetString("simulate")
	if err != nil || !fs.Changed("simulate") {
		return "", err
	}
	if _, ok := simulation.Lookup(name); !ok {
		return "", fmt.Errorf("--simulate: unknown scenario %q (one of %s)", name, strings.Join(simulation.Names(), ", "))
	}
	return name, nil
}

// buildAllInOneWith is buildAllInOne whose agent starts scenario (none
// when empty) once it runs.
func buildAllInOneWith(cfg *config.Config, r *rt.Runtime, out io.Writer, scenario string) ([]lifecycle.Service, error) {
	dataDir := &lifecycle.Funcs{
		ServiceName: "data-dir",
		StartFunc: func(context.Context) error {
			if err := os.MkdirAll(cfg.AllInOne.DataDir, 0o700); err != nil {
				return fmt.Errorf("create data directory (--data-dir): %w", err)
			}
			return nil
		},
	}
	back, err := newBackends(cfg, r)
	if err != nil {
		return nil, err
	}
	if err := ensureJWTSecret(cfg, cfg.AllInOne.DataDir); err != nil {
		return nil, err
	}
	if err := ensureServiceUser(cfg, cfg.AllInOne.DataDir); err != nil {
		return nil, err
	}
	if cfg.Licence.Key == "" {
		// A laptop or demo install is not restricted: all-in-one signs
		// itself a licence labelled as a local demo (docs/licence.md).
		lic, err := licence.Demo(cfg.AllInOne.DataDir)
		if err != nil {
			return nil, fmt.Errorf("demo licence: %w", err)
		}
		cfg.Licence = lic
	}
	// One authorizer for the embedded broker and the API: devices connect
	// with the credentials registration hands out, and revoking a key in
	// the API is seen by the broker at once.
	ba, err := api.NewBrokerAuth(cfg, r, back.db)
	if err != nil {
		return nil, err
	}
	brk, err := broker.New(broker.Options{Bind: cfg.AllInOne.MQTTBind, Port: cfg.AllInOne.MQTTPort, PortHint: "--mqtt-port",
		Auth: ba.Authorizer, Limits: broker.LimitsFromConfig(cfg.AllInOne)}, r)
	if err != nil {
		return nil, err
	}
	// The broker-auth audit writer stops after the broker (its refusals
	// up to the end are recorded) and before the database.
	services := []lifecycle.Service{dataDir, back, ba, brk}

	apiSvcs, err := api.New(cfg, r, back.handles(), api.Options{PortHint: "--api-port", BrokerAuth: ba, BrokerStats: embeddedBrokerStats{brk}})
	if err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	ingestSvcs, err := ingest.New(cfg, r, back.handles(), ingest.Options{PortHint: "--ingest-port"})
	if err != nil {
		return nil, fmt.Errorf("ingest: %w", err)
	}
	agentSvcs, err := agent.New(cfg, r, agent.Options{PortHint: "--agent-port", Simulate: scenario})
	if err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	services = append(services, apiSvcs...)
	services = append(services, ingestSvcs...)
	services = append(services, agentSvcs...)
	if cfg.AllInOne.AutoProvision {
		services = append(services, autoprovision.Service(cfg, r, back.db, out))
	}
	return services, nil
}
