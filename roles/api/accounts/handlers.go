package accounts

import (
	"context"
	"errors"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/idp"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// Caller is the authenticated user of a request, as the API's
// authenticator found it.
type Caller struct {
	UserID     string
	TenantUUID string
	Role       string
}

// Mailer sends the password-reset mail.
type Mailer interface {
	Send(ctx context.Context, to, subject, body string) error
}

// Deps is what the handlers need from the role.
type Deps struct {
	Store  *Store
	Tokens *token.Service
	// Caller returns the request's authenticated user; false for a
	// request without one (the protected group never lets those through).
	Caller     func(*gin.Context) (Caller, bool)
	WriteError httpx.ErrorWriter
	// ClientIP is the request's client address for audit events.
	ClientIP func(*gin.Context) string
	// Mailer is nil when no SMTP server is configured: reset links are
	// then logged for the operator to pass on.
	Mailer    Mailer
	PublicURL string
	ResetTTL  time.Duration
	// InviteTTL is how long an invitation can be accepted.
	InviteTTL time.Duration
	// Attempts counts failed logins per account and per client address;
	// nil counts nothing.
	Attempts LoginAttempts
	// AdminGate runs after the admin check of admin-only routes (the
	// admin rate limit); nil runs nothing.
	AdminGate gin.HandlerFunc
	// AllowRegistration opens POST /auth/register to anyone.
	AllowRegistration bool
	// IdP is set when IDP_ENABLED: /auth/idp-exchange exists only then.
	IdP IdentityProvider
	Log *slog.Logger
}

// IdentityProvider verifies an external identity provider's access
// tokens (idp.Verifier).
type IdentityProvider interface {
	Verify(ctx context.Context, raw string) (idp.Identity, error)
}

// LoginAttempts limits failed logins (httpx.Attempts).
type LoginAttempts interface {
	Reserve(ctx context.Context, account, ip string) (blocked bool, retryAfter time.Duration)
	Succeed(ctx context.Context, account string)
}

// maxBody caps the JSON bodies of these routes: credentials and names.
const maxBody = 16 << 10

type handler struct {
	Deps
	// mailing bounds the mail sent in the background.
	mailing chan struct{}
	// caller returns the request's user, or answers 401.
	caller    func(*gin.Context) (Caller, bool)
	adminOnly gin.HandlerFunc
	errs      *httpx.ErrorMap
}

// maxBackgroundMail is how many background mails may be in flight; more
// are dropped with a log line rather than queued without bound.
const maxBackgroundMail = 16

// later runs fn in the background with its own deadline, not the
// request's: the work goes on after the answer.
func (h *handler) later(fn func(context.Context)) {
	select {
	case h.mailing <- struct{}{}:
	default:
		h.Log.Error("background account work dropped: too many in flight")
		return
	}
	go func() {
		defer func() { <-h.mailing }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		fn(ctx)
	}()
}

// Register adds the account routes: those that create a session to public
// (no credential needed), the others to protected.
func Register(public, protected gin.IRoutes, deps Deps) {
	h := &handler{Deps: deps, mailing: make(chan struct{}, maxBackgroundMail),
		caller:    RequireUser(deps.Caller, deps.WriteError),
		adminOnly: RequireAdmin(deps.Caller, deps.WriteError, deps.AdminGate),
		errs: httpx.NewErrorMap(deps.WriteError, deps.Log, "account request failed",
			httpx.Case(http.StatusUnprocessableEntity, "validation_failed", ErrInvalid, ErrWeakPassword),
			httpx.Case(http.StatusUnauthorized, "invalid_credentials", ErrBadCredentials),
			httpx.Case(http.StatusUnauthorized, "invalid_token", ErrTokenReuse, ErrRevoked),
			httpx.Case(http.StatusNotFound, "not_found", ErrNotFound),
			httpx.Case(http.StatusConflict, "already_bootstrapped", ErrBootstrapped),
			httpx.Case(http.StatusConflict, "conflict", ErrConflict, ErrLastAdmin)),
	}
	public.POST("/auth/register", h.register)
	public.POST("/auth/login", h.login)
	public.POST("/auth/refresh", h.refresh)
	public.POST("/auth/logout", h.logout)
	public.POST("/auth/bootstrap-admin", h.bootstrap)
	public.POST("/auth/password/reset", h.requestReset)
	public.POST("/auth/password/reset/confirm", h.confirmReset)
	public.POST("/invites/accept", h.acceptInvite)
	if deps.IdP != nil {
		public.POST("/auth/idp-exchange", h.idpExchange)
	}

	protected.GET("/auth/me", h.me)
	protected.POST("/auth/change-password", h.changePassword)
	protected.POST("/auth/reset-password", h.adminOnly, h.adminReset)
	protected.GET("/users", h.adminOnly, h.listUsers)
	protected.POST("/users", h.adminOnly, h.createUser)
	protected.GET("/users/:id", h.getUser)
	protected.PUT("/users/:id", h.adminOnly, h.updateUser)
	protected.DELETE("/users/:id", h.adminOnly, h.deleteUser)
	protected.GET("/api-keys", h.listAPIKeys)
	protected.POST("/api-keys", h.createAPIKey)
	protected.DELETE("/api-keys/:id", h.revokeAPIKey)
	protected.GET("/audit/events", h.adminOnly, h.listEvents)
	protected.GET("/invites", h.adminOnly, h.listInvites)
	protected.POST("/invites", h.adminOnly, h.createInvite)
	protected.DELETE("/invites/:id", h.adminOnly, h.cancelInvite)
}

// fail answers err with the status its kind calls for; unexpected errors
// are logged and answered 500 without their detail.
func (h *handler) fail(c *gin.Context, err error) { h.errs.Fail(c, err) }

func (h *handler) bind(c *gin.Context, dst any) bool {
	return httpx.BindStrict(c, maxBody, dst, h.WriteError)
}

// audit records e with the request's address. An audit write that fails
// is logged, not answered: the action it describes has already happened.
func (h *handler) audit(c *gin.Context, e Event) {
	e.IP = h.clientIP(c)
	if err := h.Store.Record(c.Request.Context(), e); err != nil {
		h.Log.Error("audit event lost", "kind", e.Kind, "err", err)
	}
}

// session is the body of every answer that creates a session.
type session struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken"`
	ExpiresIn    int64  `json:"expiresIn"`
	TokenType    string `json:"tokenType"`
	User         *User  `json:"user,omitempty"`
}

