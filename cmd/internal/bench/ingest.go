package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/prometheus/procfs"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/logging"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/profiles"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/ingest"
)

// Bench sizes: preload chunks (bounding the client-side memory of the
// preload) and the ceiling's COPY batches (the reference figure).
const (
	benchPreloadChunk = 500
	benchCeilingBatch = 10_000
	benchPollEvery    = 10 * time.Millisecond
)

type IngestOptions struct {
	Messages, Readings int
	Agents, Devices    int
	Profiles           string
	Keep, JSON         bool
	Vacuum             bool
	Timeout            time.Duration
	CPUProfile         string
	// AnomalyRules, when positive, measures each profile twice: without
	// and with that many z-score rules on the bench tenant, the cloud
	// anomaly evaluator judging every message while the ingest runs.
	AnomalyRules int
	// AnomalyScores gives every reading an edge anomaly score, stored in
	// readings.anomaly_score.
	AnomalyScores bool
}

func (o IngestOptions) validate() error {
	switch {
	case o.Messages < 1:
		return fmt.Errorf("--messages must be at least 1, got %d", o.Messages)
	case o.Readings < 1 || o.Readings > 10_000:
		return fmt.Errorf("--readings must be 1..10000, got %d", o.Readings)
	case o.Agents < 1:
		return fmt.Errorf("--agents must be at least 1, got %d", o.Agents)
	case o.Devices < 1:
		return fmt.Errorf("--devices must be at least 1, got %d", o.Devices)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	case o.AnomalyRules < 0 || o.AnomalyRules > anomaly.MaxRulesPerTenant:
		return fmt.Errorf("--anomaly-rules must be 0..%d, got %d", anomaly.MaxRulesPerTenant, o.AnomalyRules)
	}
	return nil
}

// profileNames resolves --profiles; nil means the one profile the config
// selects (--profile, INGESTION_PROFILE, file).
func (o IngestOptions) profileNames(profileSet bool) ([]string, error) {
	if o.Profiles == "" {
		return nil, nil
	}
	if profileSet {
		return nil, errors.New("give --profile or --profiles, not both")
	}
	valid := profiles.Names()
	if strings.TrimSpace(o.Profiles) == "all" {
		return valid, nil
	}
	var names []string
	for p := range strings.SplitSeq(o.Profiles, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if p != "none" && !slices.Contains(valid, p) {
			return nil, fmt.Errorf("--profiles: unknown profile %q (want all, or a comma list of %s, none)", p, strings.Join(valid, ", "))
		}
		if !slices.Contains(names, p) {
			names = append(names, p)
		}
	}
	if len(names) == 0 {
		return nil, errors.New("--profiles names no profile")
	}
	return names, nil
}

// benchConfig loads the ingest role's configuration, with profile (when not
// empty) given as if by --profile: the highest layer for ingest.profile,
// while every variable still overrides the profile's values.
func benchConfig(env Env, profile string) (*config.Config, error) {
	cfg, err := env.Load(config.RoleIngest, profile)
	if err != nil {
		return nil, &ConfigError{Role: "bench ingest", Err: err}
	}
	switch {
	case cfg.DB.Driver != "postgres":
		return nil, &UsageError{fmt.Errorf("bench ingest needs PostgreSQL, but %s is %q", config.Label("db.driver"), cfg.DB.Driver)}
	case cfg.StreamStore.Driver != "redis":
		return nil, &UsageError{fmt.Errorf("bench ingest needs Redis, but %s is %q", config.Label("streamstore.driver"), cfg.StreamStore.Driver)}
	}
	return cfg, nil
}

// IngestReport is the outcome of one invocation; --json prints it as is.
type IngestReport struct {
	Messages           int             `json:"messages"`
	ReadingsPerMessage int             `json:"readingsPerMessage"`
	Rows               int             `json:"rows"`
	Host               benchHost       `json:"host"`
	Ceiling            ceilingResult   `json:"ceiling"`
	Results            []ProfileResult `json:"results"`
}

type benchHost struct {
	CPUs        int    `json:"cpus"`
	GOMAXPROCS  int    `json:"gomaxprocs"`
	GoVersion   string `json:"goVersion"`
	Postgres    string `json:"postgres"`
	PostgresAt  string `json:"postgresAt"`
	TimescaleDB bool   `json:"timescaledb"`
	// Partitioned: readings is split into daily partitions (migration
	// 0021, PostgreSQL without TimescaleDB).
	Partitioned   bool   `json:"readingsPartitioned"`
	Redis         string `json:"redis"`
	RedisDatabase int    `json:"redisDatabase"`
	// ReadingsMB is the size of readings (with indexes) before the run: the
	// ceiling is measured on an empty table, so a big one skews the ratio.
	ReadingsMB   float64 `json:"readingsMbBefore"`
	ReadingsRows int64   `json:"readingsRowsBefore"` // estimate (pg_stat_user_tables)
}

