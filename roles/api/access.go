package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/brokerusers"
	"github.com/edgeplat/edgeplat/roles/api/device"
	"github.com/edgeplat/edgeplat/roles/api/idp"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/registry"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// access is the Cloud API's access layer: accounts, the agent registry and
// the licence, with the authenticator that reads credentials. New and the
// tests mount it the same way.
type access struct {
	cfg      *config.Config
	tokens   *token.Service
	accounts *accounts.Store
	agents   *registry.Store
	licence  *licence.Manager
	auth     *authenticator
	// standing caches what access tokens' holders may do now; sync keeps
	// it in step with the other replicas (a service of the role).
	standing *accounts.StandingCache
	sync     *standingSync
	// idp verifies identity-provider tokens when IDP_ENABLED.
	idp accounts.IdentityProvider
	// trusted are the proxies whose X-Forwarded-For is believed.
	trusted []*net.IPNet
	// mailer sends reset and invitation mail; nil logs the links.
	mailer accounts.Mailer
	// invalidate drops the broker's cached answers for a username.
	invalidate func(username string)
	// revoked is told the kids of device keys that stopped working.
	revoked func(kids []string)
	log     *slog.Logger
	r       *rt.Runtime
	b       rt.Backends

	// Rate limits per minute (docs/api-errors.md, section Rate limits): every request by credential or
	// client address, the auth endpoints by address, admin routes by
	// admin; failed logins by account and by address. With b.RateLimits
	// they count once for all replicas (docs/access.md).
	global, authLimit, admin, device httpx.RateLimiter
	attempts                         *httpx.Attempts
}

func newAccess(cfg *config.Config, r *rt.Runtime, b rt.Backends, tokens *token.Service) (*access, error) {
	a := &access{
		cfg:      cfg,
		tokens:   tokens,
		accounts: accounts.NewStore(b.DB),
		agents:   registry.NewStore(b.DB),
		licence:  licence.New(cfg.Licence, r.Component("api-licence")),
		log:      r.Component("api-access"),
		r:        r,
		b:        b,
		// New replaces both with the broker authorizer's.
		invalidate: func(string) {},
		revoked:    func([]string) {},
	}
	trusted, err := config.ParseCIDRList(cfg.Auth.TrustedProxies)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", config.Label("auth.trusted_proxies"), err)
	}
	a.trusted = trusted
	a.standing = accounts.NewStandingCache(a.accounts, standingTTL, standingMax)
	a.sync = newStandingSync(a.standing, b.Streams, r.Component("api-session-sync"))
	a.accounts.OnChange(a.sync.publish)
	a.auth = &authenticator{tokens: tokens, accounts: a.accounts, log: a.log,
		failures: a.limiter("refused-credentials", cfg.Auth.RateLimitAuth), clientKey: a.clientKey,
		standing: func(ctx context.Context, c token.Claims) (accounts.Standing, error) {
			return a.standing.Standing(ctx, c.Subject, c.Family)
		}}
	if m := newMailer(cfg.Auth); m != nil {
		a.mailer = m
	}
	if cfg.IDP.Enabled {
		v, err := idp.New(cfg.IDP, idp.WithLogger(r.Component("api-idp")))
		if err != nil {
			return nil, fmt.Errorf("identity provider (idp.*, IDP_*): %w", err)
		}
		a.idp = v
		a.auth.idp = v
	}
	a.global = a.limiter("global", cfg.Auth.RateLimitGlobal)
	a.authLimit = a.limiter("auth", cfg.Auth.RateLimitAuth)
	a.admin = a.limiter("admin", cfg.Auth.RateLimitAdmin)
	a.device = a.limiter("device", cfg.Auth.RateLimitDevice)
	a.attempts = httpx.NewSharedAttempts(a.limiter("login-account", cfg.Auth.RateLimitAuth), a.limiter("login-address", cfg.Auth.RateLimitAuth))
	if b.RateLimits != nil {
		st := b.RateLimits
		r.Metrics.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "edgeplat_api_ratelimit_fallback_decisions_total",
			Help: "Rate-limit decisions made on this replica's own counts because Redis did not answer.",
		}, func() float64 { return float64(st.Fallbacks()) }))
	}
	return a, nil
}