// issue signs an access token and the first refresh token of a new family.
// The access token names the family, so that ending the session ends it.
func (h *handler) issue(ctx context.Context, u User) (session, error) {
	family := secret.Random(24)
	access, _, err := h.Tokens.Sign(token.Claims{Subject: u.ID, Tenant: u.TenantUUID, Role: u.Role, Kind: token.Access, Family: family})
	if err != nil {
		return session{}, err
	}
	refresh, rc, err := h.Tokens.Sign(token.Claims{Subject: u.ID, Tenant: u.TenantUUID, Role: u.Role, Kind: token.Refresh, Family: family})
	if err != nil {
		return session{}, err
	}
	if err := h.Store.StartSession(ctx, u.ID, family, rc.ID, rc.ExpiresAt); err != nil {
		return session{}, err
	}
	return session{AccessToken: access, RefreshToken: refresh, ExpiresIn: int64(h.Tokens.AccessTTL().Seconds()), TokenType: "Bearer", User: &u}, nil
}

// signIn answers a request that created or found u with a new session,
// after recording kind in the audit log.
func (h *handler) signIn(c *gin.Context, u User, status int, kind string, detail map[string]any) {
	s, err := h.issue(c.Request.Context(), u)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: u.TenantUUID, Kind: kind, Actor: u.ID, ActorKind: "user", Target: u.Email, Detail: detail})
	c.JSON(status, s)
}

