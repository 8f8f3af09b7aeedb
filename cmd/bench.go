package cmd

import (
	"context"
	"errors"
	"io"
	"maps"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/edgeplat/edgeplat/cmd/internal/bench"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
)

func newBenchCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "bench",
		Short: "Measure throughput against real Redis and PostgreSQL",
		Long: `Measure throughput against the real Redis and PostgreSQL named by the usual
configuration (flags, environment, --config). Benchmarks create their own
tenant and tables and remove them afterwards.`,
		Args: cobra.NoArgs,
	}
	c.AddCommand(newBenchIngestCmd())
	c.AddCommand(newBenchPipelineCmd())
	c.AddCommand(newBenchAgentCmd())
	c.AddCommand(newBenchClusterCmd())
	c.AddCommand(newBenchPublishCmd())
	return c
}

func newBenchIngestCmd() *cobra.Command {
	var o bench.IngestOptions
	c := &cobra.Command{
		Use:   "ingest",
		Short: "Readings/s from stream to committed rows, against the COPY ceiling",
		Long: `Measure the ingestion service end to end on real Redis and PostgreSQL.

For each selected ingestion profile, on a fresh random tenant:
  1. preload --messages stream entries of --readings readings each into the
     tenant's ingestion stream (tenant:{id}:agent:devices:ingestion), from
     --agents agents with --devices devices each, every (agent, metric, time)
     key distinct;
  2. run the ingest role in this process exactly as "edgeplat ingest" does
     (same services, workers, autoscaler, writer), except that its stream
     discovery sees only the bench tenant, so no other tenant's stream is
     ever read;
  3. time from start until the consumer group has delivered and
     acknowledged every entry (workers acknowledge only after the commit),
     then check that the table holds exactly messages x readings rows.
Readings/s is rows / elapsed. Peak RSS is the process's high-water mark
(VmHWM), reset just before the workers start: workers plus the bench's own
Redis client, without the preloaded data, which is generated in chunks.

Once per run, the ceiling: pgx CopyFrom of the same rows (generated the same
way, sorted by key) in 10000-row batches over one connection, straight into
an empty copy of readings (bench_ceiling_<random>, dropped afterwards).
Only the COPY calls are timed. Ratio = readings/s / ceiling rows/s; the
target with the benchmark profile is a ratio of at least 0.8.

The profile comes from --profile or INGESTION_PROFILE as for "edgeplat
ingest", and every variable (WORKER_COUNT, BATCH_SIZE, DB_POOL_SIZE, ...)
overrides it; --profiles all (or a comma list) runs several profiles in one
invocation. The bench tenant's stream and rows are deleted at the end unless
--keep is given; nothing else in the database or stream store is changed
(the schema is migrated, as "edgeplat ingest" would).
Progress goes to stderr, results to stdout. Logs are quiet (warnings only)
unless --log-level debug.

Run it on a database and a Redis database of its own (DB_NAME,
STREAMSTORE_DB): the ceiling is measured on an empty table, so a big
readings table skews the ratio, and a live ingest service on the same Redis
database would discover the bench stream and compete for it. With several
profiles, --vacuum keeps one profile's deleted rows from slowing the next.
Short runs are noisy: 20000 messages give steadier figures. See
docs/benchmarks.md.`,
		Example: `  createdb -h 127.0.0.1 -U postgres edgeplat_bench
  export DB_HOST=127.0.0.1 DB_USER=postgres DB_NAME=edgeplat_bench STREAMSTORE_HOST=127.0.0.1 STREAMSTORE_DB=5
  edgeplat bench ingest --profiles all --vacuum
  edgeplat bench ingest --profile benchmark --messages 20000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, env bench.Env) error { return bench.RunIngest(ctx, o, env) })
		},
	}
	f := c.Flags()
	f.IntVar(&o.Messages, "messages", 2000, "stream entries (telemetry messages) to preload per profile")
	f.IntVar(&o.Readings, "readings", 50, "readings per message")
	f.IntVar(&o.Agents, "agents", 10, "distinct agents the messages come from")
	f.IntVar(&o.Devices, "devices", 4, "devices per agent")
	addKeyFlag(f, "profile", "ingest.profile", config.RoleIngest, "ingestion profile to measure")
	f.StringVar(&o.Profiles, "profiles", "", `several profiles in one run: "all" or a comma list (instead of --profile)`)
	f.BoolVar(&o.Keep, "keep", false, "keep the bench tenants' streams and rows (the ceiling table is always dropped)")
	f.BoolVar(&o.Vacuum, "vacuum", false, "VACUUM FULL readings and CHECKPOINT after removing each profile's rows, so every profile starts from the same table (only for a dedicated bench database: it locks and rewrites the table)")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up on a profile whose ingest has not finished after this long")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of each ingest run to this file (FILE.<profile> with several profiles)")
	f.IntVar(&o.AnomalyRules, "anomaly-rules", 0, "also run each profile with this many z-score rules judged by the cloud anomaly evaluator in this process, and report readings/s with and without")
	f.BoolVar(&o.AnomalyScores, "anomaly-scores", false, "give every reading an edge anomaly score (stored in readings.anomaly_score)")
	return c
}

func newBenchPipelineCmd() *cobra.Command {
	var o bench.PipelineOptions
	c := &cobra.Command{
		Use:   "pipeline",
		Short: "Readings/s from MQTT publishers through serve-api and ingest to committed rows",
		Long: `Measure the whole telemetry write path on the real Mosquitto, Redis and
PostgreSQL: publishers -> broker -> serve-api pipeline -> ingestion stream ->
ingest -> rows.

On a fresh random tenant:
  1. run the serve-api role (HTTP server, pipeline, MQTT subscriber with a
     unique client id and no shared-subscription group) and the ingest role
     (discovering only the bench tenant's streams) in this process, sharing
     one Runtime, both HTTP servers on free ports of 127.0.0.1;
  2. encode --publishers x --messages custom envelopes of --readings
     readings each (one device per message, every (agent, metric, time) key
     distinct, msgId v2_<kid>_<seq>) in --format, before timing;
  3. publish them at QoS 1 to i/{tenant}/a/{agent}/endpoints/modbus from
     --publishers MQTT clients, one agent each, at --rate messages/s in
     total (0: as fast as the broker acknowledges);
  4. meanwhile a latency probe publishes one one-reading message every
     --probe-interval and polls PostgreSQL every 10 ms until its row is
     visible;
  5. time from the first publish until every row is committed (the ingest
     role has inserted them all and the consumer group has nothing
     undelivered or pending), then check the table holds exactly the rows
     published.
Messages/s and readings/s are end to end. The backlog, sampled every
second, is the messages the broker acknowledged but has not delivered to the
subscriber yet plus the bench stream's undelivered and unacknowledged
entries (one per message); "drain" is
the time from the last publish acknowledgement to the last commit: a
backlog that grows while publishing shows up as a long drain. Probe latency
is publish -> row visible to a query, p50/p99; run with --rate at half the
measured maximum for the latency target.

Unless --no-ingest-only, the same run first measures the ingestion-only
rate as "edgeplat bench ingest" does (same rows preloaded into another fresh
tenant's stream, same ingest profile) and prints ratio = end-to-end /
ingestion-only readings/s.

The serve-api MQTT client subscribes to every tenant's agent topics
(i/+/a/+/...), as serve-api does; other tenants' traffic on the broker is
decoded and appended to their own streams as serve-api would, and is not
counted. Run it against a broker and Redis database of its own. The bench
tenants' streams, msgId de-duplication keys, rows and the subscriber's
broker session are removed at the end unless --keep. Progress goes to
stderr, results to stdout. See docs/benchmarks.md.`,
		Example: `  export DB_HOST=127.0.0.1 DB_USER=postgres DB_NAME=edgeplat_bench STREAMSTORE_HOST=127.0.0.1 STREAMSTORE_DB=5 MQTT_BROKER_URL=tcp://127.0.0.1:1883
  edgeplat bench pipeline --publishers 4 --messages 5000 --profile benchmark
  edgeplat bench pipeline --messages 5000 --rate 1500 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, env bench.Env) error { return bench.RunPipeline(ctx, o, env) })
		},
	}
	f := c.Flags()
	f.IntVar(&o.Publishers, "publishers", 4, "MQTT publishers, one agent each")
	f.IntVar(&o.Messages, "messages", 2000, "messages per publisher")
	f.IntVar(&o.Readings, "readings", 50, "readings per message")
	f.StringVar(&o.Format, "format", string(codec.FormatMsgpackDeflate), "payload format: json, msgpack, json+deflate, msgpack+deflate")
	f.Float64Var(&o.Rate, "rate", 0, "messages/s over all publishers; 0 publishes as fast as the broker acknowledges")
	f.DurationVar(&o.ProbeEvery, "probe-interval", 100*time.Millisecond, "interval of the latency probe's messages")
	f.BoolVar(&o.NoIngestOnly, "no-ingest-only", false, "skip the ingestion-only measurement")
	f.IntVar(&o.Rounds, "rounds", 1, "measure this many times, each round an ingestion-only run followed by an end-to-end run, and report the medians (a shared host's speed drifts; adjacent pairs compare fairly)")
	f.BoolVar(&o.Vacuum, "vacuum", false, "VACUUM FULL readings and CHECKPOINT after removing each phase's rows, so both phases (and the next run) start from the same table (only for a dedicated bench database: it locks and rewrites the table)")
	addKeyFlag(f, "profile", "ingest.profile", config.RoleIngest, "ingestion profile of the ingest role")
	f.BoolVar(&o.Keep, "keep", false, "keep the bench tenants' streams, de-duplication keys and rows")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up when the rows are not all committed after this long")
	f.DurationVar(&o.StallAfter, "stall-after", 30*time.Second, "once everything is published, fail when no message or row has moved for this long (a broker that dropped acknowledged messages); 0 waits until --timeout")
	f.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the pipeline run (both roles and the publishers) to this file")
	return c
}

