package httpx

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrorWriter renders an error in a role's own JSON shape. Each HTTP role has
// exactly one, so handlers and shared middleware never hand-build bodies.
type ErrorWriter func(c *gin.Context, status int, code, message string)

// EngineOptions configures NewEngine.
type EngineOptions struct {
	Logger *slog.Logger
	// WriteError renders errors raised by shared middleware (panics, body
	// too large, unknown route).
	WriteError ErrorWriter
	// MaxBodyBytes caps every request body; 1 MiB when zero.
	MaxBodyBytes int64
	// BodyTimeout bounds how long a request body may take to arrive;
	// DefaultBodyTimeout when zero.
	BodyTimeout time.Duration
	// Metrics, when set, receives edgeplat_http_request_duration_seconds labelled
	// by method, route template and status code, with the constant label
	// server=Server, so the roles of all-in-one share one registry.
	Metrics prometheus.Registerer
	Server  string
	// TrustedProxies are the addresses or CIDRs whose X-Forwarded-For
	// c.ClientIP believes; none by default, so a client cannot pick the
	// address its rate limit and audit entries are keyed by.
	TrustedProxies []string
}

// DefaultMaxBodyBytes is the request body cap when a role sets none.
const DefaultMaxBodyBytes = 1 << 20

func init() {
	// gin's debug banner and route dump go to stdout from package state;
	// roles log through slog instead.
	gin.SetMode(gin.ReleaseMode)
}

// NewEngine returns a gin engine with recovery, request logging, security
// headers, a body size cap and time limit, a refusal of NUL characters in
// parameters, and JSON 404/405 answers in the role's error shape.
func NewEngine(opts EngineOptions) *gin.Engine {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.WriteError == nil {
		panic("BUG: httpx.NewEngine without an error writer")
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	e := gin.New()
	if err := e.SetTrustedProxies(opts.TrustedProxies); err != nil {
		// Validate has parsed the list already.
		panic("BUG: httpx.NewEngine: trusted proxies: " + err.Error())
	}
	e.HandleMethodNotAllowed = true
	e.ContextWithFallback = true
	e.Use(recovery(opts.Logger, opts.WriteError), securityHeaders, requestLog(opts.Logger),
		bodyDeadline(opts.BodyTimeout), limitBody(opts.MaxBodyBytes, opts.WriteError))
	if opts.Metrics != nil {
		e.Use(requestMetrics(opts.Metrics, opts.Server))
	}
	e.Use(refuseNULParams(opts.WriteError))
	e.NoRoute(func(c *gin.Context) {
		opts.WriteError(c, http.StatusNotFound, "not_found", "no route for "+c.Request.Method+" "+c.Request.URL.Path)
	})
	e.NoMethod(func(c *gin.Context) {
		opts.WriteError(c, http.StatusMethodNotAllowed, "method_not_allowed", c.Request.Method+" is not allowed on "+c.Request.URL.Path)
	})
	return e
}

func recovery(log *slog.Logger, write ErrorWriter) gin.HandlerFunc {
	return gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, rec any) {
		log.Error("panic in handler", "method", c.Request.Method, "path", c.FullPath(), "panic", rec)
		write(c, http.StatusInternalServerError, "internal", "internal error")
	})
}

// requestLog logs each request at debug and server errors at warn: a per
// request Info line would swamp logs on the telemetry path.
func requestLog(log *slog.Logger) gin.HandlerFunc {
	return func(c *gin.Context) {
		t0 := time.Now()
		c.Next()
		status := outcomeStatus(c)
		level := slog.LevelDebug
		if status >= 500 {
			level = slog.LevelWarn
		}
		if !log.Enabled(c.Request.Context(), level) {
			return
		}
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		log.Log(c.Request.Context(), level, "http request",
			"method", c.Request.Method, "route", route, "status", status,
			"took", time.Since(t0).Round(time.Microsecond), "remote", c.ClientIP())
	}
}

// requestMetrics observes request durations. Routes are gin's templates
// (/readings/:agent_uuid/latest), never raw paths, so label values stay
// bounded whatever clients send.
func requestMetrics(reg prometheus.Registerer, server string) gin.HandlerFunc {
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:        "edgeplat_http_request_duration_seconds",
		Help:        "HTTP request durations by route template and status code.",
		ConstLabels: prometheus.Labels{"server": server},
		Buckets:     []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"method", "route", "code"})
	reg.MustRegister(h)
	return func(c *gin.Context) {
		t0 := time.Now()
		c.Next()
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		h.WithLabelValues(methodLabel(c.Request.Method), route, strconv.Itoa(outcomeStatus(c))).Observe(time.Since(t0).Seconds())
	}
}

// methodLabel keeps the method label bounded: clients may send any token.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

func limitBody(max int64, write ErrorWriter) gin.HandlerFunc {
	return func(c *gin.Context) {
		if c.Request.ContentLength > max {
			c.Header("Connection", "close")
			write(c, http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("request body over %d bytes", max))
			return
		}
		if c.Request.Body != nil {
			c.Request.Body = http.MaxBytesReader(c.Writer, c.Request.Body, max)
		}
		c.Next()
	}
}

// IsBodyTooLarge reports whether err came from reading past the body cap, so
// handlers answer 413 instead of 400.
func IsBodyTooLarge(err error) bool {
	var mbe *http.MaxBytesError
	return errors.As(err, &mbe)
}
