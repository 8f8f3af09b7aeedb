// Package httpapi is the agent's local HTTP API (docs/agent.md): routes,
// middleware and the error shape. Each resource group registers its routes
// from its own file; what the routes act on comes in Deps as interfaces
// declared here, so the package knows nothing of the agent's store,
// runner or publisher.
package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/metrics"
)

// MaxBody caps request bodies; endpoint definitions are the largest.
const MaxBody = 1 << 20

// Deps is what the routes act on. Every field is needed but UI and
// Simulation.
type Deps struct {
	Log *slog.Logger
	// KeyMode and APIKey are the security mode (docs/agent.md, section
	// Security modes): without key mode the API answers loopback only.
	KeyMode bool
	APIKey  string
	// BodyTimeout is lifecycle.http_body_timeout.
	BodyTimeout time.Duration
	Metrics     *prometheus.Registry

	// Changed, when set, is told of every request that changed something
	// (a write answered below 400): the agent releases the pages of such
	// one-off work once writes settle (docs/agent.md, "Footprint").
	Changed func()

	Store      StoreGate
	Lifecycle  Lifecycle
	Admins     AdminStore
	Endpoints  Endpoints
	Adapters   Adapters
	Publishing Publishing
	Cloud      Cloud
	Settings   Settings
	System     System
	Jobs       Jobs
	Apps       Apps
	Drift      Drift
	Anomaly    Anomaly
	// Simulation is nil while simulation mode is off.
	Simulation Simulation
	Discovery  Discovery
	// UI is the admin UI served at /admin (roles/agent/adminui); nil
	// serves none.
	UI UI
}

// UI is a web console mounted beside the API. It is mounted behind the
// loopback guard but before the store hold and the JSON body rule: its
// pages are files, served while the agent initialises as well.
type UI interface {
	Mount(r gin.IRoutes)
}

// StoreGate keeps the agent's store open while a request uses it.
type StoreGate interface {
	// Hold keeps the store from closing until release is called.
	Hold() (release func())
}

// Errors the interfaces of Deps return for the routes to map onto
// statuses. Implementations wrap them.
var (
	// ErrNotReady: the agent initialises and its store is not open yet.
	ErrNotReady = errors.New("the agent is initialising; its store is not open yet")
	// ErrNotFound: no such row.
	ErrNotFound = errors.New("not found")
	// ErrDuplicate: a name that is taken.
	ErrDuplicate = errors.New("exists already")
	// ErrLastSuperuser: the change would leave no active superuser.
	ErrLastSuperuser = errors.New("no active superuser would be left")
	// ErrNotProvisioned: the agent has no cloud to talk to.
	ErrNotProvisioned = errors.New("the agent is not provisioned; POST /v1/provision first")
)

// Error is a failure the client is told as it is: its status, its message
// and any further fields of the answer.
type Error struct {
	Status  int
	Message string
	Extra   gin.H
}

func (e *Error) Error() string { return e.Message }

// Errorf makes an *Error.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Invalid is a 400 naming every problem of err (joined errors on one line).
func Invalid(err error) *Error {
	return &Error{Status: http.StatusBadRequest, Message: strings.ReplaceAll(err.Error(), "\n", "; ")}
}

// WriteError renders the agent API's error shape: {"error": "..."}.
func WriteError(c *gin.Context, status int, _ string, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": message})
}

func fail(c *gin.Context, status int, format string, args ...any) {
	WriteError(c, status, "", fmt.Sprintf(format, args...))
}

// bind decodes a strict JSON body or answers 400 naming the field.
func bind(c *gin.Context, dst any) bool {
	return httpx.BindStrict(c, MaxBody, dst, WriteError)
}

func readBody(c *gin.Context) ([]byte, bool) {
	return httpx.ReadBody(c, MaxBody, WriteError)
}

// routes carries Deps to the handlers.
type routes struct{ Deps }

// respond answers err: an *Error as it is, ErrNotReady 503, and anything
// else a logged 500 naming what failed but not how, so nothing internal
// leaks.
func (r routes) respond(c *gin.Context, what string, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
		h := gin.H{"error": e.Message}
		for k, v := range e.Extra {
			h[k] = v
		}
		c.AbortWithStatusJSON(e.Status, h)
	case errors.Is(err, ErrNotReady):
		fail(c, http.StatusServiceUnavailable, "%v", ErrNotReady)
	case errors.Is(err, context.Canceled):
		c.Abort()
	default:
		r.Log.Error(what, "err", err, "route", c.FullPath())
		fail(c, http.StatusInternalServerError, "%s failed; see the agent log", what)
	}
}

// reply answers v with status, or err as respond does.
func (r routes) reply(c *gin.Context, status int, what string, v any, err error) {
	if err != nil {
		r.respond(c, what, err)
		return
	}
	c.JSON(status, v)
}

// New builds the API: the shared middleware, then every group's routes.
func New(d Deps) *gin.Engine {
	e := httpx.NewEngine(httpx.EngineOptions{Logger: d.Log, WriteError: WriteError, MaxBodyBytes: MaxBody,
		BodyTimeout: d.BodyTimeout, Metrics: d.Metrics, Server: "agent"})
	if !d.KeyMode {
		e.Use(loopbackOnly())
	}
	r := routes{Deps: d}
	if d.UI != nil {
		d.UI.Mount(e)
	}
	e.Use(requireJSONBody, r.holdStore)
	if d.Changed != nil {
		e.Use(changed(d.Changed))
	}
	e.GET("/ping", func(c *gin.Context) { c.String(http.StatusOK, "OK") })
	v1 := e.Group("/v1")
	// The cloud roles' health path, so one probe configuration fits
	// every role; same answer as /v1/healthy.
	e.GET("/health", probeRoutes{r}.healthy)
	RegisterProbes(v1, d)
	RegisterAuth(v1, d)
	p := v1.Group("/", r.requireKeyOrSession())
	RegisterHealth(p, d)
	RegisterSystem(p, d)
	RegisterEndpoints(p, d)
	RegisterPublish(p, d)
	RegisterCloud(p, d)
	RegisterSettings(p, d)
	RegisterJobs(p, d)
	RegisterApps(p, d)
	RegisterDrift(p, d)
	RegisterAnomaly(p, d)
	RegisterSimulation(p, d)
	RegisterDiscovery(p, d)
	e.GET("/metrics", r.requireKeyOrSession(), gin.WrapH(metrics.Handler(d.Metrics)))
	return e
}

// changed calls fn after each write that succeeded.
func changed(fn func()) gin.HandlerFunc {
	return func(c *gin.Context) {
		c.Next()
		switch c.Request.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			return
		}
		if c.Writer.Status() < http.StatusBadRequest {
			fn()
		}
	}
}
