// Package api is the serve-api role: the Cloud API's MQTT telemetry pipeline
// (subscriber, decoding, de-duplication, stream append, spool), its health
// and metrics endpoints, and (as they land) the REST API under /api/v1 and
// authentication. It imports core and config only;
// cmd composes it with the other roles.
package api

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/webui"
	"github.com/edgeplat/edgeplat/roles/api/agentlogs"
	"github.com/edgeplat/edgeplat/roles/api/ai"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	apibrokerauth "github.com/edgeplat/edgeplat/roles/api/brokerauth"
	"github.com/edgeplat/edgeplat/roles/api/brokermon"
	"github.com/edgeplat/edgeplat/roles/api/command"
	"github.com/edgeplat/edgeplat/roles/api/console"
	"github.com/edgeplat/edgeplat/roles/api/dashboards"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
	eventlog "github.com/edgeplat/edgeplat/roles/api/events"
	"github.com/edgeplat/edgeplat/roles/api/export"
	"github.com/edgeplat/edgeplat/roles/api/jobs"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/openapi"
	"github.com/edgeplat/edgeplat/roles/api/promapi"
	"github.com/edgeplat/edgeplat/roles/api/readings"
	"github.com/edgeplat/edgeplat/roles/api/receipts"
	"github.com/edgeplat/edgeplat/roles/api/registry"
	"github.com/edgeplat/edgeplat/roles/api/retention"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
	"github.com/edgeplat/edgeplat/roles/api/token"
	"github.com/gin-gonic/gin"
)

// Options carries what cmd decides beyond the config: the flag that changes
// the port, which differs between serve-api and all-in-one.
type Options struct {
	PortHint string
	// BrokerAuth is the broker authorizer all-in-one shares with its
	// embedded broker; nil makes New build its own for the callbacks.
	BrokerAuth *BrokerAuth
	// BrokerStats is the embedded broker's counters in all-in-one; nil
	// reads an external broker's $SYS topics (docs/broker-monitoring.md).
	BrokerStats brokermon.Source
}