type ceilingResult struct {
	Rows        int64   `json:"rows"`
	Batch       int     `json:"batchRows"`
	CopySeconds float64 `json:"copySeconds"`
	RowsPerSec  float64 `json:"rowsPerSec"`
	Connections int     `json:"connections"`
}

// ProfileResult is the measurement of one ingestion profile.
type ProfileResult struct {
	Profile           string  `json:"profile"`
	Tenant            string  `json:"tenant"`
	WorkersStart      int     `json:"workersStart"`
	WorkersMax        int     `json:"workersMax"`
	BatchSize         int     `json:"batchSize"`
	InsertMode        string  `json:"insertMode"`
	CopyMinRows       int     `json:"copyMinRows"`
	PoolSize          int     `json:"poolSize"`
	Messages          int     `json:"messages"`
	Rows              int64   `json:"rows"`
	ElapsedSeconds    float64 `json:"elapsedSeconds"`
	ReadingsPerSec    float64 `json:"readingsPerSec"`
	CeilingRowsPerSec float64 `json:"ceilingRowsPerSec"`
	Ratio             float64 `json:"ratio"`
	PeakRSSMB         float64 `json:"peakRssMb"`
	// CPUSeconds is this process's user+system CPU time during the run:
	// the workers' share; PostgreSQL's and Redis's are not in it.
	CPUSeconds float64 `json:"cpuSeconds"`
	// ServiceCPUSeconds is the CPU of the local PostgreSQL, Redis and
	// Mosquitto processes over the same time, by command name.
	ServiceCPUSeconds map[string]float64 `json:"serviceCpuSeconds,omitempty"`
	// The anomaly run (--anomaly-rules): the rules, how long the evaluator
	// took to judge every message from the ingest's start, the batches it
	// dropped, the incidents it opened, and this run's readings/s over
	// the same profile's run without rules.
	AnomalyRules           int     `json:"anomalyRules,omitempty"`
	AnomalyEvalSeconds     float64 `json:"anomalyEvalSeconds,omitempty"`
	AnomalyDroppedBatches  float64 `json:"anomalyDroppedBatches,omitempty"`
	AnomalyIncidents       float64 `json:"anomalyIncidents,omitempty"`
	AnomalyThroughputRatio float64 `json:"anomalyThroughputRatio,omitempty"`
}

// RunIngest runs `edgeplat bench ingest`.
func RunIngest(ctx context.Context, o IngestOptions, env Env) error {
	if err := o.validate(); err != nil {
		return &UsageError{err}
	}
	names, err := o.profileNames(env.ProfileSet)
	if err != nil {
		return &UsageError{err}
	}
	first := ""
	if len(names) > 0 {
		first = names[0]
	}
	cfg, err := benchConfig(env, first)
	if err != nil {
		return err
	}
	if names == nil {
		names = []string{cfg.Ingest.Profile}
	}
	if env.PrintConfig {
		for i, name := range names {
			if i > 0 {
				if cfg, err = benchConfig(env, name); err != nil {
					return err
				}
			}
			fmt.Fprintf(env.Stdout, "# profile %s\n", name)
			if err := cfg.WritePrintable(env.Stdout); err != nil {
				return err
			}
		}
		return nil
	}
	log, err := benchLogger(env.Stderr, cfg.Log)
	if err != nil {
		return &ConfigError{Role: "bench ingest", Err: err}
	}

	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	b := &bench{o: o, log: log, progress: env.Stderr}
	if err := b.open(ctx, cfg); err != nil {
		return err
	}
	defer b.close()

	rep := IngestReport{Messages: o.Messages, ReadingsPerMessage: o.Readings, Rows: o.Messages * o.Readings, Host: b.host}
	if rep.Ceiling, err = b.ceiling(ctx); err != nil {
		return err
	}
	for i, name := range names {
		if i > 0 {
			if cfg, err = benchConfig(env, name); err != nil {
				return err
			}
		}
		runs := []int{0}
		if o.AnomalyRules > 0 {
			runs = append(runs, o.AnomalyRules)
		}
		var without float64
		for _, rules := range runs {
			res, err := b.runProfile(ctx, cfg, o.profileFile(name, len(names)), rules)
			if err != nil {
				return fmt.Errorf("profile %s: %w", name, err)
			}
			res.CeilingRowsPerSec = rep.Ceiling.RowsPerSec
			if res.CeilingRowsPerSec > 0 {
				res.Ratio = res.ReadingsPerSec / res.CeilingRowsPerSec
			}
			if rules == 0 {
				without = res.ReadingsPerSec
			} else if without > 0 {
				res.AnomalyThroughputRatio = res.ReadingsPerSec / without
			}
			rep.Results = append(rep.Results, res)
		}
	}
	if o.JSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.writeTable(env.Stdout)
}

