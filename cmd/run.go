package cmd

import (
	"fmt"
	"log/slog"
	"maps"
	"os/signal"
	"syscall"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// roleSpec describes one role command: which flags set which keys, and how
// to build the role's services from the loaded config.
type roleSpec struct {
	role     string
	flagKeys map[string]string
	build    func(cfg *config.Config, r *rt.Runtime) ([]lifecycle.Service, error)
}

// configError is a usage error with the role in its heading, printed with
// one line per problem.
type configError struct {
	role string
	err  error
}

func (e *configError) Error() string {
	return fmt.Sprintf("%s: invalid configuration: %v", e.role, e.err)
}
func (e *configError) Unwrap() error { return e.err }

// loadConfig loads the role's config from --config, env and flags.
func loadConfig(cmd *cobra.Command, spec roleSpec) (*config.Config, error) {
	file, err := cmd.Flags().GetString("config")
	if err != nil {
		panic("BUG: --config flag missing: " + err.Error())
	}
	keys := maps.Clone(persistentFlagKeys)
	maps.Copy(keys, spec.flagKeys)
	cfg, err := config.Load(config.LoadOptions{Role: spec.role, File: file, Flags: cmd.Flags(), FlagKeys: keys})
	if err != nil {
		return nil, &configError{role: spec.role, err: err}
	}
	return cfg, nil
}

// runRole is the body of every role command.
func runRole(cmd *cobra.Command, spec roleSpec) error {
	cfg, err := loadConfig(cmd, spec)
	if err != nil {
		return err
	}
	if pc, _ := cmd.Flags().GetBool("print-config"); pc {
		// Warnings go to stderr, so the printed configuration stays valid
		// YAML on stdout.
		for _, w := range cfg.EnvWarnings() {
			fmt.Fprintf(cmd.ErrOrStderr(), "edgeplat %s: warning: environment variable %s\n", spec.role, w)
		}
		for _, w := range cfg.FileWarnings() {
			fmt.Fprintf(cmd.ErrOrStderr(), "edgeplat %s: warning: %s\n", spec.role, w)
		}
		return cfg.WritePrintable(cmd.OutOrStdout())
	}

	level, err := logging.ParseLevel(cfg.Log.Level)
	if err != nil {
		return &configError{role: spec.role, err: err}
	}
	lv := new(slog.LevelVar)
	lv.Set(level)
	log, err := logging.New(cmd.ErrOrStderr(), lv, cfg.Log.Format)
	if err != nil {
		return &configError{role: spec.role, err: err}
	}
	for _, w := range cfg.EnvWarnings() {
		attrs := []any{"var", w.Var, "reason", w.Reason}
		if w.DidYouMean != "" {
			attrs = append(attrs, "did_you_mean", w.DidYouMean)
		}
		log.Warn("environment variable not read", attrs...)
	}
	for _, w := range cfg.FileWarnings() {
		log.Warn(w)
	}
	r := &rt.Runtime{Logger: log, Metrics: metrics.NewRegistry(), Health: health.New(2 * time.Second), Level: lv}

	services, err := spec.build(cfg, r)
	if err != nil {
		return &configError{role: spec.role, err: err}
	}

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bi := buildinfo.Get()
	log.Info("starting", "role", spec.role, "version", bi.Version, "commit", bi.Commit)
	t0 := time.Now()
	err = lifecycle.Run(ctx, lifecycle.Options{Logger: log, GracePeriod: cfg.Lifecycle.ShutdownGrace}, services...)
	if err != nil {
		log.Error("stopped on failure", "role", spec.role, "err", err)
		return &exitError{code: exitFailure, err: err}
	}
	log.Info("stopped", "role", spec.role, "ran", time.Since(t0).Round(time.Millisecond))
	return nil
}

// addKeyFlag defines a flag whose default and help come from the config key,
// so --help always shows the default the role really uses.
func addKeyFlag(fs *pflag.FlagSet, flag, key, role, usage string) {
	k, ok := config.KeyByName(key)
	if !ok {
		panic("BUG: flag --" + flag + " for unknown key " + key)
	}
	def := k.Default
	if d, ok := k.RoleDefaults[role]; ok {
		def = d
	}
	// Name only what this role reads: all-in-one's ports, for one, take
	// no PORT.
	if envs := k.EnvFor(role); len(envs) > 0 {
		usage = fmt.Sprintf("%s (%s)", usage, envs[0])
	} else {
		usage = fmt.Sprintf("%s (%s in --config; %s is not read by %s)", usage, k.Name, k.Env, role)
	}
	switch k.Kind {
	case config.Int:
		fs.Int(flag, def.(int), usage)
	case config.Bool:
		fs.Bool(flag, def.(bool), usage)
	default:
		fs.String(flag, fmt.Sprint(def), usage)
	}
}

// roleCommand builds the cobra command for a role.
func roleCommand(use, short, long string, spec roleSpec, flags func(fs *pflag.FlagSet)) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRole(cmd, spec)
		},
	}
	if flags != nil {
		flags(c.Flags())
	}
	return c
}