func newBenchClusterCmd() *cobra.Command {
	var o bench.ClusterOptions
	c := &cobra.Command{
		Use:   "cluster",
		Short: "Several serve-api and ingest processes under a steady load, SIGKILLs included: rows exactly once",
		Long: `Run --api serve-api and --ingest ingest processes of this binary as child
processes against the real Mosquitto, Redis and PostgreSQL, drive a steady
QoS 1 load through them and check that every message the broker
acknowledged became its rows exactly once.

For each run:
  1. create a fresh database next to the configured one (DB_NAME's server,
     edgeplat_cluster_<random>; the user needs CREATEDB) and migrate it;
  2. start the children on free ports of 127.0.0.1: every serve-api with
     its own MQTT client id (a persistent session) in one shared
     subscription group ($share/<group>/...), every ingest process in the
     tenant stream's consumer group, with RECLAIM_IDLE_MS from
     --reclaim-idle; the configured database server, Redis database and
     broker are passed on as environment;
  3. encode --rate x --duration messages of --readings readings (known
     msgIds, every (agent, device, time) distinct) for --publishers agents
     of a fresh tenant, and publish them at QoS 1 at --rate messages/s;
  4. with --kill, SIGKILL (--kill-signal TERM: SIGTERM, a graceful stop)
     the first serve-api and the first ingest process
     at --kill-at of --duration and, with --restart (the default), start
     them again --restart-after later (the serve-api with the same client
     id, so the broker delivers what it queued for its session);
  5. wait until the rows of every acknowledged message are committed and
     the consumer group has nothing pending, then count the rows message by
     message: missing, partial and duplicate rows are reported, and any of
     them fails the command (exit status 1).
--compare runs 1+1 first and then --api+--ingest. CPU per message is the
children's CPU (from /proc, killed ones from their rusage) plus the local
postgres, redis-server and mosquitto processes' (by command name, so other
work on those services counts too), over the broker-acknowledged messages;
the publishers run in this process and are reported apart (--json).

The ingest children consume every tenant stream of the Redis database, so
the bench refuses a database that holds other ingestion streams: give it
one of its own (STREAMSTORE_DB). A broker with Mosquitto's defaults
(max_queued_messages 1000) drops acknowledged messages for a subscriber
that falls behind or is restarting; --own-broker starts a private
mosquitto with the settings of docs/scaling.md. The run's database, the
tenant's streams and msgId keys, and the serve-api sessions are removed at
the end unless --keep. Progress goes to stderr, results to stdout. See
docs/benchmarks.md and docs/scaling.md.`,
		Example: `  export DB_HOST=127.0.0.1 DB_USER=postgres STREAMSTORE_HOST=127.0.0.1 STREAMSTORE_DB=11
  edgeplat bench cluster --api 2 --ingest 2 --own-broker
  edgeplat bench cluster --compare --kill --duration 60s --rate 1000 --own-broker --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, env bench.Env) error { return bench.RunCluster(ctx, o, env) })
		},
	}
	f := c.Flags()
	f.IntVar(&o.API, "api", 2, "serve-api processes")
	f.IntVar(&o.Ingest, "ingest", 2, "ingest processes")
	f.IntVar(&o.Publishers, "publishers", 4, "MQTT publishers, one agent each")
	f.Float64Var(&o.Rate, "rate", 1000, "messages/s over all publishers")
	f.DurationVar(&o.Duration, "duration", 60*time.Second, "how long the load lasts: --rate x --duration messages")
	f.IntVar(&o.Readings, "readings", 10, "readings per message")
	f.StringVar(&o.Format, "format", string(codec.FormatMsgpackDeflate), "payload format: json, msgpack, json+deflate, msgpack+deflate")
	f.BoolVar(&o.Kill, "kill", false, "SIGKILL one serve-api and one ingest process mid-run")
	f.Float64Var(&o.KillAt, "kill-at", 0.5, "when to kill, as a fraction of --duration")
	f.StringVar(&o.KillSignal, "kill-signal", "KILL", "with --kill, how: KILL (a crash) or TERM (a graceful stop, as a scale-down)")
	f.BoolVar(&o.Restart, "restart", true, "with --kill, start the killed processes again")
	f.DurationVar(&o.RestartAfter, "restart-after", 2*time.Second, "with --kill, how long the killed processes stay down")
	f.BoolVar(&o.Compare, "compare", false, "run 1+1 first, then --api+--ingest, and report both")
	f.BoolVar(&o.OwnBroker, "own-broker", false, "start a private mosquitto on a free port with the settings of docs/scaling.md instead of using MQTT_BROKER_URL")
	f.DurationVar(&o.ReclaimIdle, "reclaim-idle", 5*time.Second, "RECLAIM_IDLE_MS of the ingest processes: how soon a killed one's entries are taken over")
	addKeyFlag(f, "profile", "ingest.profile", config.RoleIngest, "ingestion profile of the ingest processes")
	f.BoolVar(&o.Keep, "keep", false, "keep the run's database, streams, msgId keys and the processes' logs")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up when the rows are not all committed after this long")
	f.DurationVar(&o.StallAfter, "stall-after", 60*time.Second, "once everything is published, stop waiting when no row has been committed for this long and report what is missing")
	return c
}

func newBenchPublishCmd() *cobra.Command {
	var o bench.PublishOptions
	c := &cobra.Command{
		Use:   "publish",
		Short: "Publish bench pipeline's load to the broker and nothing else, for measuring another consumer",
		Long: `Publish the load "edgeplat bench pipeline" publishes, to the broker of
MQTT_BROKER_URL (--config, the environment), and report how fast the broker
acknowledged it; nothing consumes it here. It is the load generator for
comparing another collector with edgeplat on the same messages
(scripts/bench-vs-telegraf.sh).

On a fresh random tenant, --publishers MQTT clients (one agent each)
publish --messages messages of --readings readings each at QoS 1 to
i/{tenant}/a/{agent}/endpoints/modbus, up to 64 unacknowledged per
publisher, at --rate messages/s in total (0: as fast as the broker
acknowledges). The readings (devices, metric names, values, times) are the
ones bench pipeline sends, encoded before the clock starts in --format: an
edgeplat format, or "influx" for InfluxDB line protocol with one line per
reading:
  readings,agent=<agent uuid>,metric=<device>.<metric> value=<float> <time in ns>
so every (agent, metric, time) key is distinct, as in edgeplat's table.

The report gives the messages the broker acknowledged (PUBACKs), the
first-publish and last-PUBACK instants as Unix nanoseconds (--json), the
publish rate and this process's CPU and peak RSS while publishing. A
message that is not acknowledged within 30 s fails the command. Progress
goes to stderr, results to stdout. See docs/benchmarks.md.`,
		Example: `  MQTT_BROKER_URL=tcp://127.0.0.1:18830 edgeplat bench publish --format influx --publishers 4 --messages 6000 --json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, env bench.Env) error { return bench.RunPublish(ctx, o, env) })
		},
	}
	f := c.Flags()
	f.IntVar(&o.Publishers, "publishers", 4, "MQTT publishers, one agent each")
	f.IntVar(&o.Messages, "messages", 2000, "messages per publisher")
	f.IntVar(&o.Readings, "readings", 50, "readings per message")
	f.StringVar(&o.Format, "format", bench.FormatInflux, "payload format: influx (line protocol, one line per reading), json, msgpack, json+deflate, msgpack+deflate")
	f.Float64Var(&o.Rate, "rate", 0, "messages/s over all publishers; 0 publishes as fast as the broker acknowledges")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	f.DurationVar(&o.Timeout, "timeout", 10*time.Minute, "give up when not everything is acknowledged after this long")
	return c
}

