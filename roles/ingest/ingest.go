// Package ingest is the ingest role: the worker service that moves telemetry
// from the stream store into the readings table. It serves only /health and
// /metrics. It imports core and config only; cmd composes it.
package ingest

import (
	"net"
	"net/http"
	"strconv"

	"github.com/edgeplat/edgeplat/config"
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
}

// New builds the role's services without doing I/O.
func New(cfg *config.Config, r *rt.Runtime, opts Options) ([]lifecycle.Service, error) {
	log := r.Component("ingest")
	engine := httpx.NewEngine(httpx.EngineOptions{Logger: log, WriteError: writeError})
	h := &handlers{rt: r}
	engine.GET("/health", h.health)
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
	return []lifecycle.Service{srv}, nil
}

func writeError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

type handlers struct {
	rt *rt.Runtime
}

func (h *handlers) health(c *gin.Context) {
	rep := h.rt.Health.Report(c.Request.Context())
	status, code := "ok", http.StatusOK
	if !rep.Healthy {
		status, code = "error", http.StatusServiceUnavailable
	}
	c.JSON(code, gin.H{
		"status":     status,
		"uptime":     rep.Uptime.Seconds(),
		"version":    buildinfo.Get().Version,
		"components": rep.Components,
	})
}
