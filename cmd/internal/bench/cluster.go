package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jackc/pgx/v5"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// ClusterOptions are the flags of `edgeplat bench cluster`.
type ClusterOptions struct {
	API, Ingest int // serve-api and ingest processes
	Publishers  int
	Rate        float64 // messages/s over all publishers
	Duration    time.Duration
	Readings    int
	Format      string
	// Kill SIGKILLs one serve-api and one ingest process at KillAt (a
	// fraction of Duration) and, with Restart, starts them again
	// RestartAfter later (the serve-api with the same client id, so its
	// broker session resumes).
	Kill   bool
	KillAt float64
	// KillSignal is how Kill ends them: "KILL" (a crash) or "TERM" (a
	// graceful stop, such as a scale-down: a serve-api that is not the
	// last of its group leaves it, docs/scaling.md).
	KillSignal   string
	Restart      bool
	RestartAfter time.Duration
	// Compare runs 1+1 and then API+Ingest in one invocation.
	Compare bool
	// OwnBroker starts a private Mosquitto with the settings of
	// docs/scaling.md instead of using mqtt.broker_url.
	OwnBroker   bool
	ReclaimIdle time.Duration
	Keep, JSON  bool
	Timeout     time.Duration
	StallAfter  time.Duration
	// Binary is the edgeplat executable the children run; empty: this one.
	Binary string
}

func (o ClusterOptions) validate() error {
	if _, err := codec.ParseFormat(o.Format); err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	switch {
	case o.API < 1 || o.API > 16:
		return fmt.Errorf("--api must be 1..16, got %d", o.API)
	case o.Ingest < 1 || o.Ingest > 16:
		return fmt.Errorf("--ingest must be 1..16, got %d", o.Ingest)
	case o.Publishers < 1 || o.Publishers > 1000:
		return fmt.Errorf("--publishers must be 1..1000, got %d", o.Publishers)
	case !(o.Rate > 0) || math.IsInf(o.Rate, 0):
		return fmt.Errorf("--rate must be positive, got %v", o.Rate)
	case o.Duration < time.Second:
		return fmt.Errorf("--duration must be at least 1s, got %s", o.Duration)
	case o.Readings < 1 || o.Readings > 10_000:
		return fmt.Errorf("--readings must be 1..10000, got %d", o.Readings)
	case o.KillAt <= 0 || o.KillAt >= 1:
		return fmt.Errorf("--kill-at must be between 0 and 1 (a fraction of --duration), got %v", o.KillAt)
	case o.killSignal() == "":
		return fmt.Errorf("--kill-signal must be KILL or TERM, got %q", o.KillSignal)
	case o.RestartAfter < 0:
		return fmt.Errorf("--restart-after must be 0 or positive, got %s", o.RestartAfter)
	case o.ReclaimIdle < 100*time.Millisecond:
		return fmt.Errorf("--reclaim-idle must be at least 100ms, got %s", o.ReclaimIdle)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	case o.StallAfter <= 0:
		return fmt.Errorf("--stall-after must be positive, got %s", o.StallAfter)
	case o.Rate*o.Duration.Seconds() < float64(o.Publishers):
		return fmt.Errorf("--rate %v for --duration %s is fewer messages than --publishers %d", o.Rate, o.Duration, o.Publishers)
	}
	return nil
}

// killSignal is --kill-signal as "KILL" or "TERM" (any case, SIG
// prefixed or not; empty is KILL), or "" when it is neither.
func (o ClusterOptions) killSignal() string {
	switch s := strings.TrimPrefix(strings.ToUpper(o.KillSignal), "SIG"); s {
	case "", "KILL":
		return "KILL"
	case "TERM":
		return s
	}
	return ""
}

// messagesPerPublisher spreads rate x duration over the publishers.
func (o ClusterOptions) messagesPerPublisher() int {
	return int(math.Round(o.Rate * o.Duration.Seconds() / float64(o.Publishers)))
}