// limitScope puts the shared rate limits' keys under the installation's
// id once the database is open: the replicas of one installation share
// one database and so count together, while installations (and test runs)
// sharing one Redis count apart. Before the HTTP server in the services'
// order, so no request is counted under another scope. nil without
// shared limits.
func (a *access) limitScope(d *db.DB) lifecycle.Service {
	st := a.b.RateLimits
	if st == nil {
		return nil
	}
	return &lifecycle.Funcs{ServiceName: "api-ratelimit-scope", StartFunc: func(ctx context.Context) error {
		in, err := d.Installation(ctx)
		if err != nil {
			return fmt.Errorf("rate limits: the installation id that scopes them: %w", err)
		}
		st.SetScope(in.ID)
		return nil
	}}
}

// limiter returns the rate limit called name, limit requests per minute:
// counted in Redis for every replica when the role has b.RateLimits
// (streamstore.driver=redis), else in this process (all-in-one).
func (a *access) limiter(name string, limit int) httpx.RateLimiter {
	if a.b.RateLimits != nil {
		return a.b.RateLimits.Limiter(name, limit, time.Minute)
	}
	return httpx.Local(httpx.NewLimiter(limit, time.Minute))
}

// clientIP is the request's client address: the TCP peer, or the address
// a trusted proxy (auth.trusted_proxies) forwarded (httpx.ClientIP).
func (a *access) clientIP(c *gin.Context) string { return httpx.ClientIP(c.Request, a.trusted) }

// clientKey keys a limit by the client's address.
func (a *access) clientKey(c *gin.Context) string { return "ip:" + httpx.IPRateKey(a.clientIP(c)) }

// subjectKey keys a limit by the authenticated user, else the address.
func (a *access) subjectKey(c *gin.Context) string {
	if p, ok := principal(c); ok && p.UserID != "" {
		return "user:" + p.UserID
	}
	return a.clientKey(c)
}

// adminKey keys the admin limit by the admin; other callers are not
// counted (they get 403 from the route).
func adminKey(c *gin.Context) string {
	if p, ok := principal(c); ok && p.Role == accounts.RoleAdmin {
		return "admin:" + p.UserID
	}
	return ""
}

// audit records e with the request's client address. A lost audit write is
// logged, not answered: what it describes has already happened.
func (a *access) audit(c *gin.Context, e accounts.Event) {
	e.IP = a.clientIP(c)
	if err := a.accounts.Record(c.Request.Context(), e); err != nil {
		a.log.Error("audit event lost", "kind", e.Kind, "err", err)
	}
}