// New builds the role's services without doing I/O; the services use b
// from their Start on. The HTTP server comes first so it stops last and
// drains in-flight requests.
func New(cfg *config.Config, r *rt.Runtime, b rt.Backends, opts Options) ([]lifecycle.Service, error) {
	log := r.Component("api")
	tokens, err := token.New(cfg.JWT)
	if err != nil {
		return nil, err
	}
	pipe, err := newPipeline(cfg, r, b.Streams)
	if err != nil {
		return nil, err
	}
	mo := mqttOptions(cfg, b.DB)
	mo.Name, mo.Logger, mo.Registerer = "api-mqtt", r.Logger, r.Metrics // mqttx adds component=Name
	// Handlers spend most of their time waiting on the stream store, and a
	// subscriber that falls behind makes the broker drop its queue: run
	// several at once. Messages of one topic (one agent endpoint) stay in
	// order; nothing orders different agents anyway.
	mo.HandlerWorkers, mo.HandlerBuffer = 4*runtime.GOMAXPROCS(0), 256
	// The command publisher waits for the connection to come back; the
	// client tells it, once started (after cmds is set).
	var cmds *command.Publisher
	// A replica that stops leaves the shared group when another member
	// takes its share over (sharedgroup.go); without Redis it never does.
	var client *mqttx.Client
	members := newGroupMembers(b.Streams, b.DB, mo.SharedGroup, func() string { return client.ClientID() },
		func() bool { return client.State() == mqttx.StateConnected }, r.Component("api-mqtt-group"))
	if members != nil {
		mo.LeaveShared = members.Leave
	}
	prev := mo.OnStateChange
	mo.OnStateChange = func(from, to mqttx.State) {
		if prev != nil {
			prev(from, to)
		}
		cmds.StateChanged(from, to)
		if members != nil {
			members.StateChanged(from, to)
		}
	}
	client, err = mqttx.New(mo)
	if err != nil {
		return nil, fmt.Errorf("mqtt client (mqtt.*, MQTT_*): %w", err)
	}
	cmds, err = command.New(client, command.Options{QoS: byte(cfg.MQTT.QoS), Logger: r.Component("api-commands"), Registerer: r.Metrics})
	if err != nil {
		return nil, err
	}
	// Telemetry handlers hand what is waiting to the store in one round
	// trip, so a subscriber that falls behind catches up instead of
	// letting the broker's per-client queue overflow.
	if err := client.SubscribeBatch(endpointsFilter, byte(cfg.MQTT.QoS), pipe.handleBatch); err != nil {
		return nil, err
	}
	// The broker's own count of dropped messages is the one sign that a
	// subscriber fell so far behind that messages were lost.
	mon, err := brokermon.New(brokermon.Options{Source: opts.BrokerStats, Logger: r.Component("api-broker-monitor"),
		Connected: func() bool { return client.State() == mqttx.StateConnected }})
	if err != nil {
		return nil, err
	}
	pipe.topics = mon
	drops := newDropWatch(r.Component("api-mqtt"), r.Metrics)
	if opts.BrokerStats != nil {
		err = drops.subscribe(client)
	} else {
		// The same subscription feeds the broker monitor.
		err = subscribeSys(client, drops, mon)
	}
	if err != nil {
		return nil, err
	}
	sm := newStatusMetrics(r.Metrics)
	offlineAfter := cfg.API.AgentOfflineAfter
	if offlineAfter <= 0 {
		offlineAfter = registry.DefaultOfflineAfter
	}
	// lastSeen moves with every agent message; a second's coalescing keeps
	// it to one statement a second per replica, whatever the message rate.
	seen := newLastSeen(b.DB, r.Component("api-last-seen"), sm, time.Second)
	pipe.seen = seen
	rep := newReports(r, b.DB)
	rep.seen, rep.offlineAfter = seen, offlineAfter
	rep.received = pipe.m.received
	rep.clock = pipe.clock
	// The event log keeps a state report each time what it says changed.
	em := eventlog.NewMetrics(r.Metrics)
	snaps := eventlog.NewSnapshots(b.DB, em)
	rep.snapshot = snaps.Record
	for _, f := range reportFilters {
		if err := client.Subscribe(f, byte(cfg.MQTT.QoS), observed(mon, pipe.limits, rep.handle)); err != nil {
			return nil, err
		}
	}
	r.Health.Register("mqtt", client.Check)
	engine := httpx.NewEngine(httpx.EngineOptions{
		Logger:         log,
		WriteError:     WriteError,
		MaxBodyBytes:   int64(cfg.API.MaxBodyBytes),
		BodyTimeout:    cfg.Lifecycle.HTTPBodyTimeout,
		Metrics:        r.Metrics,
		Server:         "api",
		TrustedProxies: splitList(cfg.Auth.TrustedProxies),
	})
	h := &handlers{rt: r, pipe: pipe}
	ba := opts.BrokerAuth
	ownBrokerAuth := ba == nil
	if ownBrokerAuth {
		if ba, err = NewBrokerAuth(cfg, r, b.DB); err != nil {
			return nil, err
		}
	}
	acc, err := newAccess(cfg, r, b, tokens)
	if err != nil {
		return nil, err
	}
	acc.revoked, acc.invalidate = ba.Revoked, ba.Authorizer.Invalidate
	acc.agents.SetOfflineAfter(offlineAfter)
	watch := &statusWatch{db: b.DB, streams: b.Streams, audit: acc.accounts.Record, log: r.Component("api-agent-status"), m: sm,
		every: statusEvery(offlineAfter), offlineAfter: offlineAfter, now: time.Now}
	noticeTargetStates(acc.agents, cmds, r.Component("api-commands"))
	publishFleetEvents(acc.agents, b.Streams, r.Component("api-fleets"))
	lv := newLive(b.Streams, maxLiveStreams, r.Metrics)
	site, err := console.New()
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	site.Mount(engine)
	engine.GET("/", h.info)
	engine.GET("/health", h.health)
	engine.GET("/metrics", gin.WrapH(metrics.Handler(r.Metrics)))
	openapi.Register(engine)
	// Everything under /api/v1 but the routes that create a session or
	// carry their own credential needs one; the caller's tenant comes from
	// it and scopes every query.
	public, v1 := acc.mount(engine)
	if err := apibrokerauth.Register(engine, ba.Authorizer, cfg.BrokerAuth, WriteError); err != nil {
		return nil, err
	}
	v1.GET("/metrics/ingestion-health", h.ingestionHealth)
	agent := acc.agentGuard("uuid")
	v1.GET("/agents/events", lv.tenantEvents)
	v1.GET("/agents/:uuid/stream", agent, lv.stream)
	v1.GET("/agents/:uuid/current-state", agent, rep.currentState)
	v1.GET("/agents/:uuid/metrics", agent, rep.systemMetrics)
	v1.GET("/agents/:uuid/device-health", agent, rep.deviceHealth)
	v1.GET("/agents/:uuid/protocol-adapters/:protocol/:deviceName/history", agent, rep.deviceHistory)
	// The pipeline hands the anomaly evaluator each batch it appends; the
	// agents' events come on their own topic.
	an := anomaly.New(acc.anomalyDeps(agent))
	pipe.observe = an.Observe
	events := &agentEvents{x: an, log: r.Component("api-events"), received: pipe.m.received, seen: seen}
	if err := client.Subscribe(eventsFilter, byte(cfg.MQTT.QoS), observed(mon, pipe.limits, events.handle)); err != nil {
		return nil, err
	}
	an.Register(v1)
	prune := eventlog.NewPruner(b.DB, cfg.API.EventsRetention, 0, snaps, em, r.Component("api-events-log"))
	// Partitions ahead and raw retention (docs/database.md); every
	// replica runs it, an advisory lock lets one at a time work.
	ret := retention.New(b.DB, cfg.API.ReadingsRetention, retention.Options{
		Metrics: retention.NewMetrics(r.Metrics), Log: r.Component("api-readings-retention")})
	// The rollups of readings (docs/readings-api.md, section Rollups),
	// next to the event log's pruner: both only keep tables in shape.
	ro := rollup.OptionsFrom(cfg.API)
	ro.Logger, ro.Registerer = r.Component("api-rollup"), r.Metrics
	roll := rollup.New(b.DB, ro)
	sc := newSystemConfig(cfg, r, b, acc, pipe, retainers{events: prune, readings: ret, rollups: roll})
	registerAdmin(v1, r, b, acc, pipe, client, sc)
	if err := registerExtDash(v1, cfg, r, acc); err != nil {
		return nil, err
	}
	jd := acc.jobsDeps(cmds)
	jobs.Register(v1, engine.Group("/api/v1"), jd)
	dashboards.Register(v1, dashboards.Deps{DB: b.DB, Caller: caller, WriteError: WriteError, Audit: acc.audit,
		Log: r.Component("api-dashboards")})
	eventlog.Register(v1, eventlog.Deps{DB: b.DB, Registry: acc.agents, Caller: caller, WriteError: WriteError, Audit: acc.audit,
		AdminGate: httpx.RateLimit(acc.admin, adminKey, WriteError), Log: r.Component("api-events-log")})
	agentlogs.Register(v1, agentlogs.Deps{DB: b.DB, Tenant: tenantKey, WriteError: WriteError, AgentGuard: agent,
		Log: r.Component("api-agent-logs")})
	ai.Register(v1, ai.Deps{Caller: caller, WriteError: WriteError,
		Licence: acc.licence.RequireFeature(licence.FeatureAI, WriteError),
		Agents:  acc.agents, Readings: readings.Reader{DB: b.DB}, Incidents: an,
		Events: ai.LogEvents{DB: b.DB}, Config: cfg.API, Registerer: r.Metrics,
		Limit: acc.limiter("ai", max(cfg.API.AIRateLimit, 0)), Log: r.Component("api-ai")})
	exp := export.New(export.Deps{DB: b.DB, Caller: caller, WriteError: WriteError, Feature: acc.licence.CheckFeature,
		Audit: acc.audit, Settings: export.SettingsFrom(cfg.API), Log: r.Component("api-export")})
	exp.Register(v1, public)
	readings.Register(v1, readings.Deps{
		DB:         b.DB,
		Tenant:     tenantKey,
		WriteError: WriteError,
		Log:        r.Component("api-readings"),
		AgentGuard: acc.agentGuard("agent_uuid"),
		// Ownership of an agent comes from the registry, never from
		// readings someone wrote first.
		AgentRegistered: acc.agentRegistered,
		Clock:           pipe.clock.window,
		ClockSkew: func(tenant, agent string, s envelope.Skew, now time.Time) {
			pipe.clock.record("http", tenant, agent, s, now)
		},
	})
	brokermon.Register(v1, brokermon.Deps{Monitor: mon, Caller: caller, WriteError: WriteError,
		AdminGate: httpx.RateLimit(acc.admin, adminKey, WriteError), Log: r.Component("api-broker-monitor")})
	// Prometheus's query API for Grafana and promtool (docs/prometheus-api.md),
	// at its own base URL, where an API key may also come as a basic-auth
	// password; authentication and rate limit are the protected group's.
	prom := engine.Group("/api/v1/prom", promapi.BasicAPIKey, acc.auth.require, httpx.RateLimit(acc.global, acc.subjectKey, WriteError))
	promapi.Register(prom, promapi.Deps{DB: b.DB, Tenant: tenantKey, Log: r.Component("api-prom")})

	srv, err := httpx.NewServer(httpx.ServerOptions{
		Name:     "api-http",
		Addr:     net.JoinHostPort(cfg.API.Bind, strconv.Itoa(cfg.API.Port)),
		Handler:  engine,
		PortHint: opts.PortHint,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	// The subscriber starts last, once the pipeline can take messages, and
	// stops first, so no message arrives after the spool is closed.
	log.Info("rest api authentication", "algorithm", tokens.Algorithm(), "can_sign", tokens.CanSign())
	// lastSeen stops after the subscriber, so its last flush holds the
	// last messages. The command publisher comes after the client, so it
	// stops first and never hands a command to a client that is gone.
	// The job scheduler comes after the publisher, so it stops first and
	// never hands a dispatch to a publisher that is gone.
	// The anomaly evaluator and its dispatcher start before the pipeline,
	// so the rules are loaded when the first message comes, and stop after
	// it, so nothing is handed to an evaluator that is gone.
	// The system config applies the stored settings before the HTTP
	// server takes its first request.
	svcs := []lifecycle.Service{&licenceLoader{m: acc.licence, log: log}, acc.sync, sc}
	if s := acc.limitScope(b.DB); s != nil {
		svcs = append(svcs, s)
	}
	svcs = append(svcs, srv, lv, watch, seen, mon)
	svcs = append(svcs, an.Services()...)
	svcs = append(svcs, pipe, client, cmds, jobs.NewScheduler(jd, 0), exp.Service(), prune, ret, roll)
	if cfg.API.DeliveryReceipts {
		// After the publisher, so it stops first and its last receipts
		// still find the publisher running.
		tracker, err := receipts.New(receipts.Options{Sender: receiptSender{pub: cmds, log: r.Component("api-receipts")},
			Logger: r.Component("api-receipts"), Registerer: r.Metrics})
		if err != nil {
			return nil, err
		}
		pipe.receipts = tracker
		svcs = append(svcs, tracker)
	}
	if members != nil {
		// After the client, whose Start resolves the id it records, so
		// it stops first: a replica that stops is no member to count on.
		svcs = append(svcs, members)
	}
	if ownBrokerAuth {
		// First, so it stops last: the callbacks' refusals up to the
		// server's end are written.
		svcs = append([]lifecycle.Service{ba}, svcs...)
	}
	return svcs, nil
}

// mqttOptions maps the mqtt settings for the subscriber. Without
// mqtt.client_id the client id is "edgeplat-api-<installation>-<host>",
// the installation id coming from the database at Start: the host name
// alone let a fresh installation on a host where another had run resume
// that one's persistent session and write its queued messages into the
// wrong database. The host part keeps replicas of one installation on
// different hosts apart, as before. A database in use before the
// installation id existed keeps "edgeplat-api-<host>" (see
// db.Installation).
func mqttOptions(cfg *config.Config, d *db.DB) mqttx.Options {
	mo := mqttx.OptionsFromConfig(cfg.MQTT, "")
	if mo.ClientID == "" {
		mo.ResolveClientID = func(ctx context.Context) (string, error) {
			in, err := d.Installation(ctx)
			if err != nil {
				return "", fmt.Errorf("default from the installation id (or set %s): %w", config.Label("mqtt.client_id"), err)
			}
			if in.LegacyClientID {
				// Its broker session holds what was queued while it was
				// upgraded; a new id would strand that.
				return mqttx.DefaultClientID("edgeplat-api"), nil
			}
			return mqttx.DefaultClientID("edgeplat-api-" + in.ID[:min(len(in.ID), 12)]), nil
		}
	}
	return mo
}

// maxLiveStreams bounds open Server-Sent Event streams: each holds a
// connection, a goroutine and a store subscription.
const maxLiveStreams = 1000

// WriteError renders the Cloud API's one error shape:
// {"error": {"code": "...", "message": "..."}}.
//
// A server error met after the client hung up (a query cancelled with its
// request) is no failure of ours: it is answered, logged and counted as
// 499 client_closed_request, never as 503 database_unavailable.
func WriteError(c *gin.Context, status int, code, message string) {
	if status >= 500 && httpx.ClientGone(c) {
		status, code, message = httpx.StatusClientClosedRequest, "client_closed_request", "the client closed the request"
	}
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

type handlers struct {
	rt   *rt.Runtime
	pipe *pipeline
}

func (h *handlers) info(c *gin.Context) {
	// A browser opening the address gets the console; API clients keep
	// the service information.
	if webui.WantsHTML(c.Request) {
		c.Redirect(http.StatusFound, console.Prefix+"/")
		return
	}
	bi := buildinfo.Get()
	c.JSON(http.StatusOK, gin.H{"service": "edgeplat-api", "version": bi.Version, "commit": bi.Commit, "apiBase": "/api/v1"})
}

// health answers liveness probes with the health response: status,
// uptime and the state of the three dependencies; 200 when all are up, 503
// otherwise.
func (h *handlers) health(c *gin.Context) {
	rep := h.rt.Health.Report(c.Request.Context())
	status, code := "ok", http.StatusOK
	if !rep.Healthy {
		status, code = "error", http.StatusServiceUnavailable
	}
	body := gin.H{"status": status, "uptime": rep.Uptime.Seconds(), "version": buildinfo.Get().Version}
	errs := gin.H{}
	for name, st := range rep.Components {
		state := "up"
		if !st.Healthy {
			state = "down"
			errs[name] = st.Error
		}
		body[name] = state
	}
	if len(errs) > 0 {
		body["errors"] = errs
	}
	c.JSON(code, body)
}

// ingestionHealth is the ingestion status of the write path
// (docs/agents-api.md, section GET /metrics/ingestion-health).
func (h *handlers) ingestionHealth(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	connected := h.pipe.streams.Ping(ctx) == nil
	body := gin.H{"streamStoreConnected": connected, "circuitBreaker": h.pipe.breaker.State().String(),
		"spoolFileCount": 0, "spoolSizeMb": 0.0}
	if h.pipe.spool != nil {
		st := h.pipe.spool.Stats()
		body["spoolFileCount"], body["spoolSizeMb"] = st.Files, float64(st.Bytes)/(1<<20)
	}
	c.JSON(http.StatusOK, body)
}

// splitList splits a comma-separated setting, dropping blanks.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