type credentials struct {
	Email    string `json:"email"`
	Username string `json:"username"`
	Password string `json:"password"`
}

func (h *handler) bootstrap(c *gin.Context) {
	var in credentials
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.Bootstrap(c.Request.Context(), NewUser{Email: in.Email, Username: in.Username, Password: in.Password})
	if err != nil {
		h.fail(c, err)
		return
	}
	h.signIn(c, u, http.StatusCreated, AuditBootstrap, nil)
}

func (h *handler) register(c *gin.Context) {
	if !h.AllowRegistration {
		h.WriteError(c, http.StatusForbidden, "registration_disabled",
			"self-registration is off on this installation ("+config.Label("auth.allow_registration")+"); ask an admin for an invitation")
		return
	}
	var in struct {
		credentials
		TenantName string `json:"tenantName"`
	}
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.Register(c.Request.Context(), in.TenantName, NewUser{Email: in.Email, Username: in.Username, Password: in.Password})
	if err != nil {
		h.fail(c, err)
		return
	}
	h.signIn(c, u, http.StatusCreated, AuditRegister, nil)
}

func (h *handler) login(c *gin.Context) {
	var in credentials
	if !h.bind(c, &in) {
		// Whatever the binder refused (bad JSON, an unknown field, a NUL
		// byte), it was a sign-in attempt and the audit log shows it.
		h.auditRefusedLogin(c, in, "invalid body")
		return
	}
	login := in.Email
	if login == "" {
		login = in.Username
	}
	if strings.TrimSpace(login) == "" || in.Password == "" {
		h.WriteError(c, http.StatusBadRequest, "invalid_body", "email (or username) and password are required")
		return
	}
	account, ip := strings.ToLower(strings.TrimSpace(login)), h.clientIP(c)
	if h.Attempts != nil {
		// Every attempt counts as a failure until its password is known
		// to be right, so concurrent guesses cannot outrun the count.
		if blocked, wait := h.Attempts.Reserve(c.Request.Context(), account, ip); blocked {
			h.tooMany(c, wait)
			return
		}
	}
	u, err := h.Store.Authenticate(c.Request.Context(), login, in.Password)
	if errors.Is(err, ErrBadCredentials) {
		h.audit(c, Event{Tenant: u.TenantUUID, Kind: AuditLoginFailed, Actor: truncate(account), ActorKind: "login", Outcome: "failure"})
		h.WriteError(c, http.StatusUnauthorized, "invalid_credentials", ErrBadCredentials.Error())
		return
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	if h.Attempts != nil {
		h.Attempts.Succeed(c.Request.Context(), account)
	}
	h.signIn(c, u, http.StatusOK, AuditLogin, nil)
}

// auditRefusedLogin records a login refused before any account was looked
// up, under whatever login the body named.
func (h *handler) auditRefusedLogin(c *gin.Context, in credentials, reason string) {
	login := in.Email
	if login == "" {
		login = in.Username
	}
	h.audit(c, Event{Kind: AuditLoginFailed, Actor: truncate(strings.ToLower(strings.TrimSpace(login))), ActorKind: "login", Outcome: "failure",
		Detail: map[string]any{"reason": reason}})
}

func (h *handler) clientIP(c *gin.Context) string {
	if h.ClientIP != nil {
		return h.ClientIP(c)
	}
	return c.ClientIP()
}

// tooMany answers a login refused for too many failures.
func (h *handler) tooMany(c *gin.Context, wait time.Duration) {
	c.Header("Retry-After", strconv.Itoa(httpx.RetryAfterSeconds(wait)))
	h.WriteError(c, http.StatusTooManyRequests, "rate_limited", "too many failed logins; retry in "+strconv.Itoa(httpx.RetryAfterSeconds(wait))+" s")
}

type refreshBody struct {
	RefreshToken string `json:"refreshToken"`
}

// verifyRefresh checks a refresh token's signature, expiry and kind; the
// session check is the store's.
func (h *handler) verifyRefresh(c *gin.Context, raw string) (token.Claims, bool) {
	claims, err := h.Tokens.Verify(raw, token.Refresh)
	if err != nil || claims.Family == "" || claims.ID == "" {
		h.Log.Debug("refresh token refused", "err", err)
		h.WriteError(c, http.StatusUnauthorized, "invalid_token", "invalid or expired refresh token")
		return token.Claims{}, false
	}
	return claims, true
}

func (h *handler) refresh(c *gin.Context) {
	var in refreshBody
	if !h.bind(c, &in) {
		return
	}
	claims, ok := h.verifyRefresh(c, in.RefreshToken)
	if !ok {
		return
	}
	ctx := c.Request.Context()
	next, nc, err := h.Tokens.Sign(token.Claims{Subject: claims.Subject, Tenant: claims.Tenant, Role: claims.Role,
		Kind: token.Refresh, Family: claims.Family})
	if err != nil {
		h.fail(c, err)
		return
	}
	u, err := h.Store.Rotate(ctx, claims.Subject, claims.Family, claims.ID, nc.ID, nc.ExpiresAt)
	if errors.Is(err, ErrTokenReuse) {
		h.audit(c, Event{Tenant: claims.Tenant, Kind: AuditRefreshReuse, Actor: claims.Subject, ActorKind: "user", Outcome: "failure",
			Detail: map[string]any{"family": claims.Family}})
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	// The role may have changed since login; the new access token carries
	// the current one.
	access, _, err := h.Tokens.Sign(token.Claims{Subject: u.ID, Tenant: u.TenantUUID, Role: u.Role, Kind: token.Access, Family: claims.Family})
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: u.TenantUUID, Kind: AuditRefresh, Actor: u.ID, ActorKind: "user"})
	c.JSON(http.StatusOK, session{AccessToken: access, RefreshToken: next, ExpiresIn: int64(h.Tokens.AccessTTL().Seconds()), TokenType: "Bearer"})
}