func (o IngestOptions) profileFile(profile string, n int) string {
	if o.CPUProfile == "" || n == 1 {
		return o.CPUProfile
	}
	ext := filepath.Ext(o.CPUProfile)
	return strings.TrimSuffix(o.CPUProfile, ext) + "." + profile + ext
}

// benchLogger keeps the role's logs out of the way: warnings and errors
// only, unless the operator asked for debug.
func benchLogger(w io.Writer, c config.Log) (*slog.Logger, error) {
	level, err := logging.ParseLevel(c.Level)
	if err != nil {
		return nil, err
	}
	if level > slog.LevelDebug {
		level = max(level, slog.LevelWarn)
	}
	return logging.New(w, level, c.Format)
}

// bench holds what every step of one invocation shares.
type bench struct {
	o        IngestOptions
	log      *slog.Logger
	progress io.Writer
	db       *db.DB            // the bench's own handle: ceiling, counts, clean-up
	store    *redisstore.Store // the bench's own client: preload, watching, clean-up
	host     benchHost
}

// open connects to both backends, migrates the database as the ingest role
// would, and fails with one line naming the settings when either is out of
// reach.
func (b *bench) open(ctx context.Context, cfg *config.Config) error {
	pgAddr := net.JoinHostPort(cfg.DB.Host, strconv.Itoa(cfg.DB.Port))
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	d, err := db.Open(octx, cfg.DB, b.log)
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot open PostgreSQL database %q at %s as user %q (%s): %s", cfg.DB.Name, pgAddr, cfg.DB.User, config.EnvNames("db.name", "db.user", "db.password"), benchOneLine(err))
		}
		return fmt.Errorf("cannot reach PostgreSQL at %s (%s): %s", pgAddr, config.EnvNames("db.host", "db.port"), benchOneLine(err))
	}
	if _, err := d.Migrate(octx); err != nil {
		_ = d.Close()
		return fmt.Errorf("migrate PostgreSQL database %q at %s: %s", cfg.DB.Name, pgAddr, benchOneLine(err))
	}
	ropts := redisstore.OptionsFromConfig(cfg.StreamStore)
	store, err := redisstore.New(ropts)
	if err != nil {
		_ = d.Close()
		return &UsageError{fmt.Errorf("stream store settings (%s): %w", ropts.Settings, err)}
	}
	if err := store.Ping(octx); err != nil {
		_ = store.Close()
		_ = d.Close()
		return fmt.Errorf("cannot reach Redis at %s (%s): %s", strings.Join(ropts.Addrs, ","), ropts.Settings, benchOneLine(err))
	}
	b.db, b.store = d, store
	var version string
	var readingsBytes, readingsRows int64
	var partitioned bool
	// Over the partition tree: a partitioned readings (docs/database.md)
	// holds nothing itself. For one table the tree is the table.
	if err := d.Pool().QueryRow(octx, `SELECT current_setting('server_version'),
		(SELECT COALESCE(sum(pg_total_relation_size(relid)), 0) FROM pg_partition_tree('readings')),
		(SELECT COALESCE(sum(s.n_live_tup), 0) FROM pg_partition_tree('readings') p JOIN pg_stat_user_tables s ON s.relid = p.relid),
		EXISTS (SELECT 1 FROM pg_partitioned_table WHERE partrelid = 'readings'::regclass)`).Scan(&version, &readingsBytes, &readingsRows, &partitioned); err != nil {
		b.close()
		return fmt.Errorf("query PostgreSQL version: %w", err)
	}
	b.host = benchHost{
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		Postgres: version, PostgresAt: pgAddr + "/" + cfg.DB.Name, TimescaleDB: d.Dialect().Timescale, Partitioned: partitioned,
		Redis: strings.Join(ropts.Addrs, ","), RedisDatabase: ropts.DB, ReadingsMB: float64(readingsBytes) / (1 << 20), ReadingsRows: readingsRows,
	}
	if others, err := store.Streams(octx, telemetry.IngestionStreamPattern); err == nil && len(others) > 0 {
		fmt.Fprintf(b.progress, "note: %d other tenants' ingestion streams in this Redis database; an ingest service running on it would compete for the bench's entries (pick an unused %s)\n", len(others), config.EnvNames("streamstore.db"))
	}
	return nil
}

func (b *bench) close() {
	if b.store != nil {
		_ = b.store.Close()
	}
	if b.db != nil {
		_ = b.db.Close()
	}
}

