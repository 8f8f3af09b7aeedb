// Package agent is the agent role: the edge agent's local HTTP API on port
// 48484 and, as they land, its store, protocol adapters and publishing. It
// imports core and config only; cmd composes it.
package agent

import (
	"crypto/subtle"
	"net"
	"net/http"
	"strconv"

	"github.com/edgeplat/edgeplat/config"
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

// New builds the role's services without doing I/O. In LOCALHOST_ONLY mode
// the API binds loopback only; in key mode it binds every interface and
// every route but /ping needs the key.
func New(cfg *config.Config, r *rt.Runtime, opts Options) ([]lifecycle.Service, error) {
	log := r.Component("agent")
	bind := "127.0.0.1"
	if cfg.Agent.KeyMode() {
		bind = "0.0.0.0"
	}
	srv, err := httpx.NewServer(httpx.ServerOptions{
		Name:     "agent-http",
		Addr:     net.JoinHostPort(bind, strconv.Itoa(cfg.Agent.Port)),
		Handler:  newEngine(cfg, r),
		PortHint: opts.PortHint,
		Logger:   log,
	})
	if err != nil {
		return nil, err
	}
	return []lifecycle.Service{srv}, nil
}

func newEngine(cfg *config.Config, r *rt.Runtime) *gin.Engine {
	engine := httpx.NewEngine(httpx.EngineOptions{Logger: r.Component("agent"), WriteError: WriteError})
	engine.GET("/ping", func(c *gin.Context) { c.String(http.StatusOK, "OK") })
	protected := engine.Group("/")
	if cfg.Agent.KeyMode() {
		protected.Use(requireKey(cfg.Agent.APIKey.Reveal()))
	}
	protected.GET("/metrics", gin.WrapH(metrics.Handler(r.Metrics)))
	return engine
}

// WriteError renders the agent API's error shape: {"error": "..."}.
func WriteError(c *gin.Context, status int, _ string, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": message})
}

// requireKey checks X-Api-Key or ?apiKey= in constant time.
func requireKey(key string) gin.HandlerFunc {
	want := []byte(key)
	return func(c *gin.Context) {
		got := c.GetHeader("X-Api-Key")
		if got == "" {
			got = c.Query("apiKey")
		}
		if subtle.ConstantTimeCompare([]byte(got), want) != 1 {
			WriteError(c, http.StatusUnauthorized, "unauthorized", "missing or invalid API key")
			return
		}
		c.Next()
	}
}