func (h *handler) logout(c *gin.Context) {
	var in refreshBody
	if !h.bind(c, &in) {
		return
	}
	claims, ok := h.verifyRefresh(c, in.RefreshToken)
	if !ok {
		return
	}
	if err := h.Store.EndSession(c.Request.Context(), claims.Subject, claims.Family); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: claims.Tenant, Kind: AuditLogout, Actor: claims.Subject, ActorKind: "user"})
	c.Status(http.StatusNoContent)
}

func (h *handler) me(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	u, err := h.Store.User(c.Request.Context(), who.TenantUUID, who.UserID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

func (h *handler) changePassword(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	var in struct {
		CurrentPassword string `json:"currentPassword"`
		NewPassword     string `json:"newPassword"`
	}
	if !h.bind(c, &in) {
		return
	}
	if err := h.Store.ChangePassword(c.Request.Context(), who.TenantUUID, who.UserID, in.CurrentPassword, in.NewPassword); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditPasswordChange, Actor: who.UserID, ActorKind: "user", Target: who.UserID})
	c.Status(http.StatusNoContent)
}

// requestReset always answers 202, whether or not the address has an
// account, so the endpoint cannot be used to find out who has one. Only
// the checks of the address itself come before the answer: looking the
// account up, storing its token and sending the mail take longer for an
// address with an account, and an answer that waited for them would tell
// by its time.
func (h *handler) requestReset(c *gin.Context) {
	var in struct {
		Email string `json:"email"`
	}
	if !h.bind(c, &in) {
		return
	}
	email := strings.ToLower(strings.TrimSpace(in.Email))
	if err := CheckEmail(email); err != nil {
		h.fail(c, err)
		return
	}
	h.later(func(ctx context.Context) {
		u, tok, ok, err := h.Store.StartReset(ctx, email, h.ResetTTL)
		if err != nil {
			h.Log.Error("password reset request failed", "err", err)
			return
		}
		if ok {
			h.sendReset(ctx, u, tok)
		}
	})
	c.JSON(http.StatusAccepted, gin.H{"message": "if the address has an account, a reset link is on its way"})
}