// benchOneLine keeps a wrapped driver error on the single line the operator sees.
func benchOneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// cleanupCtx bounds clean-up, which must run even after Ctrl-C.
func cleanupCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
}

// ceiling times CopyFrom of the bench rows into an empty copy of readings
// over one connection.
func (b *bench) ceiling(ctx context.Context) (ceilingResult, error) {
	res := ceilingResult{Batch: max(1, benchCeilingBatch/b.o.Readings) * b.o.Readings, Connections: 1}
	conn, err := b.db.Pool().Acquire(ctx)
	if err != nil {
		return res, fmt.Errorf("ceiling: acquire connection: %w", err)
	}
	defer conn.Release()
	table := "bench_ceiling_" + randomHex(6)
	ident := pgx.Identifier{table}
	if _, err := conn.Exec(ctx, "CREATE TABLE "+ident.Sanitize()+" (LIKE readings INCLUDING ALL)"); err != nil {
		return res, fmt.Errorf("ceiling: create %s: %w", table, err)
	}
	defer func() {
		cctx, cancel := cleanupCtx(ctx)
		defer cancel()
		if _, err := conn.Exec(cctx, "DROP TABLE IF EXISTS "+ident.Sanitize()); err != nil {
			fmt.Fprintf(b.progress, "warning: drop ceiling table %s: %v\n", table, err)
		}
	}()

	g := newBenchGen(newTenantID(), b.o)
	perBatch := max(1, benchCeilingBatch/b.o.Readings)
	rows := make([]telemetry.Row, 0, perBatch*b.o.Readings)
	p := newBenchTicker(b.progress, "ceiling")
	var copyTime time.Duration
	for start := 0; start < b.o.Messages; start += perBatch {
		rows = rows[:0]
		for i := start; i < min(start+perBatch, b.o.Messages); i++ {
			m := g.message(i)
			rows = m.Rows(g.tenant, m.Timestamp.Time, rows)
		}
		rows = telemetry.Normalize(rows)
		t0 := time.Now()
		n, err := conn.Conn().CopyFrom(ctx, ident, benchColumns, benchCopySource(rows))
		copyTime += time.Since(t0)
		if err != nil {
			return res, fmt.Errorf("ceiling: copy into %s: %w", table, err)
		}
		res.Rows += n
		p.maybe(func() string {
			return fmt.Sprintf("%d/%d rows, %s rows/s", res.Rows, b.o.Messages*b.o.Readings, benchHuman(float64(res.Rows)/copyTime.Seconds()))
		})
	}
	res.CopySeconds = copyTime.Seconds()
	res.RowsPerSec = float64(res.Rows) / copyTime.Seconds()
	p.done(fmt.Sprintf("%d rows by CopyFrom in %s of COPY: %s rows/s", res.Rows, benchRound(copyTime), benchHuman(res.RowsPerSec)))
	return res, nil
}

// benchColumns and benchCopySource mirror the ingest writer's COPY.
var benchColumns = []string{"time", "agent_uuid", "metric_name", "value", "protocol", "unit", "quality", "device_name", "tenant_id",
	"anomaly_score"}

func benchCopySource(rows []telemetry.Row) pgx.CopyFromSource {
	return pgx.CopyFromSlice(len(rows), func(i int) ([]any, error) {
		r := &rows[i]
		var v any
		if r.Value != nil {
			v = *r.Value
		}
		var score any
		if r.AnomalyScore != nil {
			score = *r.AnomalyScore
		}
		return []any{r.Time, [16]byte(r.AgentUUID), r.MetricName, v, benchNullable(r.Protocol), benchNullable(r.Unit), benchNullable(r.Quality), benchNullable(r.DeviceName), benchNullable(r.TenantID),
			score}, nil
	})
}

func benchNullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// runProfile measures one profile on a fresh tenant.
func (b *bench) runProfile(ctx context.Context, cfg *config.Config, cpuProfile string, rules int) (res ProfileResult, err error) {
	g := newBenchGen(newTenantID(), b.o)
	profile := cfg.Ingest.Profile
	res = ProfileResult{Profile: profile, Tenant: g.tenant, WorkersStart: cfg.Ingest.WorkerCount, WorkersMax: cfg.Ingest.WorkerCount,
		BatchSize: cfg.Ingest.BatchSize, InsertMode: cfg.Ingest.InsertMode, CopyMinRows: cfg.Ingest.CopyMinRows,
		PoolSize: cfg.DB.PoolSize, Messages: b.o.Messages}
	stream, group := telemetry.IngestionStream(g.tenant), telemetry.WriterGroup(g.tenant)
	if !b.o.Keep {
		defer func() {
			if cerr := b.cleanup(ctx, g); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
	}

	lastID, err := b.preload(ctx, g, stream, profile)
	if err != nil {
		return res, err
	}

	// The role gets its own database pool (its profile sets the size) and
	// stream store client, as in "edgeplat ingest".
	rdb, err := db.Open(ctx, cfg.DB, b.log)
	if err != nil {
		return res, fmt.Errorf("open database for the ingest role: %w", err)
	}
	defer rdb.Close()
	rstore, err := redisstore.New(redisstore.OptionsFromConfig(cfg.StreamStore))
	if err != nil {
		return res, err
	}
	defer rstore.Close()
	r := &rt.Runtime{Logger: b.log, Metrics: benchRegistry(), Health: health.New(2 * time.Second)}
	// Port 0: the kernel picks a free port for /health and /metrics.
	cfg.Ingest.Bind, cfg.Ingest.Port = "127.0.0.1", 0
	if cfg.Spool.Enabled {
		// Never replay (or add to) the spool of a real ingest service.
		dir, err := os.MkdirTemp("", "edgeplat-bench-spool-")
		if err != nil {
			return res, err
		}
		defer os.RemoveAll(dir)
		cfg.Spool.Path = dir
	}
	// Only the bench tenant's streams: the role must never read, acknowledge
	// or trim anyone else's.
	svcs, err := ingest.New(cfg, r, rt.Backends{DB: rdb, Streams: rstore}, ingest.Options{PortHint: "bench",
		StreamPattern: telemetry.IngestionStream(g.tenant), LogStreamPattern: telemetry.LogsStream(g.tenant)})
	if err != nil {
		return res, err
	}
	var an *anomaly.Anomaly
	if rules > 0 {
		res.AnomalyRules = rules
		if an, err = b.anomalyRules(ctx, g, rdb, r, rules); err != nil {
			return res, err
		}
		defer b.dropAnomalyTenant(ctx, g)
		svcs = append(svcs, an.Services()...)
	}

	runtime.GC()
	debug.FreeOSMemory()
	resetPeakRSS()
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return res, fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return res, fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	cpu0, procs0 := cpuTime(), sampleProcs(benchServices)
	runCtx, stopRole := context.WithCancel(ctx)
	defer stopRole()
	done := make(chan error, 1)
	t0 := time.Now()
	go func() {
		done <- lifecycle.Run(runCtx, lifecycle.Options{Logger: b.log, GracePeriod: cfg.Lifecycle.ShutdownGrace}, svcs...)
	}()
	evalDone := make(chan time.Duration, 1)
	if an != nil {
		go func() { evalDone <- b.feedAnomaly(runCtx, an, g, r, t0) }()
	}
	elapsed, err := b.waitDrained(ctx, r, stream, group, lastID, t0, done, &res)
	if an != nil && err == nil {
		res.AnomalyEvalSeconds = (<-evalDone).Seconds()
		res.AnomalyDroppedBatches = pipelineMetricLabel(r, "edgeplat_api_anomaly_batches_total", "outcome", "dropped")
		res.AnomalyIncidents = pipelineMetricLabel(r, "edgeplat_api_anomaly_incidents_total", "event", "opened")
	}
	if err == nil {
		res.CPUSeconds = (cpuTime() - cpu0).Seconds()
		res.ServiceCPUSeconds = sampleProcs(benchServices).cpuSecondsSince(procs0)
		res.PeakRSSMB = float64(peakRSS()) / (1 << 20)
	}
	stopRole()
	select {
	case rerr := <-done:
		if rerr != nil && err == nil {
			err = fmt.Errorf("ingest role: %w", rerr)
		}
	case <-time.After(cfg.Lifecycle.ShutdownGrace + 5*time.Second):
		if err == nil {
			err = errors.New("ingest role did not stop within the shutdown grace period")
		}
	}
	if err != nil {
		return res, err
	}

	want := int64(b.o.Messages * b.o.Readings)
	got, err := b.countRows(ctx, g)
	if err != nil {
		return res, err
	}
	if got != want {
		dlq, _ := b.store.Len(ctx, telemetry.DLQStream(g.tenant))
		return res, fmt.Errorf("ingest finished with %d rows of %d in the table (%d entries dead-lettered); another ingest service on this Redis database may have taken bench entries", got, want, dlq)
	}
	res.Rows = got
	res.ElapsedSeconds = elapsed.Seconds()
	res.ReadingsPerSec = float64(got) / elapsed.Seconds()
	return res, nil
}

// waitDrained polls the consumer group until every preloaded entry has been
// delivered and acknowledged, printing progress every second, and returns
// the time from t0.
func (b *bench) waitDrained(ctx context.Context, r *rt.Runtime, stream, group, lastID string, t0 time.Time, done <-chan error, res *ProfileResult) (time.Duration, error) {
	want := float64(b.o.Messages * b.o.Readings)
	p := newBenchTicker(b.progress, "ingest "+res.Profile)
	poll := time.NewTicker(benchPollEvery)
	defer poll.Stop()
	deadline := time.NewTimer(b.o.Timeout)
	defer deadline.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("interrupted: %w", ctx.Err())
		case err := <-done:
			return 0, fmt.Errorf("ingest role stopped early: %v", err)
		case <-deadline.C:
			inserted, _ := roleMetric(r, "edgeplat_ingestion_readings_inserted_total")
			return 0, fmt.Errorf("not finished after --timeout %s: %.0f of %.0f rows written", b.o.Timeout, inserted, want)
		case <-poll.C:
		}
		gi, err := b.store.Group(ctx, stream, group)
		if err == nil && gi.Pending == 0 && gi.LastDeliveredID == lastID {
			elapsed := time.Since(t0)
			if w, ok := roleMetric(r, "edgeplat_ingestion_workers"); ok {
				res.WorkersMax = max(res.WorkersMax, int(w))
			}
			p.done(fmt.Sprintf("%.0f rows in %s: %s readings/s", want, benchRound(elapsed), benchHuman(want/elapsed.Seconds())))
			return elapsed, nil
		}
		if err != nil && !errors.Is(err, streamstore.ErrNoGroup) && ctx.Err() == nil {
			return 0, fmt.Errorf("watch consumer group: %w", err)
		}
		p.maybe(func() string {
			// Gathering walks the whole registry: once a second, not per poll.
			// The autoscaler acts at most once per 5 s sample, so a change of
			// the worker count is not missed.
			if w, ok := roleMetric(r, "edgeplat_ingestion_workers"); ok {
				res.WorkersMax = max(res.WorkersMax, int(w))
			}
			inserted, _ := roleMetric(r, "edgeplat_ingestion_readings_inserted_total")
			return fmt.Sprintf("%.0f/%.0f rows committed (%.0f%%), %s rows/s, %d workers",
				inserted, want, 100*inserted/want, benchHuman(inserted/time.Since(t0).Seconds()), res.WorkersMax)
		})
	}
}

