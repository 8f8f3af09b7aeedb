package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/jackc/pgx/v5"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api"
	"github.com/edgeplat/edgeplat/roles/ingest"
	"github.com/prometheus/client_golang/prometheus"
)

// Pipeline bench sizes.
const (
	pipelineWindow  = 64 // unacknowledged QoS 1 publishes per publisher
	pipelineDevices = 4  // devices per publishing agent
	// pipelineProbePoll is how often the probe looks for its row: the
	// latencies measured are that coarse, and every query loads the
	// PostgreSQL being measured (at 2 ms the probe, which is almost always
	// waiting for a row, ran 500 queries a second).
	pipelineProbePoll   = 10 * time.Millisecond
	pipelineProbeExpire = 30 * time.Second
)

type PipelineOptions struct {
	Publishers, Messages, Readings int
	Format                         string
	Rate                           float64
	ProbeEvery                     time.Duration
	NoIngestOnly, Vacuum           bool
	Rounds                         int
	Keep, JSON                     bool
	Timeout                        time.Duration
	StallAfter                     time.Duration
	CPUProfile                     string
}

func (o PipelineOptions) validate() error {
	if _, err := codec.ParseFormat(o.Format); err != nil {
		return fmt.Errorf("--format: %w", err)
	}
	if err := validateLoad(o.Publishers, o.Messages, o.Readings, o.Rate); err != nil {
		return err
	}
	switch {
	case o.ProbeEvery < 10*time.Millisecond:
		return fmt.Errorf("--probe-interval must be at least 10ms, got %s", o.ProbeEvery)
	case o.Timeout <= 0:
		return fmt.Errorf("--timeout must be positive, got %s", o.Timeout)
	case o.StallAfter < 0:
		return fmt.Errorf("--stall-after must be 0 or positive, got %s", o.StallAfter)
	case o.Rounds < 1 || o.Rounds > 50:
		return fmt.Errorf("--rounds must be 1..50, got %d", o.Rounds)
	}
	return nil
}

// validateLoad checks the flags that size a publishLoad.
func validateLoad(publishers, messages, readings int, rate float64) error {
	switch {
	case publishers < 1 || publishers > 1000:
		return fmt.Errorf("--publishers must be 1..1000, got %d", publishers)
	case messages < 1:
		return fmt.Errorf("--messages must be at least 1, got %d", messages)
	case readings < 1 || readings > 10_000:
		return fmt.Errorf("--readings must be 1..10000, got %d", readings)
	case rate < 0 || math.IsNaN(rate) || math.IsInf(rate, 0):
		return fmt.Errorf("--rate must be 0 or positive, got %v", rate)
	}
	return nil
}

// PipelineReport is the outcome of one run; --json prints it as is.
type PipelineReport struct {
	Publishers         int       `json:"publishers"`
	MessagesPerPub     int       `json:"messagesPerPublisher"`
	ReadingsPerMessage int       `json:"readingsPerMessage"`
	Format             string    `json:"format"`
	PayloadBytes       float64   `json:"payloadBytesAvg"`
	TargetRate         float64   `json:"targetRate"` // messages/s, 0 = unbounded
	Profile            string    `json:"profile"`
	Host               benchHost `json:"host"`
	Broker             string    `json:"broker"`
	Tenant             string    `json:"tenant"`

	Messages       int     `json:"messages"`
	Rows           int64   `json:"rows"` // bench rows, probes excluded
	PublishSeconds float64 `json:"publishSeconds"`
	PublishRate    float64 `json:"publishMessagesPerSec"`
	ElapsedSeconds float64 `json:"elapsedSeconds"` // first publish -> all committed
	DrainSeconds   float64 `json:"drainSeconds"`   // last publish ack -> all committed
	MessagesPerSec float64 `json:"messagesPerSec"`
	ReadingsPerSec float64 `json:"readingsPerSec"`

	BacklogStart int64   `json:"backlogStart"` // messages still in the broker's queue plus stream entries undelivered or pending, 1 s into publishing
	BacklogEnd   int64   `json:"backlogEndOfPublishing"`
	BacklogMax   int64   `json:"backlogMax"`
	BacklogGrew  bool    `json:"backlogGrew"`
	StreamLenEnd int64   `json:"streamLengthEndOfPublishing"`
	Duplicates   int64   `json:"duplicates"`
	Dropped      int64   `json:"dropped"`
	WorkersMax   int     `json:"workersMax"`
	ProbesOK     int     `json:"probes"`
	ProbesLost   int     `json:"probesLost"`
	LatencyP50Ms float64 `json:"latencyP50Ms"`
	LatencyP99Ms float64 `json:"latencyP99Ms"`
	LatencyMaxMs float64 `json:"latencyMaxMs"`
	CPUSeconds   float64 `json:"cpuSeconds"` // this process: both roles and the publishers
	// ServiceCPUSeconds is the CPU the local PostgreSQL, Redis and
	// Mosquitto processes used from the first publish to the last commit.
	ServiceCPUSeconds map[string]float64 `json:"serviceCpuSeconds,omitempty"`
	PeakRSSMB         float64            `json:"peakRssMb"`
	IngestOnly        *ProfileResult     `json:"ingestOnly,omitempty"`
	Ratio             float64            `json:"ratio,omitempty"` // readingsPerSec / ingestOnly.readingsPerSec
}