func (h *handler) adminReset(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		UserID string `json:"userId"`
	}
	if !h.bind(c, &in) {
		return
	}
	u, tok, err := h.Store.StartResetFor(c.Request.Context(), who.TenantUUID, in.UserID, h.ResetTTL)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.sendReset(c.Request.Context(), u, tok)
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditPasswordReset, Actor: who.UserID, ActorKind: "user", Target: u.ID,
		Detail: map[string]any{"trigger": "admin"}})
	c.JSON(http.StatusAccepted, gin.H{"message": "a reset link was sent to " + u.Email})
}

// idpExchange turns an identity provider's access token (Authorization:
// Bearer) into a local session for the account with the identity's
// verified e-mail. The provider vouches for who the caller is; which
// tenant and role they have stays this API's decision, so an identity
// without an account is refused rather than given one.
func (h *handler) idpExchange(c *gin.Context) {
	scheme, raw, _ := strings.Cut(strings.TrimSpace(c.GetHeader("Authorization")), " ")
	raw = strings.TrimSpace(raw)
	if !strings.EqualFold(scheme, "Bearer") || raw == "" {
		c.Header("WWW-Authenticate", `Bearer realm="edgeplat"`)
		h.WriteError(c, http.StatusUnauthorized, "unauthorized", "missing the identity provider's token in Authorization: Bearer")
		return
	}
	id, err := h.IdP.Verify(c.Request.Context(), raw)
	switch {
	case errors.Is(err, idp.ErrUnavailable):
		h.Log.Error("identity provider keys unavailable", "err", err)
		h.WriteError(c, http.StatusServiceUnavailable, "unavailable", "the identity provider cannot be reached; retry")
		return
	case err != nil:
		h.Log.Debug("identity provider token refused", "err", err)
		h.WriteError(c, http.StatusUnauthorized, "invalid_token", "invalid or expired identity provider token")
		return
	}
	if id.Email == "" || !id.EmailVerified {
		h.WriteError(c, http.StatusForbidden, "forbidden", "the identity carries no verified e-mail address")
		return
	}
	u, err := h.Store.UserByEmail(c.Request.Context(), id.Email)
	if errors.Is(err, ErrNotFound) {
		h.audit(c, Event{Kind: AuditLoginFailed, Actor: truncate(strings.ToLower(id.Email)), ActorKind: "idp", Outcome: "failure",
			Detail: map[string]any{"issuer": id.Issuer, "reason": "no account"}})
		h.WriteError(c, http.StatusForbidden, "forbidden", "no edgeplat account has the e-mail address of this identity; ask an admin for an invitation")
		return
	}
	if err != nil {
		h.fail(c, err)
		return
	}
	h.signIn(c, u, http.StatusOK, AuditLogin, map[string]any{"via": "idp", "issuer": id.Issuer})
}

func (h *handler) listInvites(c *gin.Context) {
	who, _ := h.Caller(c)
	invites, err := h.Store.Invites(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"invites": invites})
}

func (h *handler) createInvite(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		Email string `json:"email"`
		Role  string `json:"role"`
	}
	if !h.bind(c, &in) {
		return
	}
	ttl := h.InviteTTL
	if ttl <= 0 {
		ttl = 7 * 24 * time.Hour
	}
	inv, tok, err := h.Store.CreateInvite(c.Request.Context(), who.TenantUUID, who.UserID, in.Email, in.Role, ttl)
	if err != nil {
		h.fail(c, err)
		return
	}
	link := strings.TrimRight(h.PublicURL, "/") + "/accept-invite?token=" + tok
	body := "You are invited to an edgeplat workspace as " + inv.Role + ".\n\n" +
		"Open this link within " + ttl.String() + " to choose your password:\n\n" + link + "\n"
	h.deliver(c.Request.Context(), inv.Email, "Your edgeplat invitation", body, link, "invitation")
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditInviteCreated, Actor: who.UserID, ActorKind: "user", Target: inv.Email,
		Detail: map[string]any{"role": inv.Role, "id": inv.ID}})
	c.JSON(http.StatusCreated, inv)
}

