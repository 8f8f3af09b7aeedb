package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/token"
	"github.com/gin-gonic/gin"
)

// Principal is the authenticated caller of a REST request.
type Principal struct {
	UserID string
	Role   string
	// TenantUUID is the tenant's canonical (lowercase, hyphenated) UUID.
	TenantUUID string
	// TenantKey is the same tenant as the 22-character id that MQTT topics,
	// stream names and the readings table's tenant_id use.
	TenantKey string
	// ExpiresAt is when the credential stops being valid; long-lived
	// responses (live streams) end then.
	ExpiresAt time.Time
	// BoundAgent is set for a user API key bound to one agent.
	BoundAgent string
	// Recheck, set for an access token, reports accounts.ErrSessionEnded
	// once its session has ended or its account is inactive: long-lived
	// responses ask it again as they go.
	Recheck func(context.Context) error `json:"-"`
}

const principalKey = "edgeplat.principal"

// authenticator turns a request's credential into a Principal: a Bearer
// access token, or a user API key passed as a Bearer token.
type authenticator struct {
	tokens   *token.Service
	accounts *accounts.Store
	// standing reads an access token's holder's current rights (through
	// the accounts.StandingCache): the token proves who signed in, not
	// what they may still do.
	standing func(ctx context.Context, c token.Claims) (accounts.Standing, error)
	// idp, when set, verifies identity-provider access tokens, accepted
	// in addition to the API's own.
	idp accounts.IdentityProvider
	// failures counts refused credentials per client address: once over,
	// the address gets 429 before its next credential is even looked at,
	// so a guesser cannot make every request a database lookup. nil
	// counts nothing.
	failures httpx.RateLimiter
	// clientKey keys failures by client address.
	clientKey func(*gin.Context) string
	log       *slog.Logger
}

// require answers 401 unless the request carries a valid access token, and
// stores the caller's Principal for the handlers. The detail of a refusal is
// logged at debug, never returned: it would tell a prober which part of a
// forged token to fix.
func (a *authenticator) require(c *gin.Context) {
	if a.failures != nil {
		if d := a.failures.Peek(c.Request.Context(), a.key(c)); !d.Allowed {
			secs := strconv.Itoa(httpx.RetryAfterSeconds(d.RetryAfter))
			c.Header("Retry-After", secs)
			WriteError(c, http.StatusTooManyRequests, "rate_limited", "too many refused credentials from this address; retry in "+secs+" s")
			return
		}
	}
	raw, ok := bearer(c.GetHeader("Authorization"))
	if !ok {
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat"`)
		a.refuse(c, "missing bearer token in the Authorization header")
		return
	}
	if accounts.IsAPIKey(raw) {
		a.requireAPIKey(c, raw)
		return
	}
	claims, err := a.tokens.Verify(raw, token.Access)
	if err != nil && a.idp != nil {
		if a.requireIdP(c, raw) {
			return
		}
	}
	if err != nil {
		a.log.Debug("token refused", "path", c.FullPath(), "err", err)
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		a.refuse(c, "invalid or expired access token")
		return
	}
	if claims.Operator {
		a.requireOperator(c, claims)
		return
	}
	if claims.Family == "" {
		// Signed before access tokens were bound to a session: nothing
		// could end it early, so it is refused; a refresh gives a bound one.
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		WriteError(c, http.StatusUnauthorized, "unauthorized", "access token without a session; refresh it or sign in again")
		return
	}
	if a.standing == nil {
		panic("BUG: api authenticator without a standing source")
	}
	st, err := a.standing(c.Request.Context(), claims)
	switch {
	case errors.Is(err, accounts.ErrSessionEnded):
		// Not counted as a refused credential: the token is genuine, and
		// its holder is expected to come back once, then refresh or sign in.
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		WriteError(c, http.StatusUnauthorized, "unauthorized", "the session of this access token has ended or its account is inactive; sign in again")
		return
	case errors.Is(err, context.Canceled):
		c.Abort() // the client left
		return
	case err != nil:
		a.log.Error("account standing check failed", "err", err)
		WriteError(c, http.StatusServiceUnavailable, "unavailable", "credentials cannot be checked now; retry")
		return
	}
	tu, err := codec.ParseUUID(st.TenantUUID)
	if err != nil || st.TenantUUID != claims.Tenant {
		// The account's tenant is not the token's, or cannot be addressed:
		// refuse rather than guess.
		a.log.Warn("access token whose tenant is not its account's", "user", claims.Subject, "err", err)
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		WriteError(c, http.StatusUnauthorized, "unauthorized", "invalid or expired access token")
		return
	}
	// The role is the account's current one, never the token's: a demoted
	// admin's token is a member's from the next request on.
	c.Set(principalKey, Principal{UserID: st.UserID, Role: st.Role, TenantUUID: tu.String(), TenantKey: codec.EncodeID(tu),
		ExpiresAt: claims.ExpiresAt, Recheck: func(ctx context.Context) error {
			_, err := a.standing(ctx, claims)
			return err
		}})
	c.Next()
}