// roleMetric reads one unlabelled counter or gauge of the role's registry.
func roleMetric(r *rt.Runtime, name string) (float64, bool) {
	mfs, err := r.Metrics.Gather()
	if err != nil {
		return 0, false
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) == 0 {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue(), true
		}
		if g := m.GetGauge(); g != nil {
			return g.GetValue(), true
		}
	}
	return 0, false
}

// preload appends the bench messages in chunks, so the client never holds
// more than one chunk, and returns the last entry's id.
func (b *bench) preload(ctx context.Context, g *benchGen, stream, profile string) (string, error) {
	p := newBenchTicker(b.progress, "preload "+profile)
	t0 := time.Now()
	var lastID string
	var bytes int64
	batch := make([]map[string]string, 0, benchPreloadChunk)
	for start := 0; start < b.o.Messages; start += benchPreloadChunk {
		batch = batch[:0]
		for i := start; i < min(start+benchPreloadChunk, b.o.Messages); i++ {
			data, err := json.Marshal(g.message(i))
			if err != nil {
				panic("BUG: bench message does not marshal: " + err.Error())
			}
			bytes += int64(len(data))
			batch = append(batch, map[string]string{telemetry.StreamField: string(data)})
		}
		ids, err := b.store.AddBatch(ctx, stream, batch, 0)
		if err != nil {
			return "", fmt.Errorf("preload %s: %w", stream, err)
		}
		lastID = ids[len(ids)-1]
		p.maybe(func() string {
			return fmt.Sprintf("%d/%d messages", start+len(batch), b.o.Messages)
		})
	}
	p.done(fmt.Sprintf("%d messages (%.1f MB) into %s in %s", b.o.Messages, float64(bytes)/(1<<20), stream, benchRound(time.Since(t0))))
	return lastID, nil
}

func (b *bench) countRows(ctx context.Context, g *benchGen) (int64, error) {
	var n int64
	err := b.db.Pool().QueryRow(ctx, `SELECT count(*) FROM readings WHERE agent_uuid = ANY($1::uuid[]) AND tenant_id = $2`,
		g.agentStrings(), g.tenant).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("count bench rows: %w", err)
	}
	return n, nil
}