// ClusterReport is one topology's run; --json prints them as an array.
type ClusterReport struct {
	API                int     `json:"api"`
	Ingest             int     `json:"ingest"`
	Publishers         int     `json:"publishers"`
	ReadingsPerMessage int     `json:"readingsPerMessage"`
	Format             string  `json:"format"`
	PayloadBytes       float64 `json:"payloadBytesAvg"`
	TargetRate         float64 `json:"targetRate"`
	Broker             string  `json:"broker"`
	Database           string  `json:"database"`
	Tenant             string  `json:"tenant"`
	CPUs               int     `json:"cpus"`
	Killed             bool    `json:"killed"`
	KillSignal         string  `json:"killSignal,omitempty"`
	Restarted          bool    `json:"restarted"`

	Messages  int   `json:"messages"`  // sent
	Published int64 `json:"published"` // acknowledged by the broker
	// Rows is what the table holds for the bench tenant; RowsWanted is
	// published x readings.
	Rows       int64 `json:"rows"`
	RowsWanted int64 `json:"rowsWanted"`
	// MessagesComplete counts the published messages all of whose readings
	// are rows; Missing the rest, Partial those with only some rows.
	MessagesComplete int64 `json:"messagesComplete"`
	Missing          int64 `json:"missing"`
	Partial          int64 `json:"partial"`
	// Duplicates are rows beyond one per (agent, metric, time) key: the
	// table's key makes it 0 unless the schema changes.
	Duplicates int64 `json:"duplicates"`
	// Redeliveries are repeats serve-api recognised by msgId and dropped
	// (the processes alive at the end; a killed one's count is lost).
	Redeliveries float64 `json:"redeliveriesDropped"`
	// DeadLetters are entries the ingest processes gave up on.
	DeadLetters int64 `json:"deadLetters"`

	PublishSeconds float64 `json:"publishSeconds"`
	ElapsedSeconds float64 `json:"elapsedSeconds"` // first publish -> last row committed
	DrainSeconds   float64 `json:"drainSeconds"`   // last publish ack -> last row committed
	MessagesPerSec float64 `json:"messagesPerSec"`
	ReadingsPerSec float64 `json:"readingsPerSec"`
	// CPU seconds over the run: the children by role (killed ones
	// included), this process (the publishers), and the local services.
	APICPUSeconds     float64            `json:"apiCpuSeconds"`
	IngestCPUSeconds  float64            `json:"ingestCpuSeconds"`
	BenchCPUSeconds   float64            `json:"benchCpuSeconds"`
	ServiceCPUSeconds map[string]float64 `json:"serviceCpuSeconds,omitempty"`
	// CPUPerMessageUs is the children's and the services' CPU per
	// published message, in microseconds (the publishers excluded).
	CPUPerMessageUs float64 `json:"cpuPerMessageUs"`
	Error           string  `json:"error,omitempty"`
}

// RunCluster runs `edgeplat bench cluster`.
func RunCluster(ctx context.Context, o ClusterOptions, env Env) error {
	if err := o.validate(); err != nil {
		return &UsageError{err}
	}
	cfg, apiCfg, log, printed, err := mqttBenchSetup(env, "bench cluster")
	if err != nil || printed {
		return err
	}
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return fmt.Errorf("find the edgeplat binary: %w", err)
		}
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	b := &bench{log: log, progress: env.Stderr}
	if err := b.open(ctx, cfg); err != nil {
		return err
	}
	defer b.close()
	// The children ingest every tenant stream of the Redis database: on a
	// shared one they would take other consumers' entries.
	if others, err := b.store.Streams(ctx, telemetry.IngestionStreamPattern); err == nil && len(others) > 0 {
		return &UsageError{fmt.Errorf("the Redis database holds %d tenants' ingestion streams: the bench's ingest processes would consume them; pick an unused %s",
			len(others), config.EnvNames("streamstore.db"))}
	}
	mqttCfg := apiCfg.MQTT
	if o.OwnBroker {
		broker, err := startClusterBroker(env.Stderr)
		if err != nil {
			return err
		}
		defer broker.stop()
		mqttCfg.BrokerURL, mqttCfg.Username, mqttCfg.Password = broker.url, "", ""
	}
	if err := pipelinePingBroker(mqttCfg); err != nil {
		return err
	}

	topologies := [][2]int{{o.API, o.Ingest}}
	if o.Compare {
		topologies = [][2]int{{1, 1}, {o.API, o.Ingest}}
	}
	var reps []ClusterReport
	var failed error
	for _, t := range topologies {
		c := &clusterRun{o: o, b: b, cfg: cfg, mqtt: mqttCfg, bin: bin, apis: t[0], ingests: t[1], progress: env.Stderr}
		rep, err := c.run(ctx)
		if err != nil {
			rep.Error = err.Error()
			failed = errors.Join(failed, fmt.Errorf("%d+%d: %w", t[0], t[1], err))
		}
		reps = append(reps, rep)
		if ctx.Err() != nil {
			break
		}
	}
	if o.JSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(reps); err != nil {
			return err
		}
	} else {
		writeClusterTable(env.Stdout, reps)
	}
	return failed
}

