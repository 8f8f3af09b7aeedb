package agent

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/roles/agent/store"
	"github.com/gin-gonic/gin"
)

// maxBody caps request bodies; endpoint definitions are the largest.
const maxBody = 1 << 20

// WriteError renders the agent API's error shape: {"error": "..."}.
func WriteError(c *gin.Context, status int, _ string, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": message})
}

func fail(c *gin.Context, status int, format string, args ...any) {
	WriteError(c, status, "", fmt.Sprintf(format, args...))
}

// bind decodes a strict JSON body or answers 400 naming the field.
func bind(c *gin.Context, dst any) bool {
	return httpx.BindStrict(c, maxBody, dst, WriteError)
}

func (a *Agent) engine() *gin.Engine {
	e := httpx.NewEngine(httpx.EngineOptions{Logger: a.log, WriteError: WriteError, MaxBodyBytes: maxBody,
		BodyTimeout: a.bodyTimeout, Metrics: a.rt.Metrics, Server: "agent"})
	if !a.cfg.KeyMode() {
		e.Use(loopbackOnly())
	}
	e.Use(requireJSONBody, a.holdStore)
	e.GET("/ping", func(c *gin.Context) { c.String(http.StatusOK, "OK") })
	v1 := e.Group("/v1")
	v1.GET("/healthy", a.healthy)
	// The cloud roles' health path, so one probe configuration fits
	// every role; same answer as /v1/healthy.
	e.GET("/health", a.healthy)
	v1.GET("/readiness", a.readiness)

	// The admin UI's own routes use its session, never the API key.
	auth := v1.Group("/auth")
	auth.POST("/login", a.login)
	auth.POST("/logout", a.logout)
	auth.GET("/me", a.requireSession, a.me)
	auth.POST("/setup", a.requireKeyOrSession(), a.setup)
	admin := v1.Group("/admin", a.requireSession)
	admin.GET("/users", a.listAdmins)
	admin.POST("/users", a.requireSuperuser, a.createAdmin)
	admin.PATCH("/users/:username", a.requireSuperuser, a.updateAdmin)
	admin.DELETE("/users/:username", a.requireSuperuser, a.deleteAdmin)

	p := v1.Group("/", a.requireKeyOrSession())
	p.GET("/health/report", a.healthReport)
	p.POST("/reboot", a.rebootRoute)
	p.POST("/shutdown", a.shutdownRoute)

	p.GET("/endpoints", a.listEndpoints)
	p.POST("/endpoints", a.createEndpoint)
	p.PATCH("/endpoints/:ref", a.patchEndpoint)
	p.DELETE("/endpoints/:ref", a.deleteEndpoint)
	p.DELETE("/endpoints", a.deleteAllEndpoints)
	p.GET("/devices", a.listDevices)
	p.GET("/adapters/:protocol/devices", a.adapterDevices)
	p.GET("/adapters/:protocol/devices/:device", a.adapterDevice)
	p.GET("/adapters/:protocol/devices/:device/metrics", a.adapterDeviceMetrics)
	p.GET("/adapters/:protocol/metrics", a.adapterMetrics)
	p.POST("/adapters/:protocol/devices/:device/write", a.adapterWrite)
	p.POST("/discover/opcua/browse", a.browseOPCUA)

	p.GET("/publish/destinations", a.listDestinations)
	p.POST("/publish/destinations", a.createDestination)
	p.POST("/publish/destinations/test", a.testDestination)
	p.PATCH("/publish/destinations/:id", a.patchDestination)
	p.DELETE("/publish/destinations/:id", a.deleteDestination)
	p.GET("/publish/subscriptions", a.listSubscriptions)
	p.POST("/publish/subscriptions", a.createSubscription)
	p.PATCH("/publish/subscriptions/:id", a.patchSubscription)
	p.DELETE("/publish/subscriptions/:id", a.deleteSubscription)
	p.GET("/protocol-outputs", a.listProtocolOutputs)

	p.POST("/provision", a.provision)
	p.GET("/provision/status", a.provisionStatus)
	p.POST("/deprovision", a.deprovision)
	p.POST("/sync/pull", a.syncPull)
	p.POST("/factory-reset", a.factoryReset)
	p.GET("/buffer/status", a.bufferStatus)

	p.GET("/settings", a.getSettings)
	p.PATCH("/settings", a.patchSettings)
	p.GET("/logs", a.getLogs)
	p.GET("/dashboard/stats", a.dashboardStats)
	p.GET("/memory", a.memoryDiagnostics)
	p.GET("/db/stats", a.dbStats)
	p.GET("/device", a.device)

	e.GET("/metrics", a.requireKeyOrSession(), gin.WrapH(metrics.Handler(a.rt.Metrics)))
	return e
}

