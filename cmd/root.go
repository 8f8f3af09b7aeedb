// Package cmd holds the cobra commands and is the composition root: with its
// internal packages (the benchmarks, all-in-one's auto-provisioning), the
// only code that imports several roles. Each role command loads the config,
// builds the runtime and hands the role's services to the lifecycle runner;
// all-in-one lists every service explicitly.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/spf13/cobra"
)

// Exit codes: 1 for a failure while running, 2 for bad input (flags,
// configuration) that the operator must fix before trying again.
const (
	exitFailure = 1
	exitUsage   = 2
)

// exitError carries an exit code for an error that has already been
// reported (logged once by the lifecycle runner), so Execute prints nothing.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// usageError marks errors the operator must fix in flags or configuration.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// Execute runs the command line and returns the process exit code.
func Execute() int {
	return execute(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	var ce *configError
	if errors.As(err, &ce) {
		// One line per problem, so every one can be fixed in one go.
		lines := strings.Split(ce.err.Error(), "\n")
		if len(lines) == 1 {
			fmt.Fprintf(stderr, "edgeplat %s: invalid configuration: %s\n", ce.role, lines[0])
		} else {
			fmt.Fprintf(stderr, "edgeplat %s: invalid configuration (%d problems):\n  - %s\n", ce.role, len(lines), strings.Join(lines, "\n  - "))
		}
		return exitUsage
	}
	fmt.Fprintf(stderr, "edgeplat: %s\n", err)
	var ue *usageError
	if errors.As(err, &ue) || isCobraUsageError(err) {
		return exitUsage
	}
	return exitFailure
}

// isCobraUsageError recognises cobra's argument and command errors, which it
// returns as plain errors.
func isCobraUsageError(err error) bool {
	msg := err.Error()
	for _, s := range []string{"unknown command", "unknown flag", "accepts ", "requires at least", "invalid argument", "required flag"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "edgeplat",
		Short: "Industrial IoT edge-to-cloud platform in one binary",
		Long: `edgeplat is an industrial IoT edge-to-cloud platform in one binary. The
subcommand picks the role this process plays: the Cloud API (serve-api), the
ingestion service (ingest), the edge agent (agent), or all of them with an
embedded MQTT broker (all-in-one).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --version prints what `edgeplat version` prints.
		Version: buildinfo.Get().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	// cobra's `completion bash|zsh|fish|powershell`, listed with the tools
	// because the packages install its output (docs/packaging.md).
	root.SetCompletionCommandGroupID("tools")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &usageError{err: err} })
	root.PersistentFlags().String("config", "", "YAML configuration file (keys as in docs/configuration.md)")
	root.PersistentFlags().Bool("print-config", false, "print the effective configuration (secrets masked) and exit")
	root.PersistentFlags().String("log-level", "info", "log level: debug, info, warn or error")
	root.PersistentFlags().String("log-format", "auto", "log format: auto, text or json")
	root.AddGroup(&cobra.Group{ID: "roles", Title: "Roles:"}, &cobra.Group{ID: "tools", Title: "Tools:"})

	for _, c := range []*cobra.Command{newServeAPICmd(), newIngestCmd(), newAgentCmd(), newAllInOneCmd()} {
		c.GroupID = "roles"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{newVersionCmd(), newCodecCmd(), newTokenCmd(), newLicenseCmd(), newBenchCmd(), newDLQCmd(), newManCmd(), newHealthcheckCmd()} {
		c.GroupID = "tools"
		root.AddCommand(c)
	}
	root.SetHelpCommandGroupID("tools")
	return root
}

// persistentFlagKeys binds the root's flags to config keys for every role.
var persistentFlagKeys = map[string]string{
	"log-level":  "log.level",
	"log-format": "log.format",
}