// cleanup removes the bench tenant's streams and rows: its agents are
// random, so the key prefix finds exactly the bench's rows.
func (b *bench) cleanup(ctx context.Context, g *benchGen) error {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	_, serr := b.store.Delete(cctx, telemetry.IngestionStream(g.tenant), telemetry.DLQStream(g.tenant))
	_, derr := b.db.Pool().Exec(cctx, `DELETE FROM readings WHERE agent_uuid = ANY($1::uuid[]) AND tenant_id = $2`, g.agentStrings(), g.tenant)
	if err := errors.Join(serr, derr); err != nil {
		return fmt.Errorf("clean up bench tenant %s: %w", g.tenant, err)
	}
	if b.o.Vacuum {
		return vacuumReadings(ctx, b.db, b.log)
	}
	return nil
}

// vacuumReadings rewrites the readings table without the deleted rows
// (VACUUM FULL) and then asks for a checkpoint, so that every measurement
// starts from the same state. After a plain VACUUM the next one writes into
// the space the deleted rows left, scattered over the table and its index;
// without any vacuum, autovacuum gets to the dead rows in the middle of the
// next measurement. The checkpoint writes out the pages the rewrite dirtied
// now instead of during the next measurement; it needs a superuser or
// pg_checkpoint, and without either the run goes on and says so. VACUUM
// FULL locks the table while it runs: this is for a dedicated bench
// database.
func vacuumReadings(ctx context.Context, d *db.DB, log *slog.Logger) error {
	ctx = context.WithoutCancel(ctx)
	if _, err := d.Pool().Exec(ctx, "VACUUM FULL readings"); err != nil {
		return fmt.Errorf("vacuum readings: %w", err)
	}
	if _, err := d.Pool().Exec(ctx, "CHECKPOINT"); err != nil {
		log.Warn("no checkpoint after the vacuum: the next measurement may share the machine with PostgreSQL writing out the pages the last one dirtied", "err", err)
	}
	return nil
}

// benchGen generates the bench messages deterministically from their index:
// message i comes from device i mod (agents x devices) and is that device's
// (i div (agents x devices))-th sample, one second apart, so every
// (agent, metric, time) key is distinct. The samples end about now.
type benchGen struct {
	tenant  string
	agents  []codec.UUID
	devices int
	base    time.Time
	names   []string
	units   []string
	// scores gives readings an anomaly score (--anomaly-scores).
	scores bool
}

var benchKinds = []struct{ name, unit string }{
	{"temperature", "°C"}, {"pressure", "bar"}, {"flow", "m3/h"}, {"power", "kW"},
	{"voltage", "V"}, {"current", "A"}, {"speed", "rpm"}, {"level", "%"},
}

func newBenchGen(tenant string, o IngestOptions) *benchGen {
	g := &benchGen{tenant: tenant, devices: o.Devices, scores: o.AnomalyScores}
	for range o.Agents {
		g.agents = append(g.agents, codec.NewUUID())
	}
	for r := range o.Readings {
		k := benchKinds[r%len(benchKinds)]
		g.names = append(g.names, fmt.Sprintf("%s_%d", k.name, r/len(benchKinds)+1))
		g.units = append(g.units, k.unit)
	}
	sources := o.Agents * o.Devices
	samples := (o.Messages + sources - 1) / sources
	g.base = time.Now().UTC().Truncate(time.Second).Add(-time.Duration(samples) * time.Second)
	return g
}

func (g *benchGen) message(i int) telemetry.Message {
	src := i % (len(g.agents) * g.devices)
	ts := telemetry.TimestampOf(g.base.Add(time.Duration(i/(len(g.agents)*g.devices)) * time.Second))
	m := telemetry.Message{
		AgentUUID:  g.agents[src/g.devices].String(),
		DeviceName: fmt.Sprintf("plc-%02d", src%g.devices+1),
		Protocol:   "modbus",
		Timestamp:  ts,
		MsgID:      fmt.Sprintf("bench-%d", i),
		Readings:   make([]telemetry.Reading, len(g.names)),
	}
	values := make([]float64, len(g.names))
	for r := range g.names {
		values[r] = float64((i*7919+r*104729)%100_000) / 100
		m.Readings[r] = telemetry.Reading{Name: g.names[r], Value: &values[r], Unit: g.units[r], Quality: "GOOD", Timestamp: ts}
		if g.scores {
			score := float64((i*31+r)%1000) / 1000
			m.Readings[r].AnomalyScore = &score
		}
	}
	return m
}

func (g *benchGen) agentStrings() []string {
	out := make([]string, len(g.agents))
	for i, a := range g.agents {
		out[i] = a.String()
	}
	return out
}