// RunPipeline runs `edgeplat bench pipeline`.
func RunPipeline(ctx context.Context, o PipelineOptions, env Env) error {
	if err := o.validate(); err != nil {
		return &UsageError{err}
	}
	cfg, apiCfg, log, printed, err := mqttBenchSetup(env, "bench pipeline")
	if err != nil || printed {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	total := o.Publishers * o.Messages
	b := &bench{o: IngestOptions{Messages: total, Readings: o.Readings, Agents: o.Publishers, Devices: pipelineDevices,
		Keep: o.Keep, Timeout: o.Timeout, Vacuum: o.Vacuum}, log: log, progress: env.Stderr}
	if err := b.open(ctx, cfg); err != nil {
		return err
	}
	defer b.close()
	if err := pipelinePingBroker(apiCfg.MQTT); err != nil {
		return err
	}

	var reps []PipelineReport
	for round := 1; round <= o.Rounds; round++ {
		if o.Rounds > 1 {
			fmt.Fprintf(env.Stderr, "pipeline: round %d of %d\n", round, o.Rounds)
		}
		rep := PipelineReport{Publishers: o.Publishers, MessagesPerPub: o.Messages, ReadingsPerMessage: o.Readings,
			Format: o.Format, TargetRate: o.Rate, Profile: cfg.Ingest.Profile, Host: b.host, Broker: apiCfg.MQTT.BrokerURL,
			Messages: total}
		if !o.NoIngestOnly {
			icfg, err := benchConfig(env, "")
			if err != nil {
				return err
			}
			res, err := b.runProfile(ctx, icfg, "", 0)
			if err != nil {
				return fmt.Errorf("ingestion-only: %w", err)
			}
			rep.IngestOnly = &res
		}
		p := &pipelineRun{b: b, o: o, cfg: cfg, apiCfg: apiCfg, rep: &rep}
		if err := p.run(ctx); err != nil {
			return err
		}
		if rep.IngestOnly != nil && rep.IngestOnly.ReadingsPerSec > 0 {
			rep.Ratio = rep.ReadingsPerSec / rep.IngestOnly.ReadingsPerSec
		}
		reps = append(reps, rep)
	}
	out := env.Stdout
	if o.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(summarizeRounds(reps))
	}
	if len(reps) == 1 {
		reps[0].write(out)
		return nil
	}
	reps[0].writeHeader(out)
	for i, rep := range reps {
		fmt.Fprintf(out, "round %d: ", i+1)
		rep.writeRound(out)
	}
	summarizeRounds(reps).write(out)
	return nil
}

// RoundsSummary is the outcome of several rounds; --json prints it.
type RoundsSummary struct {
	Rounds []PipelineReport `json:"rounds"`
	// Medians over the rounds, and their spread.
	ReadingsPerSec           benchSpread `json:"readingsPerSec"`
	IngestOnlyReadingsPerSec benchSpread `json:"ingestOnlyReadingsPerSec,omitzero"`
	Ratio                    benchSpread `json:"ratio,omitzero"`
	LatencyP99Ms             benchSpread `json:"latencyP99Ms"`
	BacklogGrewRounds        int         `json:"backlogGrewRounds"`
	// CPU per message in microseconds, by process ("edgeplat" and the
	// local services), in each phase.
	CPUPerMessageUs           map[string]benchSpread `json:"cpuPerMessageUs,omitempty"`
	IngestOnlyCPUPerMessageUs map[string]benchSpread `json:"ingestOnlyCpuPerMessageUs,omitempty"`
}

type benchSpread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(vals []float64) benchSpread {
	if len(vals) == 0 {
		return benchSpread{}
	}
	s := slices.Sorted(slices.Values(vals))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return benchSpread{Median: med, Min: s[0], Max: s[len(s)-1]}
}

func summarizeRounds(reps []PipelineReport) RoundsSummary {
	sum := RoundsSummary{Rounds: reps}
	var e2e, ingest, ratio, p99 []float64
	for _, r := range reps {
		e2e, p99 = append(e2e, r.ReadingsPerSec), append(p99, r.LatencyP99Ms)
		if r.IngestOnly != nil {
			ingest, ratio = append(ingest, r.IngestOnly.ReadingsPerSec), append(ratio, r.Ratio)
		}
		if r.BacklogGrew {
			sum.BacklogGrewRounds++
		}
	}
	sum.ReadingsPerSec, sum.IngestOnlyReadingsPerSec = spreadOf(e2e), spreadOf(ingest)
	sum.Ratio, sum.LatencyP99Ms = spreadOf(ratio), spreadOf(p99)
	e2eCPU, ingestCPU := map[string][]float64{}, map[string][]float64{}
	for _, r := range reps {
		addCPUPerMessage(e2eCPU, r.CPUSeconds, r.ServiceCPUSeconds, r.Messages)
		if r.IngestOnly != nil {
			addCPUPerMessage(ingestCPU, r.IngestOnly.CPUSeconds, r.IngestOnly.ServiceCPUSeconds, r.IngestOnly.Messages)
		}
	}
	sum.CPUPerMessageUs, sum.IngestOnlyCPUPerMessageUs = spreadsOf(e2eCPU), spreadsOf(ingestCPU)
	return sum
}