// clusterRun is one topology's measurement on a fresh database and tenant.
type clusterRun struct {
	o             ClusterOptions
	b             *bench
	cfg           *config.Config
	mqtt          config.MQTT
	bin           string
	apis, ingests int
	progress      io.Writer
	dbName, group string
	dir           string
	load          *publishLoad
	runDB         *db.DB // the run's database, for counting
	children      []*clusterChild
	mu            sync.Mutex // children, cpu of the exited ones
	baseCPU       map[*clusterChild]float64
}

func (c *clusterRun) run(ctx context.Context) (rep ClusterReport, err error) {
	run := randomHex(4)
	c.dbName, c.group = "edgeplat_cluster_"+run, "edgeplat-cluster-"+run
	c.load = newPublishLoad(c.o.Publishers, c.o.messagesPerPublisher(), c.o.Readings, c.o.Format, c.o.Rate)
	c.baseCPU = map[*clusterChild]float64{}
	rep = ClusterReport{API: c.apis, Ingest: c.ingests, Publishers: c.o.Publishers, ReadingsPerMessage: c.o.Readings, Format: c.o.Format,
		TargetRate: c.o.Rate, Broker: c.mqtt.BrokerURL, Database: c.dbName, Tenant: c.load.tenant, CPUs: c.b.host.CPUs,
		Messages: c.load.total(), Killed: c.o.Kill, Restarted: c.o.Kill && c.o.Restart}
	if c.o.Kill {
		rep.KillSignal = c.o.killSignal()
	}
	fmt.Fprintf(c.progress, "cluster %d+%d: database %s, tenant %s, shared group %s\n", c.apis, c.ingests, c.dbName, c.load.tenant, c.group)
	if err := c.load.encode(c.progress); err != nil {
		return rep, err
	}
	rep.PayloadBytes = c.load.payloadBytes
	if c.dir, err = os.MkdirTemp("", "edgeplat-bench-cluster-"); err != nil {
		return rep, err
	}
	if err := c.createDatabase(ctx); err != nil {
		return rep, err
	}
	defer func() {
		c.stopAll()
		if cerr := c.cleanup(ctx, err != nil); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	for i := range c.apis {
		if err := c.start(ctx, c.newChild("serve-api", i)); err != nil {
			return rep, err
		}
	}
	for i := range c.ingests {
		if err := c.start(ctx, c.newChild("ingest", i)); err != nil {
			return rep, err
		}
	}
	err = c.measure(ctx, &rep)
	return rep, err
}

// createDatabase creates the run's database, next to the configured one,
// and migrates it, so the children do not race to.
func (c *clusterRun) createDatabase(ctx context.Context) error {
	if _, err := c.b.db.Pool().Exec(ctx, "CREATE DATABASE "+pgx.Identifier{c.dbName}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s (the user of %s needs CREATEDB): %w", c.dbName, config.EnvNames("db.user"), err)
	}
	dc := c.cfg.DB
	dc.Name, dc.PoolSize = c.dbName, 2
	d, err := db.Open(ctx, dc, c.b.log)
	if err != nil {
		return errors.Join(fmt.Errorf("open database %s: %w", c.dbName, err), c.dropDatabase(ctx))
	}
	if _, err := d.Migrate(ctx); err != nil {
		_ = d.Close()
		return errors.Join(fmt.Errorf("migrate database %s: %w", c.dbName, err), c.dropDatabase(ctx))
	}
	c.runDB = d
	return nil
}

// dropDatabase removes the run's database, closing the connections left
// in it (a killed child's, say).
func (c *clusterRun) dropDatabase(ctx context.Context) error {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if _, err := c.b.db.Pool().Exec(cctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{c.dbName}.Sanitize()+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop database %s: %w", c.dbName, err)
	}
	return nil
}

// cleanup removes the run's database, its tenant's streams and msgId keys,
// the serve-api sessions on the broker and the children's logs; with
// --keep, or after a failure, the logs stay for a look.
func (c *clusterRun) cleanup(ctx context.Context, failed bool) error {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	if c.runDB != nil {
		_ = c.runDB.Close()
	}
	for i := range c.apis {
		pipelineForgetSession(c.mqtt, c.clientID(i))
	}
	if c.o.Keep {
		fmt.Fprintf(c.progress, "kept: database %s, tenant %s, logs in %s\n", c.dbName, c.load.tenant, c.dir)
		return nil
	}
	_, serr := c.b.store.Delete(cctx, telemetry.IngestionStream(c.load.tenant), telemetry.DLQStream(c.load.tenant), telemetry.LogsStream(c.load.tenant))
	kerr := c.load.deleteDedupKeys(cctx, c.b.store)
	derr := c.dropDatabase(ctx)
	if failed {
		fmt.Fprintf(c.progress, "the processes' logs are in %s\n", c.dir)
	} else {
		_ = os.RemoveAll(c.dir)
	}
	if err := errors.Join(serr, kerr, derr); err != nil {
		return fmt.Errorf("clean up run %s: %w", c.dbName, err)
	}
	return nil
}

// measure publishes the load, kills and restarts as asked, waits for the
// last row and checks the table message by message.
func (c *clusterRun) measure(ctx context.Context, rep *ClusterReport) error {
	clients := make([]paho.Client, c.o.Publishers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Disconnect(100)
			}
		}
	}()
	for i := range clients {
		cl, err := pipelineConnect(c.mqtt, fmt.Sprintf("edgeplat-bench-pub-%s-%d", randomHex(4), i), true)
		if err != nil {
			return err
		}
		clients[i] = cl
	}
	if err := c.waitSubscribed(ctx, clients[0]); err != nil {
		return err
	}
	stream, group := telemetry.IngestionStream(c.load.tenant), telemetry.WriterGroup(c.load.tenant)
	if err := c.b.store.EnsureGroup(ctx, stream, group, "0"); err != nil {
		return fmt.Errorf("create the bench stream: %w", err)
	}

	c.sampleBaseCPU()
	cpu0, procs0 := cpuTime(), sampleProcs(benchServices)
	pubCtx, cancelPub := context.WithCancel(ctx)
	defer cancelPub()
	t0 := time.Now()
	pubErr := make(chan error, len(clients))
	var wg sync.WaitGroup
	for i, cl := range clients {
		wg.Go(func() { pubErr <- c.load.publish(pubCtx, cl, i, t0) })
	}
	allPublished := make(chan struct{})
	go func() { wg.Wait(); close(allPublished) }()
	var killAt <-chan time.Time
	if c.o.Kill {
		killAt = time.After(time.Duration(float64(c.o.Duration) * c.o.KillAt))
	}
	var restartAt <-chan time.Time

	total := int64(c.load.total())
	want := total * int64(c.o.Readings)
	deadline := time.NewTimer(c.o.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	pt := newBenchTicker(c.progress, fmt.Sprintf("cluster %d+%d", c.apis, c.ingests))
	var tPub time.Time
	publishing := true
	stall := stallDetector{after: c.o.StallAfter}
	var rows int64
	var lastCount time.Time
	finish := func() {
		end := time.Now()
		rep.Published = c.load.published.Load()
		rep.ElapsedSeconds = end.Sub(t0).Seconds()
		if !tPub.IsZero() {
			rep.PublishSeconds = tPub.Sub(t0).Seconds()
			rep.DrainSeconds = end.Sub(tPub).Seconds()
		}
		rep.BenchCPUSeconds = (cpuTime() - cpu0).Seconds()
		rep.ServiceCPUSeconds = sampleProcs(benchServices).cpuSecondsSince(procs0)
		rep.APICPUSeconds, rep.IngestCPUSeconds = c.childCPU()
		rep.Redeliveries = c.sumMetric(ctx, "serve-api", "edgeplat_api_telemetry_duplicates_total")
	}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case err := <-pubErr:
			if err != nil {
				return err
			}
			continue
		case <-deadline.C:
			finish()
			return c.verify(ctx, rep, fmt.Errorf("not finished after --timeout %s", c.o.Timeout))
		case <-killAt:
			killAt = nil
			c.kill()
			if c.o.Restart {
				restartAt = time.After(c.o.RestartAfter)
			}
			continue
		case <-restartAt:
			restartAt = nil
			if err := c.restart(ctx); err != nil {
				return err
			}
			continue
		case <-allPublished:
			allPublished, publishing, tPub = nil, false, time.Now()
			continue
		case <-tick.C:
		}
		// While publishing, a count every 5 s is enough for the progress
		// line; each one scans the table being written.
		if !publishing || time.Since(lastCount) >= 5*time.Second {
			lastCount = time.Now()
			if n, err := c.countRows(ctx); err == nil {
				rows = n
			}
		}
		if !publishing && restartAt == nil {
			gi, gerr := c.b.store.Group(ctx, stream, group)
			drained := gerr == nil && gi.Pending == 0 && gi.Lag == 0
			if rows >= c.load.published.Load()*int64(c.o.Readings) && drained {
				finish()
				rep.MessagesPerSec = float64(total) / rep.ElapsedSeconds
				rep.ReadingsPerSec = float64(want) / rep.ElapsedSeconds
				pt.done(fmt.Sprintf("%d rows in %s: %s messages/s, %s readings/s end to end",
					rows, benchRound(time.Since(t0)), benchHuman(rep.MessagesPerSec), benchHuman(rep.ReadingsPerSec)))
				return c.verify(ctx, rep, nil)
			}
			if stall.observe(time.Now(), float64(rows)+float64(gi.Pending)) {
				finish()
				return c.verify(ctx, rep, fmt.Errorf("no row committed for --stall-after %s with %d of %d rows (stream group: %d pending, lag %d)",
					c.o.StallAfter, rows, want, gi.Pending, gi.Lag))
			}
		}
		pt.maybe(func() string {
			el := time.Since(t0).Seconds()
			return fmt.Sprintf("%d/%d published (%s msg/s), %d/%d rows (%.0f%%)", c.load.published.Load(), total,
				benchHuman(float64(c.load.published.Load())/el), rows, want, 100*float64(rows)/float64(want))
		})
	}
}