// mount adds the access routes to e and returns the /api/v1 groups for the
// role's other routes: public (no credential needed; limited per client
// address) and protected (behind auth.require; limited per user). Device
// routes check their key themselves and are limited per key.
func (a *access) mount(e *gin.Engine) (public, protected *gin.RouterGroup) {
	public = e.Group("/api/v1", httpx.RateLimit(a.global, a.clientKey, WriteError))
	protected = e.Group("/api/v1", a.auth.require, httpx.RateLimit(a.global, a.subjectKey, WriteError))
	// The routes that take a password or a key without a session are the
	// auth endpoints of the rate limits.
	authLimited := public.Group("", httpx.RateLimit(a.authLimit, a.clientKey, WriteError), noStore)
	adminGate := a.adminGate()
	// The access routes answer with tokens, keys, passwords and account
	// records: no cache on the way may keep them.
	credentials := protected.Group("", noStore)
	accounts.Register(authLimited, credentials, accounts.Deps{
		Store:             a.accounts,
		Tokens:            a.tokens,
		Caller:            caller,
		WriteError:        WriteError,
		ClientIP:          func(c *gin.Context) string { return c.ClientIP() },
		Mailer:            a.mailer,
		PublicURL:         a.cfg.Auth.PublicURL,
		ResetTTL:          a.cfg.Auth.ResetTokenExpiry,
		InviteTTL:         a.cfg.Auth.InviteExpiry,
		IdP:               a.idp,
		AllowRegistration: a.cfg.Auth.AllowRegistration,
		Attempts:          a.attempts,
		AdminGate:         adminGate,
		Log:               a.r.Component("api-accounts"),
	})
	brokerURL := a.cfg.BrokerAuth.BrokerURL
	if brokerURL == "" {
		brokerURL = a.cfg.MQTT.BrokerURL
	}
	registry.Register(authLimited, credentials, registry.Deps{
		Store:      a.agents,
		Caller:     caller,
		WriteError: WriteError,
		Audit:      a.audit,
		Admit:      a.licence.CheckRegistration,
		Revoked:    a.revoked,
		BrokerURL:  brokerURL,
		AdminGate:  adminGate,
		Log:        a.r.Component("api-registry"),
	})
	brokerusers.Register(credentials, brokerusers.Deps{
		Store:      brokerusers.NewStore(a.b.DB, reservedBrokerNames(a.cfg)...),
		Caller:     caller,
		WriteError: WriteError,
		Audit:      a.audit,
		Invalidate: a.invalidate,
		AdminGate:  adminGate,
		Log:        a.r.Component("api-brokerusers"),
	})
	device.Register(e.Group("/api/v1"), a.deviceDeps())
	a.licence.Routes(protected, func(ctx context.Context) (licence.Usage, error) {
		n, err := a.agents.CountAgents(ctx)
		return licence.Usage{Agents: n}, err
	}, accounts.RequireAdmin(caller, WriteError, adminGate), WriteError)
	return public, protected
}

// deviceDeps is what the routes agents call with their device key share:
// the refused-key limit per address and the rate limit per key.
func (a *access) deviceDeps() device.Deps {
	return device.Deps{
		Failures:   a.auth.failures,
		ClientKey:  a.clientKey,
		Agents:     a.agents,
		Streams:    a.b.Streams,
		WriteError: WriteError,
		Limit:      a.device,
		Log:        a.r.Component("api-device"),
	}
}

// agentGuard answers 404 unless the agent named by the path parameter
// param is in the caller's tenant's registry: another tenant's agent and
// no agent get the same answer. A malformed id goes on to the handler,
// which names the parameter in its 400.
func (a *access) agentGuard(param string) gin.HandlerFunc {
	return func(c *gin.Context) {
		p, ok := principal(c)
		if !ok {
			WriteError(c, http.StatusUnauthorized, "unauthorized", "a credential is required")
			return
		}
		u, err := codec.ParseUUID(c.Param(param))
		if err != nil {
			c.Next()
			return
		}
		registered, err := a.registered(c.Request.Context(), p, u.String())
		switch {
		case err != nil:
			a.log.Error("agent lookup failed", "agent", u.String(), "err", err)
			WriteError(c, http.StatusServiceUnavailable, "unavailable", "the agent registry cannot be read now; retry")
		case !registered:
			WriteError(c, http.StatusNotFound, "not_found", "agent "+u.String()+" not found")
		default:
			c.Next()
		}
	}
}

// agentRegistered returns which of agents are in the registry of the
// caller's tenant, in one query: readings.Deps.AgentRegistered.
func (a *access) agentRegistered(c *gin.Context, agents []string) (map[string]bool, error) {
	p, ok := principal(c)
	if !ok {
		return map[string]bool{}, nil
	}
	owned, err := a.agents.Owned(c.Request.Context(), p.TenantUUID, agents)
	if err != nil {
		return nil, fmt.Errorf("look up %d agents: %w", len(agents), err)
	}
	return owned, nil
}

func (a *access) registered(ctx context.Context, p Principal, agent string) (bool, error) {
	_, err := a.agents.Agent(ctx, p.TenantUUID, agent)
	if errors.Is(err, registry.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("look up agent %s: %w", agent, err)
	}
	return true, nil
}

// noStore forbids caching the answer (RFC 9111 no-store): tokens and
// secrets must not be kept by a browser or a proxy.
func noStore(c *gin.Context) {
	c.Header("Cache-Control", "no-store")
	c.Next()
}