// addCPUPerMessage appends one round's CPU per message, in microseconds, by
// process name.
func addCPUPerMessage(into map[string][]float64, self float64, services map[string]float64, messages int) {
	if messages <= 0 {
		return
	}
	into["edgeplat"] = append(into["edgeplat"], self/float64(messages)*1e6)
	for name, sec := range services {
		into[name] = append(into[name], sec/float64(messages)*1e6)
	}
}

func spreadsOf(vals map[string][]float64) map[string]benchSpread {
	if len(vals) == 0 {
		return nil
	}
	out := make(map[string]benchSpread, len(vals))
	for name, v := range vals {
		out[name] = spreadOf(v)
	}
	return out
}

// formatSpreads renders CPU-per-message medians and ranges in a fixed order.
func formatSpreads(s map[string]benchSpread) string {
	var parts []string
	for _, name := range append([]string{"edgeplat"}, benchServices...) {
		if sp, ok := s[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.0f µs (%.0f-%.0f)", name, sp.Median, sp.Min, sp.Max))
		}
	}
	return strings.Join(parts, ", ")
}

func (s RoundsSummary) write(w io.Writer) {
	fmt.Fprintf(w, "median of %d:   end to end %.0f readings/s (%.0f-%.0f), p99 %.0f ms (%.0f-%.0f), backlog grew in %d\n",
		len(s.Rounds), s.ReadingsPerSec.Median, s.ReadingsPerSec.Min, s.ReadingsPerSec.Max,
		s.LatencyP99Ms.Median, s.LatencyP99Ms.Min, s.LatencyP99Ms.Max, s.BacklogGrewRounds)
	if s.IngestOnlyReadingsPerSec.Max > 0 {
		fmt.Fprintf(w, "                ingestion-only %.0f readings/s (%.0f-%.0f), ratio %.2f (%.2f-%.2f, each round's end to end / its ingestion-only)\n",
			s.IngestOnlyReadingsPerSec.Median, s.IngestOnlyReadingsPerSec.Min, s.IngestOnlyReadingsPerSec.Max,
			s.Ratio.Median, s.Ratio.Min, s.Ratio.Max)
	}
	if len(s.CPUPerMessageUs) > 0 {
		fmt.Fprintf(w, "cpu/message:    end to end %s\n", formatSpreads(s.CPUPerMessageUs))
	}
	if len(s.IngestOnlyCPUPerMessageUs) > 0 {
		fmt.Fprintf(w, "                ingestion-only %s\n", formatSpreads(s.IngestOnlyCPUPerMessageUs))
	}
}

// mqttBenchSetup loads the configurations of an MQTT bench (the ingest
// role's and the serve-api role's, from the same flags, environment and
// file) and its logger; printed is true when --print-config printed them
// instead.
func mqttBenchSetup(env Env, role string) (cfg, apiCfg *config.Config, log *slog.Logger, printed bool, err error) {
	if cfg, err = benchConfig(env, ""); err != nil {
		return nil, nil, nil, false, err
	}
	if apiCfg, err = pipelineAPIConfig(env); err != nil {
		return nil, nil, nil, false, err
	}
	if env.PrintConfig {
		if err := apiCfg.WritePrintable(env.Stdout); err != nil {
			return nil, nil, nil, true, err
		}
		return nil, nil, nil, true, cfg.WritePrintable(env.Stdout)
	}
	if log, err = benchLogger(env.Stderr, cfg.Log); err != nil {
		return nil, nil, nil, false, &ConfigError{Role: role, Err: err}
	}
	return cfg, apiCfg, log, false, nil
}

// pipelineAPIConfig loads the serve-api role's configuration (mqtt, api,
// spool sections) from the same flags, environment and file.
func pipelineAPIConfig(env Env) (*config.Config, error) {
	cfg, err := env.Load(config.RoleAPI, "")
	if err != nil {
		return nil, &ConfigError{Role: "bench pipeline", Err: err}
	}
	return cfg, nil
}

// pipelinePingBroker fails with one line when the broker is out of reach.
func pipelinePingBroker(m config.MQTT) error {
	c, err := pipelineConnect(m, "edgeplat-bench-ping-"+randomHex(4), true)
	if err != nil {
		return err
	}
	c.Disconnect(100)
	return nil
}