func (h *handler) cancelInvite(c *gin.Context) {
	who, _ := h.Caller(c)
	if err := h.Store.CancelInvite(c.Request.Context(), who.TenantUUID, c.Param("id")); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditInviteCancelled, Actor: who.UserID, ActorKind: "user", Target: c.Param("id")})
	c.Status(http.StatusNoContent)
}

// acceptInvite creates the invitee's account and signs them in.
func (h *handler) acceptInvite(c *gin.Context) {
	var in struct {
		Token    string `json:"token"`
		Username string `json:"username"`
		Password string `json:"password"`
	}
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.AcceptInvite(c.Request.Context(), in.Token, in.Username, in.Password)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.signIn(c, u, http.StatusCreated, AuditInviteAccepted, nil)
}

// sendReset mails a reset link.
func (h *handler) sendReset(ctx context.Context, u User, tok string) {
	link := strings.TrimRight(h.PublicURL, "/") + "/reset-password?token=" + tok
	body := "A password reset was requested for your edgeplat account " + u.Email + ".\n\n" +
		"Open this link within " + h.ResetTTL.String() + " to choose a new password:\n\n" + link +
		"\n\nIf you did not ask for it, ignore this mail; your password stays as it is.\n"
	h.deliver(ctx, u.Email, "Reset your edgeplat password", body, link, "password reset")
}

// deliver mails body to to, or logs the link when no mail server is
// configured (or the mail cannot be sent), for the operator to pass on.
func (h *handler) deliver(ctx context.Context, to, subject, body, link, what string) {
	if h.Mailer != nil {
		err := h.Mailer.Send(ctx, to, subject, body)
		if err == nil {
			return
		}
		h.Log.Error(what+" mail not sent; the link is logged instead", "to", to, "err", err)
	}
	h.Log.Warn(what+" link (no mail server configured)", "to", to, "link", link)
}

func (h *handler) confirmReset(c *gin.Context) {
	var in struct {
		Token       string `json:"token"`
		NewPassword string `json:"newPassword"`
	}
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.FinishReset(c.Request.Context(), in.Token, in.NewPassword)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: u.TenantUUID, Kind: AuditPasswordReset, Actor: u.ID, ActorKind: "user", Target: u.ID,
		Detail: map[string]any{"trigger": "link"}})
	c.Status(http.StatusNoContent)
}

func (h *handler) listUsers(c *gin.Context) {
	who, _ := h.Caller(c)
	users, err := h.Store.Users(c.Request.Context(), who.TenantUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"users": users})
}

func (h *handler) createUser(c *gin.Context) {
	who, _ := h.Caller(c)
	var in struct {
		credentials
		Role string `json:"role"`
	}
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.CreateUser(c.Request.Context(), who.TenantUUID, NewUser{Email: in.Email, Username: in.Username, Password: in.Password, Role: in.Role})
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditUserCreated, Actor: who.UserID, ActorKind: "user", Target: u.ID,
		Detail: map[string]any{"role": u.Role}})
	c.JSON(http.StatusCreated, u)
}

// getUser shows an account of the caller's tenant: any account to an
// admin, their own to a member.
func (h *handler) getUser(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	id := c.Param("id")
	if who.Role != RoleAdmin && id != who.UserID {
		h.WriteError(c, http.StatusForbidden, "forbidden", "members may see their own account only")
		return
	}
	u, err := h.Store.User(c.Request.Context(), who.TenantUUID, id)
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, u)
}