// newTenantID returns a random tenant id in its 22-character form.
func newTenantID() string {
	return codec.EncodeID(codec.NewUUID())
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// benchTicker prints a progress line at most once a second.
type benchTicker struct {
	w     io.Writer
	what  string
	start time.Time
	last  time.Time
}

func newBenchTicker(w io.Writer, what string) *benchTicker {
	now := time.Now()
	return &benchTicker{w: w, what: what, start: now, last: now}
}

func (t *benchTicker) maybe(line func() string) {
	if time.Since(t.last) < time.Second {
		return
	}
	t.last = time.Now()
	fmt.Fprintf(t.w, "%s: %s (%s)\n", t.what, line(), benchRound(time.Since(t.start)))
}

func (t *benchTicker) done(line string) { fmt.Fprintf(t.w, "%s: %s\n", t.what, line) }

func benchRound(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(10 * time.Millisecond)
}

// benchHuman prints a rate as 123.4k.
func benchHuman(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk", v/1e3)
	}
	return fmt.Sprintf("%.0f", v)
}

// resetPeakRSS resets the kernel's high-water mark of this process's
// resident set to its current size (Linux 4.0+); elsewhere the peak stays
// the process's lifetime peak.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns VmHWM in bytes, or getrusage's lifetime peak where /proc
// is missing.
func peakRSS() int64 {
	if p, err := procfs.Self(); err == nil {
		if st, err := p.NewStatus(); err == nil && st.VmHWM > 0 {
			return int64(st.VmHWM) // procfs converts kB to bytes
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	// Maxrss is a C long: int32 on 32-bit ARM, so convert before scaling.
	// macOS reports bytes, Linux and the BSDs KiB.
	if runtime.GOOS == "darwin" {
		return int64(ru.Maxrss)
	}
	return int64(ru.Maxrss) << 10
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// label names a result in the table: its profile, and its anomaly rules
// when it ran with some.
func (r ProfileResult) label() string {
	if r.AnomalyRules > 0 {
		return fmt.Sprintf("%s+%d-rules", r.Profile, r.AnomalyRules)
	}
	return r.Profile
}

func (rep IngestReport) writeTable(w io.Writer) error {
	h := rep.Host
	ts := "plain table"
	switch {
	case h.TimescaleDB:
		ts = "hypertable"
	case h.Partitioned:
		ts = "table partitioned by day"
	}
	fmt.Fprintf(w, "%d messages x %d readings = %d rows per profile; %d CPUs\n", rep.Messages, rep.ReadingsPerMessage, rep.Rows, h.CPUs)
	fmt.Fprintf(w, "PostgreSQL %s at %s, readings a %s with about %d rows (%.0f MB) before the run; Redis %s db %d\n",
		h.Postgres, h.PostgresAt, ts, h.ReadingsRows, h.ReadingsMB, h.Redis, h.RedisDatabase)
	fmt.Fprintf(w, "ceiling: CopyFrom, one connection, %d-row batches: %.0f rows/s\n\n", rep.Ceiling.Batch, rep.Ceiling.RowsPerSec)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROFILE\tWORKERS\tBATCH\tINSERT\tMESSAGES\tROWS\tELAPSED\tREADINGS/S\tCEILING ROWS/S\tRATIO\tPEAK RSS MB")
	for _, r := range rep.Results {
		workers := strconv.Itoa(r.WorkersStart)
		if r.WorkersMax != r.WorkersStart {
			workers += "→" + strconv.Itoa(r.WorkersMax)
		}
		mode := r.InsertMode
		if mode == "copy" {
			mode = fmt.Sprintf("copy≥%d", r.CopyMinRows)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%.2fs\t%.0f\t%.0f\t%.2f\t%.0f\n",
			r.label(), workers, r.BatchSize, mode, r.Messages, r.Rows, r.ElapsedSeconds, r.ReadingsPerSec, r.CeilingRowsPerSec, r.Ratio, r.PeakRSSMB)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range rep.Results {
		if r.Messages > 0 && r.ElapsedSeconds > 0 {
			fmt.Fprintf(w, "cpu/message %s: %s\n", r.label(), formatCPUPerMessage(r.CPUSeconds, r.ServiceCPUSeconds, float64(r.Messages)))
		}
	}
	for _, r := range rep.Results {
		if r.AnomalyRules > 0 {
			fmt.Fprintf(w, "anomaly %s: %d rules, every message judged %.2fs after the start (%.0f readings/s), %.0f batches dropped, %.0f incidents; readings/s %.2f of the run without rules\n",
				r.Profile, r.AnomalyRules, r.AnomalyEvalSeconds, float64(r.Messages*rep.ReadingsPerMessage)/max(r.AnomalyEvalSeconds, 1e-9),
				r.AnomalyDroppedBatches, r.AnomalyIncidents, r.AnomalyThroughputRatio)
		}
	}
	return nil
}