func pipelineConnect(m config.MQTT, clientID string, clean bool) (paho.Client, error) {
	po := paho.NewClientOptions().AddBroker(m.BrokerURL).SetClientID(clientID).SetCleanSession(clean).
		SetAutoReconnect(false).SetConnectRetry(false).SetOrderMatters(false).SetConnectTimeout(10 * time.Second).
		SetKeepAlive(30 * time.Second).SetWriteTimeout(10 * time.Second)
	if m.Username != "" {
		po.SetUsername(m.Username)
		po.SetPassword(m.Password.Reveal())
	}
	c := paho.NewClient(po)
	tok := c.Connect()
	if !tok.WaitTimeout(15*time.Second) || tok.Error() != nil {
		err := tok.Error()
		if err == nil {
			err = errors.New("timed out")
		}
		return nil, fmt.Errorf("cannot connect to the MQTT broker at %s (%s): %s", m.BrokerURL, config.EnvNames("mqtt.broker_url"), benchOneLine(err))
	}
	return c, nil
}

// pipelineRun is one measurement of the whole path.
type pipelineRun struct {
	b           *bench
	o           PipelineOptions
	cfg, apiCfg *config.Config
	rep         *PipelineReport

	*publishLoad
	probe string // the latency probe's agent

	probeRows atomic.Int64
	latMu     sync.Mutex
	latencies []time.Duration
}

