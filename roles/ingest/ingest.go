// Package ingest is the ingest role: the worker service that moves telemetry
// from the tenants' ingestion streams into the readings table. Workers read
// batches through each tenant's consumer group, normalise them to rows
// (metric_name = <deviceName>.<reading>), drop in-batch duplicates with the
// last value winning, sort by key, insert (binary COPY or conflict-ignoring
// INSERTs), acknowledge only after the commit, and trim only what every
// consumer has acknowledged. Bad input goes to the tenant's dead-letter
// stream; a failing database opens the circuit breaker and sends batches to
// the disk spool, or, without one, leaves them waiting in the stream: an
// outage never dead-letters anything. The role serves only /health and /metrics. It imports core
// and config only; cmd composes it.
package ingest

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/breaker"
	"github.com/edgeplat/edgeplat/core/buildinfo"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/gin-gonic/gin"
)

// Options carries what cmd decides beyond the config.
type Options struct {
	PortHint string
	// StreamPattern narrows the ingested streams to those matching this
	// glob (for example one tenant's stream, as the benchmark does); empty
	// means every tenant's ingestion stream.
	StreamPattern string
	// LogStreamPattern does the same for agent log streams.
	LogStreamPattern string
}

// New builds the role's services without doing I/O: the HTTP server first,
// so it answers health probes for the whole run and stops last, then the
// engine. The database and stream store of b are opened by cmd before this
// role starts.
func New(cfg *config.Config, r *rt.Runtime, b rt.Backends, opts Options) ([]lifecycle.Service, error) {
	return newWithIntervals(cfg, r, b, opts, defaultIntervals)
}

func newWithIntervals(cfg *config.Config, r *rt.Runtime, b rt.Backends, opts Options, every intervals) ([]lifecycle.Service, error) {
	if opts.StreamPattern != "" {
		every.pattern = opts.StreamPattern
	}
	if opts.LogStreamPattern != "" {
		every.logsPattern = opts.LogStreamPattern
	}
	eng, err := newEngine(cfg, r, b, every)
	if err != nil {
		return nil, err
	}
	log := r.Component("ingest")
	engine := httpx.NewEngine(httpx.EngineOptions{Logger: log, WriteError: writeError, BodyTimeout: cfg.Lifecycle.HTTPBodyTimeout})
	engine.GET("/health", func(c *gin.Context) { eng.health(c) })
	engine.GET("/metrics", gin.WrapH(metrics.Handler(r.Metrics)))

	srv, err := httpx.NewServer(httpx.ServerOptions{
		Name:     "ingest-http",
		Addr:     net.JoinHostPort(cfg.Ingest.Bind, strconv.Itoa(cfg.Ingest.Port)),
		Handler:  engine,
		PortHint: opts.PortHint,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	return []lifecycle.Service{srv, eng}, nil
}

func writeError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

// health answers with the ingestion health: ok; degraded while the
// breaker is open or the spool holds data; error when the stream store
// cannot be reached, or the database cannot be reached and there is no
// spool to absorb batches. 200 for ok and degraded, 503 for error.
func (e *engine) health(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 2*time.Second)
	defer cancel()
	var storeErr, dbErr error
	if e.store != nil {
		storeErr = e.store.Ping(ctx)
	}
	if e.db != nil {
		dbErr = e.db.Ping(ctx)
	}
	status, code := "ok", http.StatusOK
	spooled := e.spool != nil && !e.spool.Empty()
	switch {
	case e.store == nil || storeErr != nil || (dbErr != nil && e.spool == nil):
		status, code = "error", http.StatusServiceUnavailable
	case e.breaker.State() == breaker.Open || spooled || dbErr != nil || e.spoolFailing.Load():
		status = "degraded"
	}
	body := gin.H{
		"status":         status,
		"uptime":         e.rt.Health.Uptime().Seconds(),
		"workers":        e.workerCount(),
		"streamLag":      e.lagMS.Load(),
		"circuitBreaker": e.breaker.State().String(),
		"version":        buildinfo.Get().Version,
	}
	if e.spool != nil {
		st := e.spool.Stats()
		body["spoolFileCount"], body["spoolSizeMb"] = st.Files, float64(st.Bytes)/(1<<20)
		if e.spoolFailing.Load() {
			// Batches then wait in the stream; say why.
			body["spool"] = "appends failing (is its disk full?)"
		}
	}
	if storeErr != nil {
		body["streamstore"] = storeErr.Error()
	}
	if dbErr != nil {
		body["db"] = dbErr.Error()
	}
	c.JSON(code, body)
}
