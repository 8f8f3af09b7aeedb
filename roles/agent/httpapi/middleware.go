package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/edgeplat/edgeplat/config"

	"github.com/gin-gonic/gin"
)

// loopbackOnly guards LOCALHOST_ONLY mode. Binding 127.0.0.1 keeps other
// hosts out, but not a web page in a local browser: a DNS-rebinding page
// reaches 127.0.0.1 under its own host name, and a local reverse proxy
// would forward the world. So the Host must be a loopback name, no
// forwarding header may be present, and a browser Origin must be local.
func loopbackOnly() gin.HandlerFunc {
	return func(c *gin.Context) {
		if !isLoopbackHost(c.Request.Host) {
			fail(c, http.StatusForbidden, "host %q is not a loopback name; this agent API answers on localhost only (%s=LOCALHOST_ONLY)", c.Request.Host, config.EnvNames("agent.security_mode"))
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
func (r routes) requireKeyOrSession() gin.HandlerFunc {
	if !r.KeyMode {
		return func(c *gin.Context) { c.Next() }
	}
	// Digests of equal length, so the comparison's time does not tell the
	// key's length either.
	want := sha256.Sum256([]byte(r.APIKey))
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
		if _, ok := r.sessionUser(c); ok {
			c.Next()
			return
		}
		fail(c, http.StatusUnauthorized, "missing or invalid API key")
	}
}

// holdStore keeps the store open for the length of a request: a reboot
// or shutdown closes it only once no request is using it.
func (r routes) holdStore(c *gin.Context) {
	var once sync.Once
	hold := r.Store.Hold()
	release := func() { once.Do(hold) }
	c.Set(storeReleaseKey, release)
	defer release()
	c.Next()
}

// storeReleaseKey holds, in the gin context, the function that lets the
// request's store hold go.
const storeReleaseKey = "httpapi.storeRelease"

// releaseStore ends the request's store hold early. A stream (a log that
// follows) lasts as long as its client wants: holding the store for it
// would keep a soft reboot or a shutdown from closing the store, and the
// waiting close would in turn stop every other request.
func releaseStore(c *gin.Context) {
	if v, ok := c.Get(storeReleaseKey); ok {
		v.(func())()
	}
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