func (p *pipelineRun) run(ctx context.Context) (err error) {
	p.publishLoad = newPublishLoad(p.o.Publishers, p.o.Messages, p.o.Readings, p.o.Format, p.o.Rate)
	p.probe = newTenantID()
	p.rep.Tenant = p.tenant
	if !p.o.Keep {
		defer func() {
			if cerr := p.cleanup(ctx); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}()
	}
	if err := p.encode(p.b.progress); err != nil {
		return err
	}
	p.rep.PayloadBytes = p.payloadBytes

	cfg, apiCfg := p.cfg, p.apiCfg
	rdb, err := db.Open(ctx, cfg.DB, p.b.log)
	if err != nil {
		return fmt.Errorf("open database for the ingest role: %w", err)
	}
	defer rdb.Close()
	rstore, err := redisstore.New(redisstore.OptionsFromConfig(cfg.StreamStore))
	if err != nil {
		return err
	}
	defer rstore.Close()
	r := &rt.Runtime{Logger: p.b.log, Metrics: benchRegistry(), Health: health.New(2 * time.Second)}
	back := rt.Backends{DB: rdb, Streams: rstore}
	cfg.Ingest.Bind, cfg.Ingest.Port = "127.0.0.1", 0
	apiCfg.API.Bind, apiCfg.API.Port = "127.0.0.1", 0
	// A subscriber of its own: a unique client id (its session is removed
	// afterwards) and no shared group, so no serve-api replica takes a share.
	apiClientID := "edgeplat-bench-api-" + randomHex(6)
	apiCfg.MQTT.ClientID, apiCfg.MQTT.SharedSubscriptionGroup = apiClientID, ""
	apiCfg.API.DedupTTL = min(apiCfg.API.DedupTTL, time.Hour)
	// Configured as docs/configuration.md asks of separate roles: the
	// producer refuses appends at the ingest profile's stream length (both
	// read the same environment, so only the profile can differ).
	apiCfg.StreamStore.IngestionStreamMaxLen = cfg.StreamStore.IngestionStreamMaxLen
	if !apiCfg.JWT.Secret.IsSet() && !apiCfg.JWT.PrivateKey.IsSet() && apiCfg.JWT.PublicKey == "" {
		// The bench makes no REST calls, but the role needs a token key.
		apiCfg.JWT.Secret = config.Secret(randomHex(32))
	}
	for _, c := range []*config.Config{cfg, apiCfg} {
		if c.Spool.Enabled {
			dir, err := os.MkdirTemp("", "edgeplat-bench-spool-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			c.Spool.Path = dir
		}
	}
	isvcs, err := ingest.New(cfg, r, back, ingest.Options{PortHint: "bench",
		StreamPattern: telemetry.IngestionStream(p.tenant), LogStreamPattern: telemetry.LogsStream(p.tenant)})
	if err != nil {
		return err
	}
	asvcs, err := api.New(apiCfg, r, back, api.Options{PortHint: "bench"})
	if err != nil {
		return err
	}
	defer pipelineForgetSession(apiCfg.MQTT, apiClientID)

	// The stream and its writers' group exist before the ingest role starts,
	// so its first discovery finds them instead of one up to 5 s later.
	if err := p.b.store.EnsureGroup(ctx, telemetry.IngestionStream(p.tenant), telemetry.WriterGroup(p.tenant), "0"); err != nil {
		return fmt.Errorf("create the bench stream: %w", err)
	}

	runCtx, stopRoles := context.WithCancel(ctx)
	defer stopRoles()
	done := make(chan error, 1)
	go func() {
		done <- lifecycle.Run(runCtx, lifecycle.Options{Logger: p.b.log, GracePeriod: cfg.Lifecycle.ShutdownGrace}, slices.Concat(isvcs, asvcs)...)
	}()
	err = p.measure(ctx, r, done)
	stopRoles()
	select {
	case rerr := <-done:
		if rerr != nil && err == nil {
			err = fmt.Errorf("roles: %w", rerr)
		}
	case <-time.After(cfg.Lifecycle.ShutdownGrace + 5*time.Second):
		if err == nil {
			err = errors.New("roles did not stop within the shutdown grace period")
		}
	}
	if err != nil {
		return err
	}
	want := int64(p.o.Publishers * p.o.Messages * p.o.Readings)
	var got, probes int64
	if err := p.b.db.Pool().QueryRow(ctx, `SELECT count(*) FILTER (WHERE agent_uuid <> $3::uuid), count(*) FILTER (WHERE agent_uuid = $3::uuid)
		FROM readings WHERE agent_uuid = ANY($1::uuid[]) AND tenant_id = $2`, p.agentUUIDsWithProbe(), p.tenant, pipelineUUID(p.probe)).Scan(&got, &probes); err != nil {
		return fmt.Errorf("count bench rows: %w", err)
	}
	if got != want || probes != p.probeRows.Load() {
		return fmt.Errorf("pipeline finished with %d rows of %d (and %d probe rows of %d) in the table (%d duplicates, %d dropped)",
			got, want, probes, p.probeRows.Load(), p.rep.Duplicates, p.rep.Dropped)
	}
	p.rep.Rows = got
	return nil
}

// measure waits for the subscriber, publishes, probes and waits for the
// last commit.
func (p *pipelineRun) measure(ctx context.Context, r *rt.Runtime, done <-chan error) error {
	m := p.apiCfg.MQTT
	clients := make([]paho.Client, p.o.Publishers)
	defer func() {
		for _, c := range clients {
			if c != nil {
				c.Disconnect(100)
			}
		}
	}()
	for i := range clients {
		c, err := pipelineConnect(m, fmt.Sprintf("edgeplat-bench-pub-%s-%d", randomHex(4), i), true)
		if err != nil {
			return err
		}
		clients[i] = c
	}
	probeClient, err := pipelineConnect(m, "edgeplat-bench-probe-"+randomHex(4), true)
	if err != nil {
		return err
	}
	defer probeClient.Disconnect(100)
	if err := p.waitSubscribed(ctx, r, probeClient, done); err != nil {
		return err
	}

	stream, group := telemetry.IngestionStream(p.tenant), telemetry.WriterGroup(p.tenant)
	received := func() float64 {
		return pipelineMetricLabel(r, "edgeplat_api_mqtt_messages_received_total", "kind", "telemetry")
	}
	receivedBase := received()
	backlog := func() int64 {
		// Messages the broker acknowledged to the publishers but has not
		// delivered to the subscriber yet wait in its per-client queue:
		// they are backlog as much as the stream's. (Probe messages are
		// received without being counted as published, so this errs low
		// by the few probes.)
		inBroker := max(0, p.published.Load()-int64(received()-receivedBase))
		gi, err := p.b.store.Group(ctx, stream, group)
		if err != nil || gi.Lag < 0 {
			n, _ := p.b.store.Len(ctx, stream)
			return inBroker + n
		}
		return inBroker + gi.Lag + gi.Pending
	}

	if p.o.CPUProfile != "" {
		f, err := os.Create(p.o.CPUProfile)
		if err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("cpu profile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	resetPeakRSS()
	cpu0, procs0 := cpuTime(), sampleProcs(benchServices)
	pubCtx, cancelPub := context.WithCancel(ctx)
	defer cancelPub()
	pubErr := make(chan error, len(clients))
	probeStop := make(chan struct{})
	probeDone := make(chan struct{})
	t0 := time.Now()
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() { pubErr <- p.publish(pubCtx, c, i, t0) })
	}
	go func() {
		defer close(probeDone)
		p.runProbe(pubCtx, probeClient, probeStop)
	}()
	allPublished := make(chan struct{})
	go func() { wg.Wait(); close(allPublished) }()

	total := float64(p.o.Publishers * p.o.Messages)
	want := int64(p.o.Publishers * p.o.Messages * p.o.Readings)
	pt := newBenchTicker(p.b.progress, "pipeline")
	poll := time.NewTicker(benchPollEvery)
	defer poll.Stop()
	deadline := time.NewTimer(p.o.Timeout)
	defer deadline.Stop()
	var tPub time.Time
	sampled := false
	publishing := true
	stall := stallDetector{after: p.o.StallAfter}
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("interrupted: %w", ctx.Err())
		case err := <-done:
			return fmt.Errorf("roles stopped early: %v", err)
		case err := <-pubErr:
			if err != nil {
				return err
			}
			continue
		case <-deadline.C:
			inserted, _ := roleMetric(r, "edgeplat_ingestion_readings_inserted_total")
			return fmt.Errorf("not finished after --timeout %s: %d of %.0f messages published, %.0f of %d rows written",
				p.o.Timeout, p.published.Load(), total, inserted, want)
		case <-allPublished:
			allPublished = nil
			publishing = false
			tPub = time.Now()
			p.rep.PublishSeconds = tPub.Sub(t0).Seconds()
			p.rep.PublishRate = total / p.rep.PublishSeconds
			p.rep.BacklogEnd = backlog()
			p.rep.BacklogMax = max(p.rep.BacklogMax, p.rep.BacklogEnd)
			p.rep.StreamLenEnd, _ = p.b.store.Len(ctx, stream)
			if !sampled {
				p.rep.BacklogStart = p.rep.BacklogEnd
			}
			close(probeStop)
			<-probeDone
			continue
		case <-poll.C:
		}
		if !publishing {
			inserted, _ := roleMetric(r, "edgeplat_ingestion_readings_inserted_total")
			if rcv := received(); stall.observe(time.Now(), inserted+rcv) && int64(inserted) < want+p.probeRows.Load() {
				return stallError(p.o.StallAfter, p.published.Load(), rcv, inserted, want,
					pipelineMetricSum(r, "edgeplat_api_broker_messages_dropped_total"))
			}
			if int64(inserted) >= want+p.probeRows.Load() {
				gi, err := p.b.store.Group(ctx, stream, group)
				if err == nil && gi.Pending == 0 && gi.Lag == 0 {
					end := time.Now()
					elapsed := end.Sub(t0)
					p.rep.ElapsedSeconds = elapsed.Seconds()
					p.rep.DrainSeconds = end.Sub(tPub).Seconds()
					p.rep.MessagesPerSec = total / elapsed.Seconds()
					p.rep.ReadingsPerSec = float64(want) / elapsed.Seconds()
					p.rep.CPUSeconds = (cpuTime() - cpu0).Seconds()
					p.rep.ServiceCPUSeconds = sampleProcs(benchServices).cpuSecondsSince(procs0)
					p.rep.PeakRSSMB = float64(peakRSS()) / (1 << 20)
					p.finish(r)
					pt.done(fmt.Sprintf("%d rows in %s: %s messages/s, %s readings/s end to end",
						want, benchRound(elapsed), benchHuman(p.rep.MessagesPerSec), benchHuman(p.rep.ReadingsPerSec)))
					return nil
				}
			}
		}
		pt.maybe(func() string {
			bl := backlog()
			if publishing {
				if !sampled {
					p.rep.BacklogStart, sampled = bl, true
				}
				p.rep.BacklogMax = max(p.rep.BacklogMax, bl)
			}
			if w, ok := roleMetric(r, "edgeplat_ingestion_workers"); ok {
				p.rep.WorkersMax = max(p.rep.WorkersMax, int(w))
			}
			inserted, _ := roleMetric(r, "edgeplat_ingestion_readings_inserted_total")
			el := time.Since(t0).Seconds()
			return fmt.Sprintf("%d/%.0f published (%s msg/s), %.0f/%d rows committed (%.0f%%, %s rows/s), backlog %d messages, %d probes",
				p.published.Load(), total, benchHuman(float64(p.published.Load())/el), inserted, want, 100*inserted/float64(want),
				benchHuman(inserted/el), bl, len(p.probeLatencies()))
		})
	}
}