// verify counts the rows message by message; cause, when not nil, is why
// the wait ended early.
func (c *clusterRun) verify(ctx context.Context, rep *ClusterReport, cause error) error {
	// A message is one (agent, device, time): its readings share them.
	err := c.runDB.Pool().QueryRow(ctx, `SELECT coalesce(sum(n), 0), count(*) FILTER (WHERE n = $2), count(*) FILTER (WHERE n <> $2),
			(SELECT count(*) - count(DISTINCT (agent_uuid, metric_name, time)) FROM readings WHERE tenant_id = $1)
		FROM (SELECT count(*) AS n FROM readings WHERE tenant_id = $1 GROUP BY agent_uuid, device_name, time) m`,
		c.load.tenant, c.o.Readings).Scan(&rep.Rows, &rep.MessagesComplete, &rep.Partial, &rep.Duplicates)
	if err != nil {
		return errors.Join(cause, fmt.Errorf("count the rows: %w", err))
	}
	rep.RowsWanted = rep.Published * int64(c.o.Readings)
	rep.Missing = rep.Published - rep.MessagesComplete
	rep.DeadLetters, _ = c.b.store.Len(ctx, telemetry.DLQStream(c.load.tenant))
	if msgs := float64(rep.Published); msgs > 0 {
		cpu := rep.APICPUSeconds + rep.IngestCPUSeconds
		for _, s := range rep.ServiceCPUSeconds {
			cpu += s
		}
		rep.CPUPerMessageUs = cpu / msgs * 1e6
	}
	var problems []error
	if cause != nil {
		problems = append(problems, cause)
	}
	if rep.Missing != 0 || rep.Duplicates != 0 || rep.Rows != rep.RowsWanted {
		p := fmt.Errorf("%d messages acknowledged by the broker, %d of them missing from PostgreSQL (%d partly), %d rows of %d, %d duplicate rows, %d dead letters",
			rep.Published, rep.Missing, rep.Partial, rep.Rows, rep.RowsWanted, rep.Duplicates, rep.DeadLetters)
		if rep.Missing > 0 {
			p = fmt.Errorf("%w; a broker dropping acknowledged messages for a subscriber (Mosquitto: max_queued_messages, max_inflight_messages; see docs/scaling.md) or a serve-api session that never came back loses them", p)
		}
		problems = append(problems, p)
	}
	return errors.Join(problems...)
}