func newBenchAgentCmd() *cobra.Command {
	var o bench.AgentOptions
	c := &cobra.Command{
		Use:   "agent",
		Short: "Footprint of the edge agent polling Modbus devices: RSS, CPU share, requests per poll",
		Long: `Measure the edge agent's footprint against a real Modbus TCP server.

The benchmark starts "edgeplat agent" from this binary as a child process
(own data directory, own loopback port), creates --devices Modbus endpoints
over its API, unit ids --first-unit.., each reading holding registers
0..--registers-1 as uint16 every --interval, and lets it poll for
--duration after a 10 s warm-up. Every second it samples the child's
resident memory and CPU time from /proc. At the end it reads each device's
diagnostics for the Modbus requests it really sent per poll and compares
them with the contiguous blocks and with the register count. Anomaly
detection runs as the agent's default has it (on); --anomaly=false
switches it off. --compare-anomaly runs two agents side by side, one
without detection and one with it, polling the same devices in the same
seconds, and reports the CPU of one over the other: on a machine shared
with other work, two runs one after the other see different loads.

The Modbus server is the operator's; "make bench-agent" starts the
pymodbus test server with 10 units of 100 registers and runs this. Progress
goes to stderr, results to stdout. See docs/benchmarks.md.`,
		Example: `  /usr/bin/python3 roles/agent/adapters/modbus/testdata/server.py --port 15020 --units 10 --registers 100 &
  edgeplat bench agent --modbus 127.0.0.1:15020 --devices 10 --registers 100 --duration 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBench(cmd, func(ctx context.Context, env bench.Env) error { return bench.RunAgent(ctx, o, env) })
		},
	}
	f := c.Flags()
	f.StringVar(&o.Modbus, "modbus", "", "host:port of the Modbus TCP server to poll (required)")
	f.IntVar(&o.Devices, "devices", 10, "Modbus devices (endpoints), one unit id each")
	f.IntVar(&o.Registers, "registers", 100, "holding registers read per device, from address 0")
	f.IntVar(&o.FirstUnit, "first-unit", 1, "unit id of the first device")
	f.DurationVar(&o.Interval, "interval", time.Second, "poll interval of every device")
	f.DurationVar(&o.Duration, "duration", 5*time.Minute, "measured time after the warm-up")
	f.BoolVar(&o.JSON, "json", false, "print the results as JSON")
	f.BoolVar(&o.KeepDir, "keep", false, "keep the agent's data directory")
	f.BoolVar(&o.Anomaly, "anomaly", true, "run with anomaly detection on (the agent's default); --anomaly=false measures the agent without it")
	f.BoolVar(&o.CompareAnomaly, "compare-anomaly", false, "run an agent without anomaly detection and one with it side by side and compare their CPU (target: on <= 1.10 x off) and RSS")
	return c
}

// runBench runs a benchmark with the command's configuration, flags and
// output, and gives its errors the exit codes and the format of every
// other command's.
func runBench(cmd *cobra.Command, run func(context.Context, bench.Env) error) error {
	pc, _ := cmd.Flags().GetBool("print-config")
	env := bench.Env{
		Load: func(role, profile string) (*config.Config, error) {
			keys := maps.Clone(persistentFlagKeys)
			if role == config.RoleIngest {
				keys["profile"] = "ingest.profile"
				if profile != "" {
					if err := cmd.Flags().Set("profile", profile); err != nil {
						panic("BUG: set --profile: " + err.Error())
					}
				}
			}
			file, _ := cmd.Flags().GetString("config")
			return config.Load(config.LoadOptions{Role: role, File: file, Flags: cmd.Flags(), FlagKeys: keys})
		},
		ProfileSet:  cmd.Flags().Changed("profile"),
		PrintConfig: pc,
		Stdout:      cmd.OutOrStdout(),
		// The progress lines and the roles' logs share stderr from several
		// goroutines; slog's own lock covers only the logs.
		Stderr: &lockedWriter{w: cmd.ErrOrStderr()},
	}
	err := run(cmd.Context(), env)
	var ce *bench.ConfigError
	var ue *bench.UsageError
	switch {
	case errors.As(err, &ce):
		return &configError{role: ce.Role, err: ce.Err}
	case errors.As(err, &ue):
		return &usageError{err}
	}
	return err
}

// lockedWriter serialises writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