// finish fills in the counters and the latency quantiles.
func (p *pipelineRun) finish(r *rt.Runtime) {
	if w, ok := roleMetric(r, "edgeplat_ingestion_workers"); ok {
		p.rep.WorkersMax = max(p.rep.WorkersMax, int(w))
	}
	dup, _ := roleMetric(r, "edgeplat_api_telemetry_duplicates_total")
	p.rep.Duplicates = int64(dup)
	p.rep.Dropped = int64(pipelineMetricSum(r, "edgeplat_api_mqtt_messages_dropped_total"))
	g := p.rep.BacklogStart
	p.rep.BacklogGrew = p.rep.BacklogEnd > max(2*g, g+100)
	lat := p.probeLatencies()
	slices.Sort(lat)
	p.rep.ProbesOK = len(lat)
	if len(lat) > 0 {
		q := func(f float64) float64 {
			i := min(len(lat)-1, int(math.Ceil(f*float64(len(lat))))-1)
			return float64(lat[max(0, i)]) / float64(time.Millisecond)
		}
		p.rep.LatencyP50Ms, p.rep.LatencyP99Ms, p.rep.LatencyMaxMs = q(0.5), q(0.99), q(1)
	}
}

// waitSubscribed publishes a state report of the probe agent (counted by
// serve-api, never stored) until the subscriber has received one: only
// then do telemetry publishes have a subscriber to reach.
func (p *pipelineRun) waitSubscribed(ctx context.Context, r *rt.Runtime, c paho.Client, done <-chan error) error {
	topic := "i/" + p.tenant + "/a/" + p.probe + "/state"
	base := pipelineMetricLabel(r, "edgeplat_api_mqtt_messages_received_total", "kind", "state")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		c.Publish(topic, 1, false, []byte(`{}`)).WaitTimeout(2 * time.Second)
		for range 20 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case err := <-done:
				return fmt.Errorf("roles stopped early: %v", err)
			case <-time.After(10 * time.Millisecond):
			}
			if pipelineMetricLabel(r, "edgeplat_api_mqtt_messages_received_total", "kind", "state") > base {
				return nil
			}
		}
	}
	return fmt.Errorf("the serve-api subscriber received nothing from the broker at %s within 30s", p.apiCfg.MQTT.BrokerURL)
}