// countRows counts the bench tenant's rows.
func (c *clusterRun) countRows(ctx context.Context) (int64, error) {
	var n int64
	err := c.runDB.Pool().QueryRow(ctx, `SELECT count(*) FROM readings WHERE tenant_id = $1`, c.load.tenant).Scan(&n)
	return n, err
}

// waitSubscribed publishes state reports of a probe agent (counted by
// serve-api, never stored) until every serve-api process has received one:
// then each has its share of the group.
func (c *clusterRun) waitSubscribed(ctx context.Context, cl paho.Client) error {
	topic := "i/" + c.load.tenant + "/a/" + newTenantID() + "/state"
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		cl.Publish(topic, 1, false, []byte(`{}`)).WaitTimeout(2 * time.Second)
		ready := 0
		for _, ch := range c.alive("serve-api") {
			if v, err := ch.metric(ctx, "edgeplat_api_mqtt_messages_received_total", `kind="state"`); err == nil && v > 0 {
				ready++
			}
		}
		if ready == c.apis {
			return nil
		}
		if err := c.exitedEarly(); err != nil {
			return err
		}
		if !sleepCtx(ctx, 100*time.Millisecond) {
			return ctx.Err()
		}
	}
	return fmt.Errorf("not every serve-api process received a message from the broker at %s within 60s", c.mqtt.BrokerURL)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// sumMetric adds up one counter over the live children of a role.