func (h *handler) updateUser(c *gin.Context) {
	who, _ := h.Caller(c)
	var in UserUpdate
	if !h.bind(c, &in) {
		return
	}
	u, err := h.Store.UpdateUser(c.Request.Context(), who.TenantUUID, c.Param("id"), in)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditUserUpdated, Actor: who.UserID, ActorKind: "user", Target: u.ID,
		Detail: map[string]any{"role": u.Role, "active": u.Active}})
	c.JSON(http.StatusOK, u)
}

func (h *handler) deleteUser(c *gin.Context) {
	who, _ := h.Caller(c)
	id := c.Param("id")
	if err := h.Store.DeleteUser(c.Request.Context(), who.TenantUUID, id); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditUserDeleted, Actor: who.UserID, ActorKind: "user", Target: id})
	c.Status(http.StatusNoContent)
}

// keyOwner is whose keys a caller manages: an admin's "" (the tenant's),
// a member's own.
func keyOwner(who Caller) string {
	if who.Role == RoleAdmin {
		return ""
	}
	return who.UserID
}

func (h *handler) listAPIKeys(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	keys, err := h.Store.APIKeys(c.Request.Context(), who.TenantUUID, keyOwner(who))
	if err != nil {
		h.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"apiKeys": keys})
}

func (h *handler) createAPIKey(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	var in struct {
		Name      string `json:"name"`
		AgentUUID string `json:"agentUuid"`
	}
	if !h.bind(c, &in) {
		return
	}
	k, plain, err := h.Store.CreateAPIKey(c.Request.Context(), who.TenantUUID, who.UserID, in.Name, in.AgentUUID)
	if err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditAPIKeyCreated, Actor: who.UserID, ActorKind: "user", Target: k.ID,
		Detail: map[string]any{"prefix": k.Prefix, "name": k.Name}})
	c.JSON(http.StatusCreated, gin.H{"apiKey": k, "key": plain})
}

func (h *handler) revokeAPIKey(c *gin.Context) {
	who, ok := h.caller(c)
	if !ok {
		return
	}
	id := c.Param("id")
	if err := h.Store.RevokeAPIKey(c.Request.Context(), who.TenantUUID, keyOwner(who), id); err != nil {
		h.fail(c, err)
		return
	}
	h.audit(c, Event{Tenant: who.TenantUUID, Kind: AuditAPIKeyRevoked, Actor: who.UserID, ActorKind: "user", Target: id})
	c.Status(http.StatusNoContent)
}

// listEvents pages through the tenant's audit log: from, to (RFC 3339),
// kind, actor, limit (1..500, default 50) and before (the previous
// page's nextBefore).
func (h *handler) listEvents(c *gin.Context) {
	who, _ := h.Caller(c)
	f := EventFilter{Kind: c.Query("kind"), Actor: c.Query("actor"), Limit: 50}
	for name, dst := range map[string]*time.Time{"from": &f.From, "to": &f.To} {
		if v := c.Query(name); v != "" {
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				h.WriteError(c, http.StatusBadRequest, "invalid_parameter", name+" must be an RFC 3339 time, got "+strconv.Quote(v))
				return
			}
			*dst = t
		}
	}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "limit must be 1..500, got "+strconv.Quote(v))
			return
		}
		f.Limit = n
	}
	if v := c.Query("before"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			h.WriteError(c, http.StatusBadRequest, "invalid_parameter", "before must be a positive event id, got "+strconv.Quote(v))
			return
		}
		f.Before = n
	}
	events, next, err := h.Store.Events(c.Request.Context(), who.TenantUUID, f)
	if err != nil {
		h.fail(c, err)
		return
	}
	body := gin.H{"events": events, "nextBefore": nil}
	if next > 0 {
		body["nextBefore"] = next
	}
	c.JSON(http.StatusOK, body)
}