// runProbe publishes one single-reading message every --probe-interval and
// polls PostgreSQL until its row is visible, recording publish -> visible.
func (p *pipelineRun) runProbe(ctx context.Context, c paho.Client, stop <-chan struct{}) {
	topic := p.topic(p.probe)
	agent := pipelineUUID(p.probe)
	kid := randomAlnum(codec.KidLen)
	format := codec.Format(p.o.Format)
	tick := time.NewTicker(p.o.ProbeEvery)
	defer tick.Stop()
	var last int64
	for seq := uint64(1); ; seq++ {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-tick.C:
		}
		ts := max(time.Now().UnixMilli(), last+1)
		last = ts
		id, _ := codec.FormatMsgID(kid, seq)
		env := map[string]any{"timestamp": ts, "protocol": "modbus", "msgId": id, "messages": []any{map[string]any{"readings": []any{
			map[string]any{"deviceName": "probe", "metric": "latency", "value": float64(seq), "quality": "GOOD", "timestamp": ts}}}}}
		data, err := codec.Encode(env, codec.EncodeOptions{Format: format})
		if err != nil {
			panic("BUG: probe message does not encode: " + err.Error())
		}
		t0 := time.Now()
		tok := c.Publish(topic, 1, false, data)
		if !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
			p.rep.ProbesLost++
			continue
		}
		p.probeRows.Add(1)
		at := time.UnixMilli(ts)
		for {
			var ok bool
			// An unnamed statement is planned for the table as it is now.
			// A cached prepared statement would switch to the generic plan
			// made while the table was empty, a sequential scan, and each
			// poll would then read every row committed so far: in one
			// 1.6M-row run that was 43M rows read by 119 polls, CPU taken
			// from the ingest being measured.
			err := p.b.db.Pool().QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM readings WHERE agent_uuid = $1::uuid AND metric_name = 'probe.latency' AND time = $2 AND tenant_id = $3)`,
				pgx.QueryExecModeExec, agent, at, p.tenant).Scan(&ok)
			if err == nil && ok {
				p.latMu.Lock()
				p.latencies = append(p.latencies, time.Since(t0))
				p.latMu.Unlock()
				break
			}
			if ctx.Err() != nil || time.Since(t0) > pipelineProbeExpire {
				p.rep.ProbesLost++
				break
			}
			time.Sleep(pipelineProbePoll)
		}
	}
}

func (p *pipelineRun) probeLatencies() []time.Duration {
	p.latMu.Lock()
	defer p.latMu.Unlock()
	return slices.Clone(p.latencies)
}

// agentUUIDsWithProbe returns the publishers' agents and the probe's as
// UUID strings.
func (p *pipelineRun) agentUUIDsWithProbe() []string {
	return append(p.agentUUIDs(), pipelineUUID(p.probe))
}

func pipelineUUID(id22 string) string {
	u, err := codec.DecodeID(id22)
	if err != nil {
		panic("BUG: bench agent id: " + err.Error())
	}
	return u.String()
}

// cleanup removes the bench tenant's streams, its msgId de-duplication keys
// (as serve-api names them) and its rows.
func (p *pipelineRun) cleanup(ctx context.Context) error {
	cctx, cancel := cleanupCtx(ctx)
	defer cancel()
	_, serr := p.b.store.Delete(cctx, telemetry.IngestionStream(p.tenant), telemetry.DLQStream(p.tenant), telemetry.LogsStream(p.tenant))
	kerr := p.deleteDedupKeys(cctx, p.b.store)
	// The probe's keys expire with the capped TTL (at most an hour).
	_, derr := p.b.db.Pool().Exec(cctx, `DELETE FROM readings WHERE agent_uuid = ANY($1::uuid[]) AND tenant_id = $2`, p.agentUUIDsWithProbe(), p.tenant)
	if err := errors.Join(serr, kerr, derr); err != nil {
		return fmt.Errorf("clean up bench tenant %s: %w", p.tenant, err)
	}
	if p.o.Vacuum {
		return vacuumReadings(ctx, p.b.db, p.b.log)
	}
	return nil
}

// pipelineForgetSession removes the subscriber's persistent session from
// the broker: connecting with a clean session discards it, so the broker
// stops queueing other tenants' traffic for a client that never returns.
func pipelineForgetSession(m config.MQTT, clientID string) {
	if c, err := pipelineConnect(m, clientID, true); err == nil {
		c.Disconnect(100)
	}
}

// pipelineMetricLabel reads one labelled counter of the registry.
func pipelineMetricLabel(r *rt.Runtime, name, label, value string) float64 {
	mfs, err := r.Metrics.Gather()
	if err != nil {
		return 0
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value && m.GetCounter() != nil {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// benchRegistry is the registry of the roles a bench runs in its own
// process. It leaves out the Go runtime and process collectors of
// metrics.NewRegistry: the pipeline bench reads its counters every 10 ms
// until the last row is committed, and each Gather read /proc/self/stat,
// limits, fds and netstat for the process collector. That was 12 % of the
// process's CPU in a 24,000-message run, charged to edgeplat's CPU per
// message although no role does it. Nothing scrapes a bench's /metrics.
func benchRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// pipelineMetricSum sums every series of one counter.
func pipelineMetricSum(r *rt.Runtime, name string) float64 {
	mfs, err := r.Metrics.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomAlnum(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

// writeHeader writes what the run measured and where.
func (rep PipelineReport) writeHeader(w io.Writer) {
	h := rep.Host
	fmt.Fprintf(w, "%d publishers x %d messages x %d readings = %d rows, %s (%.0f bytes/message), rate %s; %d CPUs\n",
		rep.Publishers, rep.MessagesPerPub, rep.ReadingsPerMessage, rep.Messages*rep.ReadingsPerMessage, rep.Format, rep.PayloadBytes,
		pipelineRate(rep.TargetRate), h.CPUs)
	fmt.Fprintf(w, "broker %s; PostgreSQL %s at %s; Redis %s db %d; ingest profile %s, up to %d workers\n",
		rep.Broker, h.Postgres, h.PostgresAt, h.Redis, h.RedisDatabase, rep.Profile, rep.WorkersMax)
}

// writeRound writes one round of several on one line.
func (rep PipelineReport) writeRound(w io.Writer) {
	grew := "no"
	if rep.BacklogGrew {
		grew = "yes"
	}
	fmt.Fprintf(w, "end to end %.0f readings/s (published at %.0f messages/s, drain %.2fs, backlog grew: %s), p50/p99 %.0f/%.0f ms",
		rep.ReadingsPerSec, rep.PublishRate, rep.DrainSeconds, grew, rep.LatencyP50Ms, rep.LatencyP99Ms)
	if rep.IngestOnly != nil {
		fmt.Fprintf(w, "; ingestion-only %.0f readings/s; ratio %.2f", rep.IngestOnly.ReadingsPerSec, rep.Ratio)
	}
	fmt.Fprintf(w, "; %d duplicates, %d dropped\n", rep.Duplicates, rep.Dropped)
}

func (rep PipelineReport) write(w io.Writer) {
	rep.writeHeader(w)
	fmt.Fprintf(w, "end to end:     %d rows in %.2fs: %.0f messages/s, %.0f readings/s (publishing took %.2fs at %.0f messages/s; drain after it %.2fs)\n",
		rep.Rows, rep.ElapsedSeconds, rep.MessagesPerSec, rep.ReadingsPerSec, rep.PublishSeconds, rep.PublishRate, rep.DrainSeconds)
	grew := "no"
	if rep.BacklogGrew {
		grew = "yes"
	}
	fmt.Fprintf(w, "backlog grew:   %s (%d messages 1 s in, %d at end of publishing, max %d; stream length %d)\n",
		grew, rep.BacklogStart, rep.BacklogEnd, rep.BacklogMax, rep.StreamLenEnd)
	fmt.Fprintf(w, "latency:        p50 %.0f ms, p99 %.0f ms, max %.0f ms over %d probes (%d lost)\n",
		rep.LatencyP50Ms, rep.LatencyP99Ms, rep.LatencyMaxMs, rep.ProbesOK, rep.ProbesLost)
	if rep.IngestOnly != nil {
		fmt.Fprintf(w, "ingestion-only: %d rows in %.2fs: %.0f readings/s\n", rep.IngestOnly.Rows, rep.IngestOnly.ElapsedSeconds, rep.IngestOnly.ReadingsPerSec)
		fmt.Fprintf(w, "ratio:          %.2f (end to end / ingestion-only)\n", rep.Ratio)
	}
	fmt.Fprintf(w, "process:        %.1f CPU s, peak RSS %.0f MB; %d duplicates, %d dropped\n", rep.CPUSeconds, rep.PeakRSSMB, rep.Duplicates, rep.Dropped)
	if rep.Host.CPUs > 0 && rep.MessagesPerSec > 0 {
		fmt.Fprintf(w, "cpu/message:    end to end: %s (%d CPUs give %.0f µs a message at this rate)\n",
			formatCPUPerMessage(rep.CPUSeconds, rep.ServiceCPUSeconds, float64(rep.Messages)), rep.Host.CPUs, float64(rep.Host.CPUs)/rep.MessagesPerSec*1e6)
	}
	if ing := rep.IngestOnly; ing != nil && ing.Messages > 0 {
		fmt.Fprintf(w, "                ingestion-only: %s\n", formatCPUPerMessage(ing.CPUSeconds, ing.ServiceCPUSeconds, float64(ing.Messages)))
	}
}

func pipelineRate(r float64) string {
	if r == 0 {
		return "unbounded"
	}
	return fmt.Sprintf("%.0f messages/s", r)
}