// loopbackOnly guards LOCALHOST_ONLY mode. Binding 127.0.0.1 keeps other
// hosts out, but not a web page in a local browser: a DNS-rebinding page
// reaches 127.0.0.1 under its own host name, and a local reverse proxy
// would forward the world. So the Host must be a loopback name, no
// forwarding header may be present, and a browser Origin must be local.
func loopbackOnly() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !isLoopbackHost(c.Request.Host) {
			fail(c, http.StatusForbidden, "host %q is not a loopback name; this agent API answers on localhost only (API_SECURITY_MODE=LOCALHOST_ONLY)", c.Request.Host)
			return
		}
		for _, h := range forwardingHeaders {
			if c.GetHeader(h) != "" {
				fail(c, http.StatusForbidden, "forwarded requests are refused in LOCALHOST_ONLY mode (header %s)", h)
				return
			}
		}
		if o := c.GetHeader("Origin"); o != "" {
			u, err := url.Parse(o)
			if err != nil || !isLoopbackHost(u.Host) {
				fail(c, http.StatusForbidden, "cross-origin requests from %q are refused in LOCALHOST_ONLY mode", o)
				return
			}
		}
		c.Next()
	}
}

// forwardingHeaders are the headers proxies add; any of them means the
// request did not come straight from a local client.
var forwardingHeaders = []string{"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto",
	"X-Forwarded-Port", "X-Forwarded-Server", "X-Real-Ip", "X-Client-Ip", "True-Client-Ip", "Via"}

// isLoopbackHost reports whether a Host header (with or without a port)
// names this machine's loopback interface.
func isLoopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// requireKeyOrSession lets a request through in LOCALHOST_ONLY mode, and
// in key mode when it carries the API key (X-Api-Key or ?apiKey=,
// compared in constant time) or a valid admin session, since the admin UI
// is backed by the same API.
func (a *Agent) requireKeyOrSession() gin.HandlerFunc {
	if !a.cfg.KeyMode() {
		return func(c *gin.Context) { c.Next() }
	}
	// Digests of equal length, so the comparison's time does not tell the
	// key's length either.
	want := sha256.Sum256([]byte(a.cfg.APIKey.Reveal()))
	return func(c *gin.Context) {
		got := c.GetHeader("X-Api-Key")
		if got == "" {
			got = c.Query("apiKey")
		}
		gotSum := sha256.Sum256([]byte(got))
		if got != "" && subtle.ConstantTimeCompare(gotSum[:], want[:]) == 1 {
			c.Next()
			return
		}
		if _, ok := a.sessionUser(c); ok {
			c.Next()
			return
		}
		fail(c, http.StatusUnauthorized, "missing or invalid API key")
	}
}

// holdStore keeps the store open for the length of a request: a reboot
// or shutdown closes it only once no request is using it.
func (a *Agent) holdStore(c *gin.Context) {
	a.storeMu.RLock()
	defer a.storeMu.RUnlock()
	c.Next()
}

// requireJSONBody refuses a request body that is not declared as JSON.
// Besides being honest about what the API reads, it keeps the admin
// session safe from cross-site forms: a browser sends a form (even an
// enctype=text/plain one holding JSON) without a preflight, but never
// application/json.
func requireJSONBody(c *gin.Context) {
	if c.Request.ContentLength == 0 || c.Request.Method == http.MethodGet || c.Request.Method == http.MethodHead {
		c.Next()
		return
	}
	mt, _, err := mime.ParseMediaType(c.GetHeader("Content-Type"))
	if err != nil || mt != "application/json" {
		fail(c, http.StatusUnsupportedMediaType, "request bodies must be JSON with Content-Type: application/json, got %q", c.GetHeader("Content-Type"))
		return
	}
	c.Next()
}

// storeFor returns the store or answers 503 while the agent initialises.
func (a *Agent) storeFor(c *gin.Context) (*store.Store, bool) {
	s, err := a.storeOrErr()
	if err != nil {
		fail(c, http.StatusServiceUnavailable, "%v", err)
		return nil, false
	}
	return s, true
}

// internal logs an unexpected failure and answers 500 without leaking it.
func (a *Agent) internal(c *gin.Context, what string, err error) {
	if errors.Is(err, context.Canceled) {
		c.Abort()
		return
	}
	a.log.Error(what, "err", err, "route", c.FullPath())
	fail(c, http.StatusInternalServerError, "%s failed; see the agent log", what)
}

// selfCheck asks the API for /ping on its own address.
func selfCheck(ctx context.Context, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+net.JoinHostPort(host, port)+"/ping", nil)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("api self-check: %w", err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("api self-check: GET /ping answered %s", resp.Status)
	}
	return nil
}