// requireAPIKey authenticates a user API key: it acts as its user, with
// the user's current role, and does not expire.
func (a *authenticator) requireAPIKey(c *gin.Context, raw string) {
	u, key, err := a.accounts.AuthenticateAPIKey(c.Request.Context(), raw)
	if err != nil {
		if !errors.Is(err, accounts.ErrBadCredentials) {
			a.log.Error("api key check failed", "err", err)
			WriteError(c, http.StatusServiceUnavailable, "unavailable", "credentials cannot be checked now; retry")
			return
		}
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		a.refuse(c, "invalid or revoked API key")
		return
	}
	tu, err := codec.ParseUUID(u.TenantUUID)
	if err != nil {
		a.log.Error("account with a malformed tenant id", "user", u.ID, "err", err)
		WriteError(c, http.StatusInternalServerError, "internal", "internal error")
		return
	}
	if key.AgentUUID != "" && !namesAgent(c, key.AgentUUID) {
		// A key bound to an agent is that agent's credential, not its
		// user's: it reaches the routes that name the agent, nothing else.
		WriteError(c, http.StatusForbidden, "forbidden", "this API key is bound to agent "+key.AgentUUID+" and reaches only its routes")
		return
	}
	c.Set(principalKey, Principal{UserID: u.ID, Role: u.Role, TenantUUID: tu.String(), TenantKey: codec.EncodeID(tu), BoundAgent: key.AgentUUID})
	c.Next()
}

// namesAgent reports whether the route's agent parameter is agent.
func namesAgent(c *gin.Context, agent string) bool {
	for _, name := range []string{"uuid", "agent_uuid"} {
		if u, err := codec.ParseUUID(c.Param(name)); err == nil && u.String() == agent {
			return true
		}
	}
	return false
}

func (a *authenticator) key(c *gin.Context) string {
	if a.clientKey == nil {
		return ""
	}
	return a.clientKey(c)
}

// refuse answers 401 and counts the refusal against the client's address.
func (a *authenticator) refuse(c *gin.Context, message string) {
	if a.failures != nil {
		a.failures.Take(c.Request.Context(), a.key(c))
	}
	WriteError(c, http.StatusUnauthorized, "unauthorized", message)
}

// requireIdP authenticates an identity provider's access token as the
// account with its verified e-mail. It reports whether it answered the
// request (either way); false lets require refuse the token as its own.
func (a *authenticator) requireIdP(c *gin.Context, raw string) bool {
	id, err := a.idp.Verify(c.Request.Context(), raw)
	if err != nil || id.Email == "" || !id.EmailVerified {
		return false
	}
	u, err := a.accounts.UserByEmail(c.Request.Context(), id.Email)
	if err != nil {
		if !errors.Is(err, accounts.ErrNotFound) {
			a.log.Error("account lookup for an identity provider token failed", "err", err)
		}
		return false
	}
	tu, err := codec.ParseUUID(u.TenantUUID)
	if err != nil {
		return false
	}
	c.Set(principalKey, Principal{UserID: u.ID, Role: u.Role, TenantUUID: tu.String(), TenantKey: codec.EncodeID(tu)})
	c.Next()
	return true
}

// caller is the Principal as the accounts routes see it.
func caller(c *gin.Context) (accounts.Caller, bool) {
	p, ok := principal(c)
	if !ok || p.UserID == "" {
		return accounts.Caller{}, false
	}
	return accounts.Caller{UserID: p.UserID, TenantUUID: p.TenantUUID, Role: p.Role}, true
}

// principal returns the caller set by require.
func principal(c *gin.Context) (Principal, bool) {
	v, ok := c.Get(principalKey)
	if !ok {
		return Principal{}, false
	}
	p, ok := v.(Principal)
	return p, ok
}

// tenantKey is the caller's tenant as the telemetry tables store it.
func tenantKey(c *gin.Context) (string, bool) {
	p, ok := principal(c)
	return p.TenantKey, ok && p.TenantKey != ""
}

// agentOf answers the request itself (401 or 400) unless it carries the
// caller's tenant and a valid :uuid, and returns both: the tenant as the
// telemetry tables store it, the agent in the lowercase hyphenated form the
// pipeline publishes and stores under.
func agentOf(c *gin.Context) (tenant, agent string, ok bool) {
	tenant, ok = tenantKey(c)
	if !ok {
		WriteError(c, http.StatusUnauthorized, "unauthorized", "no tenant in the credential")
		return "", "", false
	}
	u, err := codec.ParseUUID(c.Param("uuid"))
	if err != nil {
		WriteError(c, http.StatusBadRequest, "invalid_parameter", "uuid must be a hyphenated UUID (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx), got "+strconv.Quote(c.Param("uuid")))
		return "", "", false
	}
	return tenant, u.String(), true
}

// bearer extracts the token of an "Authorization: Bearer <token>" header;
// the scheme is case-insensitive (RFC 7235).
func bearer(h string) (string, bool) {
	scheme, raw, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	raw = strings.TrimSpace(raw)
	return raw, raw != ""
}

// requireOperator admits a token minted with the signing key (edgeplat
// token). It has no account whose standing could be checked: whoever holds
// the key can sign any token, so the claims are all there is, and the
// command keeps such tokens short-lived (docs/access.md).
func (a *authenticator) requireOperator(c *gin.Context, claims token.Claims) {
	tu, err := codec.ParseUUID(claims.Tenant)
	if err != nil || (claims.Role != "admin" && claims.Role != "member") {
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat", error="invalid_token"`)
		a.refuse(c, "invalid or expired access token")
		return
	}
	c.Set(principalKey, Principal{UserID: claims.Subject, Role: claims.Role, TenantUUID: tu.String(), TenantKey: codec.EncodeID(tu),
		ExpiresAt: claims.ExpiresAt})
	c.Next()
}
