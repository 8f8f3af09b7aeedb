// Package api is the serve-api role: the Cloud API's REST server under
// /api/v1, its health and metrics endpoints, and (as they land) the MQTT
// telemetry pipeline and authentication. It imports core and config only;
// cmd composes it with the other roles.
package api

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

// Options carries what cmd decides beyond the config: the flag that changes
// the port, which differs between serve-api and all-in-one.
type Options struct {
	PortHint string
}

// New builds the role's services without doing I/O. The HTTP server comes
// first so it stops last and drains in-flight requests.
func New(cfg *config.Config, r *rt.Runtime, opts Options) ([]lifecycle.Service, error) {
	log := r.Component("api")
	engine := httpx.NewEngine(httpx.EngineOptions{
		Logger:       log,
		WriteError:   WriteError,
		MaxBodyBytes: int64(cfg.API.MaxBodyBytes),
	})
	h := &handlers{rt: r}
	engine.GET("/", h.info)
	engine.GET("/health", h.health)
	engine.GET("/metrics", gin.WrapH(metrics.Handler(r.Metrics)))

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
	return []lifecycle.Service{srv}, nil
}

// WriteError renders the Cloud API's one error shape:
// {"error": {"code": "...", "message": "..."}}.
func WriteError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

type handlers struct {
	rt *rt.Runtime
}

func (h *handlers) info(c *gin.Context) {
	bi := buildinfo.Get()
	c.JSON(http.StatusOK, gin.H{"service": "edgeplat-api", "version": bi.Version, "commit": bi.Commit, "apiBase": "/api/v1"})
}

// health answers liveness probes: 200 when every registered dependency
// answers, 503 otherwise, with each dependency's state.
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
