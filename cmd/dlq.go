package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// dlqPage is how many dead letters one read takes.
const dlqPage = 500

// dlqOptions are the flags the dlq subcommands share.
type dlqOptions struct {
	tenant string
	count  int
	all    bool
	dryRun bool
}

// newDLQCmd groups the operator's tools for a tenant's dead-letter stream
// (docs/dlq.md): list it, replay it into the ingestion stream once the
// cause is fixed, or drop it.
func newDLQCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "dlq",
		Short: "List, replay or drop a tenant's dead-lettered telemetry",
		Long: `List, replay or drop the entries of a tenant's dead-letter stream
(tenant:{tenantId}:agent:devices:dlq), where ingest puts telemetry it can
never write. The stream store is the one in the usual configuration
(--config, STREAMSTORE_HOST, STREAMSTORE_PORT, ...). Entries are taken
oldest first; --count limits how many. See docs/dlq.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	c.AddCommand(
		dlqSub("list", "List dead letters with their reasons", false, runDLQList),
		dlqSub("replay", "Append dead letters to the ingestion stream again and remove them from the DLQ", true, runDLQReplay),
		dlqSub("drop", "Remove dead letters for good", true, runDLQDrop),
	)
	return c
}

func dlqSub(name, short string, changes bool, run func(context.Context, *cobra.Command, *config.Config, streamstore.Store, string, dlqOptions) error) *cobra.Command {
	var o dlqOptions
	c := &cobra.Command{
		Use:   name + " --tenant ID",
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tenant, err := parseTenant(o.tenant)
			if err != nil {
				return &usageError{err: err}
			}
			if o.count < 0 {
				return &usageError{err: fmt.Errorf("--count must be 0 (every entry) or more, got %d", o.count)}
			}
			if name == "drop" && o.count == 0 && !o.all {
				return &usageError{err: errors.New("drop needs --count N or --all: dropped telemetry cannot be recovered")}
			}
			cfg, err := loadConfig(cmd, roleSpec{role: config.RoleIngest})
			if err != nil {
				return err
			}
			store, err := openDLQStore(cmd.Context(), cfg.StreamStore)
			if err != nil {
				return err
			}
			defer store.Close()
			// Dead letters written while the command runs (a replayed entry
			// that fails again, say) are left for the next run: the command
			// takes at most what the stream held when it began.
			total, err := store.Len(cmd.Context(), telemetry.DLQStream(tenant))
			if err != nil {
				return fmt.Errorf("length of %s: %w", telemetry.DLQStream(tenant), err)
			}
			if o.count == 0 || int64(o.count) > total {
				o.count = int(total)
			}
			if o.count == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "no dead letters in %s\n", telemetry.DLQStream(tenant))
				return nil
			}
			return run(cmd.Context(), cmd, cfg, store, tenant, o)
		},
	}
	c.Flags().StringVar(&o.tenant, "tenant", "", "tenant id: its UUID or 22-character id (required)")
	c.Flags().IntVar(&o.count, "count", 0, "take only the oldest N entries (0: every entry)")
	if changes {
		c.Flags().BoolVar(&o.dryRun, "dry-run", false, "say what would be done and change nothing")
	}
	if name == "drop" {
		c.Flags().BoolVar(&o.all, "all", false, "drop every entry")
	}
	return c
}

// parseTenant accepts a tenant UUID or its 22-character id and returns
// the id, which names the streams.
func parseTenant(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", errors.New("--tenant is required: the tenant's UUID or 22-character id")
	}
	u, err := codec.ParseIDOrUUID(s)
	if err != nil {
		return "", fmt.Errorf("--tenant must be a tenant UUID or 22-character id, got %q", s)
	}
	return codec.EncodeID(u), nil
}

func openDLQStore(ctx context.Context, sc config.StreamStore) (streamstore.Store, error) {
	if sc.Driver == "memory" {
		return nil, &usageError{err: errors.New("streamstore.driver is memory: all-in-one keeps its streams inside its own process, out of reach of this command")}
	}
	store, err := redisstore.New(redisstore.OptionsFromConfig(sc))
	if err != nil {
		return nil, fmt.Errorf("stream store (%s): %w", config.Label("streamstore.host"), err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := store.Ping(pctx); err != nil {
		_ = store.Close()
		return nil, fmt.Errorf("stream store at %s port %d (%s) does not answer: %w", sc.Host, sc.Port, config.EnvNames("streamstore.host", "streamstore.port"), err)
	}
	return store, nil
}

// eachDeadLetter calls fn with the tenant's dead letters, oldest first, a
// page at a time, up to count entries.
func eachDeadLetter(ctx context.Context, store streamstore.Store, tenant string, count int, fn func([]streamstore.Entry) error) (int, error) {
	start, seen := "-", 0
	for seen < count {
		n := min(dlqPage, count-seen)
		page, err := store.Range(ctx, telemetry.DLQStream(tenant), start, "+", n)
		if err != nil {
			return seen, fmt.Errorf("read %s: %w", telemetry.DLQStream(tenant), err)
		}
		if len(page) == 0 {
			break
		}
		if err := fn(page); err != nil {
			return seen, err
		}
		seen += len(page)
		start = "(" + page[len(page)-1].ID
	}
	return seen, nil
}

func runDLQList(ctx context.Context, cmd *cobra.Command, _ *config.Config, store streamstore.Store, tenant string, o dlqOptions) error {
	out := cmd.OutOrStdout()
	fmt.Fprintln(out, "ID\tORIGINAL ID\tFAILED AT\tBYTES\tREASON")
	n, err := eachDeadLetter(ctx, store, tenant, o.count, func(page []streamstore.Entry) error {
		for _, en := range page {
			v := en.Values
			fmt.Fprintf(out, "%s\t%s\t%s\t%d\t%s\n", en.ID, v["originalId"], v["failedAt"], len(v["data"]), oneLine(v["reason"]))
		}
		return nil
	})
	fmt.Fprintf(cmd.ErrOrStderr(), "%d dead letters listed from %s\n", n, telemetry.DLQStream(tenant))
	return err
}

func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\t", " ").Replace(s)
}

// runDLQReplay appends each dead letter's data to the tenant's ingestion
// stream, where ingest takes it as any other entry, and then trims what it
// appended from the DLQ, a page at a time. A stop half-way leaves at most
// one page appended but not yet trimmed: replayed again, it adds no row,
// since rows are keyed. A full ingestion stream is waited for, as the API
// waits, rather than overfilled.
func runDLQReplay(ctx context.Context, cmd *cobra.Command, cfg *config.Config, store streamstore.Store, tenant string, o dlqOptions) error {
	total := o.count
	progress := cmd.ErrOrStderr()
	verb := "replayed"
	if o.dryRun {
		verb = "would replay"
	}
	done := 0
	_, err := eachDeadLetter(ctx, store, tenant, o.count, func(page []streamstore.Entry) error {
		if o.dryRun {
			done += len(page)
			fmt.Fprintf(progress, "%s %d of %d dead letters\n", verb, done, total)
			return nil
		}
		batch := make([]map[string]string, 0, len(page))
		for _, en := range page {
			batch = append(batch, map[string]string{telemetry.StreamField: en.Values["data"]})
		}
		if err := appendWaiting(ctx, store, progress, telemetry.IngestionStream(tenant), batch, int64(cfg.StreamStore.IngestionStreamMaxLen)); err != nil {
			return err
		}
		if err := trimThrough(ctx, store, telemetry.DLQStream(tenant), page[len(page)-1].ID); err != nil {
			return fmt.Errorf("appended %d dead letters to %s but could not remove them from the DLQ (a new replay adds no row twice): %w",
				len(page), telemetry.IngestionStream(tenant), err)
		}
		done += len(page)
		fmt.Fprintf(progress, "%s %d of %d dead letters\n", verb, done, total)
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s %d dead letters of tenant %s into %s\n", verb, done, tenant, telemetry.IngestionStream(tenant))
	return nil
}

// appendWaiting appends batch, waiting while the stream is full.
func appendWaiting(ctx context.Context, store streamstore.Store, progress io.Writer, stream string, batch []map[string]string, maxLen int64) error {
	for waited := false; ; {
		_, err := store.AddBatch(ctx, stream, batch, maxLen)
		if !errors.Is(err, streamstore.ErrStreamFull) {
			if err != nil {
				return fmt.Errorf("append to %s: %w", stream, err)
			}
			return nil
		}
		if !waited {
			fmt.Fprintf(progress, "%s is full (%s %d); waiting for ingest to make room\n", stream, config.EnvNames("streamstore.ingestion_stream_maxlen"), maxLen)
			waited = true
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// trimThrough removes the entries of stream up to and including id.
func trimThrough(ctx context.Context, store streamstore.Store, stream, id string) error {
	next, err := streamstore.NextID(id)
	if err != nil {
		return err
	}
	_, err = store.TrimMinID(ctx, stream, next)
	return err
}

func runDLQDrop(ctx context.Context, cmd *cobra.Command, _ *config.Config, store streamstore.Store, tenant string, o dlqOptions) error {
	var last string
	n, err := eachDeadLetter(ctx, store, tenant, o.count, func(page []streamstore.Entry) error {
		last = page[len(page)-1].ID
		return nil
	})
	if err != nil {
		return err
	}
	if o.dryRun {
		fmt.Fprintf(cmd.OutOrStdout(), "would drop %d dead letters of tenant %s, through %s\n", n, tenant, last)
		return nil
	}
	if err := trimThrough(ctx, store, telemetry.DLQStream(tenant), last); err != nil {
		return fmt.Errorf("drop dead letters of %s: %w", tenant, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "dropped %d dead letters of tenant %s, through %s\n", n, tenant, last)
	return nil
}