func (c *clusterRun) sumMetric(ctx context.Context, role, name string) float64 {
	var sum float64
	for _, ch := range c.alive(role) {
		v, _ := ch.metric(ctx, name, "")
		sum += v
	}
	return sum
}

// writeClusterTable prints one line per topology.
func writeClusterTable(w io.Writer, reps []ClusterReport) {
	if len(reps) == 0 {
		return
	}
	r0 := reps[0]
	kill := "no kill"
	if r0.Killed {
		kill = "one serve-api and one ingest SIGKILLed mid-run"
		if r0.KillSignal == "TERM" {
			kill = "one serve-api and one ingest stopped with SIGTERM mid-run"
		}
		if r0.Restarted {
			kill += " and restarted"
		}
	}
	fmt.Fprintf(w, "%d publishers at %.0f messages/s, %d readings each (%s, %.0f bytes); broker %s; %s; %d CPUs\n",
		r0.Publishers, r0.TargetRate, r0.ReadingsPerMessage, r0.Format, r0.PayloadBytes, r0.Broker, kill, r0.CPUs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "api+ingest\tpublished\trows\tmissing\tduplicates\tredelivered\telapsed s\tdrain s\tmessages/s\treadings/s\tapi µs/msg\tingest µs/msg\tservices µs/msg\ttotal µs/msg\t")
	for _, r := range reps {
		msgs := max(float64(r.Published), 1)
		var svc float64
		for _, s := range r.ServiceCPUSeconds {
			svc += s
		}
		fmt.Fprintf(tw, "%d+%d\t%d\t%d\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t\n",
			r.API, r.Ingest, r.Published, r.Rows, r.Missing, r.Duplicates, r.Redeliveries, r.ElapsedSeconds, r.DrainSeconds,
			r.MessagesPerSec, r.ReadingsPerSec, r.APICPUSeconds/msgs*1e6, r.IngestCPUSeconds/msgs*1e6, svc/msgs*1e6, r.CPUPerMessageUs)
	}
	_ = tw.Flush()
	for _, r := range reps {
		if len(r.ServiceCPUSeconds) > 0 {
			fmt.Fprintf(w, "%d+%d services: %s\n", r.API, r.Ingest, strings.TrimPrefix(formatCPUPerMessage(0, r.ServiceCPUSeconds, float64(max(r.Published, 1))), "edgeplat 0 µs, "))
		}
		if r.Error != "" {
			fmt.Fprintf(w, "%d+%d FAILED: %s\n", r.API, r.Ingest, r.Error)
		}
	}
}
