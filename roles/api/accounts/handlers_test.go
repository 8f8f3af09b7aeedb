package accounts

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/idp"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// sentMail is one message the handlers sent.
type sentMail struct{ to, subject, body string }

// mailbox is a Mailer that hands each message to the test.
type mailbox chan sentMail

func (m mailbox) Send(_ context.Context, to, subject, body string) error {
	m <- sentMail{to, subject, body}
	return nil
}

// next waits for the next message; reset mails are sent after the answer.
func (m mailbox) next(t *testing.T) sentMail {
	t.Helper()
	select {
	case msg := <-m:
		return msg
	case <-time.After(10 * time.Second):
		t.Fatal("no mail was sent")
		return sentMail{}
	}
}

// token returns the token of the link in a mail.
func (msg sentMail) token(t *testing.T) string {
	t.Helper()
	for _, line := range strings.Split(msg.body, "\n") {
		if u, err := url.Parse(strings.TrimSpace(line)); err == nil && u.Scheme == "https" {
			if tok := u.Query().Get("token"); tok != "" {
				return tok
			}
		}
	}
	t.Fatalf("no link with a token in the mail %q", msg.body)
	return ""
}

// fakeIdP vouches for "verified:EMAIL" and "unverified:EMAIL", cannot be
// reached for "down", and refuses any other token.
type fakeIdP struct{}

func (fakeIdP) Verify(_ context.Context, raw string) (idp.Identity, error) {
	kind, email, _ := strings.Cut(raw, ":")
	switch kind {
	case "verified", "unverified":
		return idp.Identity{Subject: "sub-1", Email: email, EmailVerified: kind == "verified", Issuer: "https://idp.example.com"}, nil
	case "down":
		return idp.Identity{}, idp.ErrUnavailable
	}
	return idp.Identity{}, errors.New("bad signature")
}

// harness is the account routes on /api/v1 as the API mounts them, with
// the API's authenticator reduced to its core: a valid access token
// (Authorization: Bearer) names the caller.
type harness struct {
	t      *testing.T
	e      *gin.Engine
	store  *Store
	tokens *token.Service
	mail   mailbox
	gated  int
}

func newHarness(t *testing.T, engine string, mod func(*Deps)) *harness {
	t.Helper()
	s, _ := newTestStore(t, engine)
	tokens, err := token.New(config.JWT{Secret: config.Secret(strings.Repeat("s", 32)), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: s, tokens: tokens, mail: make(mailbox, 4)}
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	public := e.Group("/api/v1")
	protected := e.Group("/api/v1", func(c *gin.Context) {
		raw := strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")
		if claims, err := tokens.Verify(raw, token.Access); err == nil {
			c.Set("caller", Caller{UserID: claims.Subject, TenantUUID: claims.Tenant, Role: claims.Role})
		}
	})
	deps := Deps{
		Store:  s,
		Tokens: tokens,
		Caller: func(c *gin.Context) (Caller, bool) {
			v, ok := c.Get("caller")
			if !ok {
				return Caller{}, false
			}
			return v.(Caller), true
		},
		WriteError: apitest.WriteError,
		Mailer:     h.mail,
		PublicURL:  "https://edge.example.com/",
		ResetTTL:   time.Hour,
		InviteTTL:  time.Hour,
		AdminGate:  func(c *gin.Context) { h.gated++; c.Next() },
		IdP:        fakeIdP{},
		Log:        slog.New(slog.DiscardHandler),
	}
	if mod != nil {
		mod(&deps)
	}
	Register(public, protected, deps)
	h.e = e
	return h
}

// call sends a request with the bearer token (if any) and body (JSON
// unless a string).
func (h *harness) call(method, path, bearer string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, path, bearer, body)
}

// login signs in and returns the access and refresh tokens.
func (h *harness) login(email, password string) (access, refresh string) {
	h.t.Helper()
	r := h.call("POST", "/api/v1/auth/login", "", map[string]any{"email": email, "password": password}).Expect(h.t, "login "+email, http.StatusOK)
	return r.Str("accessToken"), r.Str("refreshToken")
}

// accessFor signs an access token for u, as a login would.
func (h *harness) accessFor(u User) string {
	h.t.Helper()
	raw, _, err := h.tokens.Sign(token.Claims{Subject: u.ID, Tenant: u.TenantUUID, Role: u.Role, Kind: token.Access, Family: "fam"})
	if err != nil {
		h.t.Fatal(err)
	}
	return raw
}

// events returns the kinds of the tenant's audit events, newest first.
func (h *harness) eventKinds(tenant string) []string {
	h.t.Helper()
	events, _, err := h.store.Events(h.t.Context(), tenant, EventFilter{Limit: 100})
	if err != nil {
		h.t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

func TestHandlerErrorsIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", nil)
	ctx := t.Context()
	admin, err := h.store.Bootstrap(ctx, NewUser{Email: "admin@example.com", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	member, err := h.store.CreateUser(ctx, admin.TenantUUID, NewUser{Email: "m@example.com", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	outsider, err := h.store.Register(ctx, "", NewUser{Email: "o@example.com", Password: testPassword})
	if err != nil {
		t.Fatal(err)
	}
	asAdmin, asMember, asOutsider := h.accessFor(admin), h.accessFor(member), h.accessFor(outsider)
	h.login("m@example.com", testPassword)
	if _, _, err := h.store.CreateInvite(ctx, admin.TenantUUID, admin.ID, "invited@example.com", RoleMember, time.Hour); err != nil {
		t.Fatal(err)
	}
	const unknownID = "00000000-0000-4000-8000-000000000000"

	tests := []struct {
		name         string
		method, path string
		bearer       string
		body         any
		status       int
		code         string
	}{
		{"bootstrap twice", "POST", "/auth/bootstrap-admin", "", map[string]any{"email": "x@example.com", "password": testPassword}, 409, "already_bootstrapped"},
		{"registration off", "POST", "/auth/register", "", map[string]any{"email": "x@example.com", "password": testPassword}, 403, "registration_disabled"},
		{"login, not JSON", "POST", "/auth/login", "", "email=m@example.com", 400, "invalid_body"},
		{"login, unknown field", "POST", "/auth/login", "", map[string]any{"login": "m@example.com", "password": testPassword}, 400, "invalid_body"},
		{"login, two documents", "POST", "/auth/login", "", `{"email":"m@example.com"} {}`, 400, "invalid_body"},
		{"login without password", "POST", "/auth/login", "", map[string]any{"email": "m@example.com"}, 400, "invalid_body"},
		{"login, wrong password", "POST", "/auth/login", "", map[string]any{"email": "m@example.com", "password": "wrong password"}, 401, "invalid_credentials"},
		{"login, unknown account", "POST", "/auth/login", "", map[string]any{"username": "nobody", "password": testPassword}, 401, "invalid_credentials"},
		{"refresh, garbage", "POST", "/auth/refresh", "", map[string]any{"refreshToken": "garbage"}, 401, "invalid_token"},
		{"refresh with an access token", "POST", "/auth/refresh", "", map[string]any{"refreshToken": asMember}, 401, "invalid_token"},
		{"logout, garbage", "POST", "/auth/logout", "", map[string]any{"refreshToken": "garbage"}, 401, "invalid_token"},
		{"reset request, not an address", "POST", "/auth/password/reset", "", map[string]any{"email": "nobody"}, 422, "validation_failed"},
		{"reset, unknown token", "POST", "/auth/password/reset/confirm", "", map[string]any{"token": "x", "newPassword": testPassword}, 401, "invalid_token"},
		{"reset, weak password", "POST", "/auth/password/reset/confirm", "", map[string]any{"token": "x", "newPassword": "short"}, 422, "validation_failed"},
		{"accept, unknown token", "POST", "/invites/accept", "", map[string]any{"token": "x", "password": testPassword}, 401, "invalid_token"},
		{"me without a credential", "GET", "/auth/me", "", nil, 401, "unauthorized"},
		{"users without a credential", "GET", "/users", "", nil, 401, "unauthorized"},
		{"member lists users", "GET", "/users", asMember, nil, 403, "forbidden"},
		{"member creates a user", "POST", "/users", asMember, map[string]any{"email": "x@example.com", "password": testPassword}, 403, "forbidden"},
		{"member reads the audit log", "GET", "/audit/events", asMember, nil, 403, "forbidden"},
		{"member invites", "POST", "/invites", asMember, map[string]any{"email": "x@example.com"}, 403, "forbidden"},
		{"member resets a password", "POST", "/auth/reset-password", asMember, map[string]any{"userId": admin.ID}, 403, "forbidden"},
		{"member reads another account", "GET", "/users/" + admin.ID, asMember, nil, 403, "forbidden"},
		{"create, weak password", "POST", "/users", asAdmin, map[string]any{"email": "x@example.com", "password": "short"}, 422, "validation_failed"},
		{"create, unknown role", "POST", "/users", asAdmin, map[string]any{"email": "x@example.com", "password": testPassword, "role": "owner"}, 422, "validation_failed"},
		{"create, taken e-mail", "POST", "/users", asAdmin, map[string]any{"email": "O@example.com", "password": testPassword}, 409, "conflict"},
		{"get, unknown account", "GET", "/users/" + unknownID, asAdmin, nil, 404, "not_found"},
		{"get, another tenant's account", "GET", "/users/" + member.ID, asOutsider, nil, 404, "not_found"},
		{"update, another tenant's account", "PUT", "/users/" + member.ID, asOutsider, map[string]any{"role": "admin"}, 404, "not_found"},
		{"demote the last admin", "PUT", "/users/" + admin.ID, asAdmin, map[string]any{"role": "member"}, 409, "conflict"},
		{"update, unknown field", "PUT", "/users/" + member.ID, asAdmin, map[string]any{"password": testPassword}, 400, "invalid_body"},
		{"delete the last admin", "DELETE", "/users/" + admin.ID, asAdmin, nil, 409, "conflict"},
		{"delete, unknown account", "DELETE", "/users/" + unknownID, asAdmin, nil, 404, "not_found"},
		{"change password, wrong current", "POST", "/auth/change-password", asMember, map[string]any{"currentPassword": "wrong password", "newPassword": "a new password"}, 401, "invalid_credentials"},
		{"change password, weak new", "POST", "/auth/change-password", asMember, map[string]any{"currentPassword": testPassword, "newPassword": "short"}, 422, "validation_failed"},
		{"api key without a name", "POST", "/api-keys", asMember, map[string]any{"name": " "}, 422, "validation_failed"},
		{"api key for an unknown agent", "POST", "/api-keys", asMember, map[string]any{"name": "k", "agentUuid": unknownID}, 404, "not_found"},
		{"revoke an unknown api key", "DELETE", "/api-keys/" + unknownID, asMember, nil, 404, "not_found"},
		{"audit, bad limit", "GET", "/audit/events?limit=0", asAdmin, nil, 400, "invalid_parameter"},
		{"audit, bad from", "GET", "/audit/events?from=yesterday", asAdmin, nil, 400, "invalid_parameter"},
		{"audit, bad before", "GET", "/audit/events?before=-1", asAdmin, nil, 400, "invalid_parameter"},
		{"invite twice", "POST", "/invites", asAdmin, map[string]any{"email": "invited@example.com"}, 409, "conflict"},
		{"invite an account holder", "POST", "/invites", asAdmin, map[string]any{"email": "m@example.com"}, 409, "conflict"},
		{"invite, unknown role", "POST", "/invites", asAdmin, map[string]any{"email": "x@example.com", "role": "owner"}, 422, "validation_failed"},
		{"cancel an unknown invite", "DELETE", "/invites/" + unknownID, asAdmin, nil, 404, "not_found"},
		{"reset another tenant's account", "POST", "/auth/reset-password", asOutsider, map[string]any{"userId": member.ID}, 404, "not_found"},
		{"idp without a token", "POST", "/auth/idp-exchange", "", nil, 401, "unauthorized"},
		{"idp unreachable", "POST", "/auth/idp-exchange", "down", nil, 503, "unavailable"},
		{"idp refuses the token", "POST", "/auth/idp-exchange", "forged", nil, 401, "invalid_token"},
		{"idp, unverified e-mail", "POST", "/auth/idp-exchange", "unverified:m@example.com", nil, 403, "forbidden"},
		{"idp, no account", "POST", "/auth/idp-exchange", "verified:stranger@example.com", nil, 403, "forbidden"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.call(tt.method, "/api/v1"+tt.path, tt.bearer, tt.body).ExpectError(t, tt.status, tt.code)
		})
	}
	// None of the refused requests changed an account.
	users, err := h.store.Users(ctx, admin.TenantUUID)
	if err != nil || len(users) != 2 || users[0].Role != RoleAdmin || users[1].Role != RoleMember {
		t.Errorf("accounts after the refused requests: %+v, %v", users, err)
	}
	if _, err := h.store.Authenticate(ctx, "m@example.com", testPassword); err != nil {
		t.Errorf("the member's password changed: %v", err)
	}
	if kinds := h.eventKinds(admin.TenantUUID); !slices.Contains(kinds, AuditLoginFailed) {
		t.Errorf("the failed logins were not audited: %v", kinds)
	}
}

// TestAuthHandlersIntegration walks an installation's accounts through
// the routes: the first admin, logins and their sessions, and the other
// accounts an admin makes.
func TestAuthHandlersIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine, nil)
			r := h.call("POST", "/api/v1/auth/bootstrap-admin", "", map[string]any{"email": "Admin@Example.com", "password": testPassword}).
				Expect(t, "bootstrap", http.StatusCreated)
			if r.Str("tokenType") != "Bearer" || r.Str("user", "role") != RoleAdmin || r.Str("user", "email") != "admin@example.com" ||
				r.Body["expiresIn"] != float64(60) || strings.Contains(r.Raw, "password") {
				t.Errorf("bootstrap answer: %s", r.Raw)
			}
			tenant := r.Str("user", "tenantId")
			admin := r.Str("accessToken")
			r = h.call("GET", "/api/v1/auth/me", admin, nil).Expect(t, "me", http.StatusOK)
			if r.Str("email") != "admin@example.com" || r.Str("tenantId") != tenant {
				t.Errorf("me: %s", r.Raw)
			}

			// Refresh rotates; the rotated-away token replayed ends the
			// session, and the replay is audited.
			_, refresh := h.login("admin@example.com", testPassword)
			r = h.call("POST", "/api/v1/auth/refresh", "", map[string]any{"refreshToken": refresh}).Expect(t, "refresh", http.StatusOK)
			next := r.Str("refreshToken")
			if next == "" || next == refresh || r.Str("accessToken") == "" {
				t.Fatalf("refresh answer: %s", r.Raw)
			}
			h.call("POST", "/api/v1/auth/refresh", "", map[string]any{"refreshToken": refresh}).Expect(t, "replay", http.StatusUnauthorized)
			h.call("POST", "/api/v1/auth/refresh", "", map[string]any{"refreshToken": next}).Expect(t, "refresh after the replay", http.StatusUnauthorized)
			if kinds := h.eventKinds(tenant); !slices.Contains(kinds, AuditRefreshReuse) {
				t.Errorf("the replay was not audited: %v", kinds)
			}

			// Logout ends the session.
			_, refresh = h.login("admin@example.com", testPassword)
			h.call("POST", "/api/v1/auth/logout", "", map[string]any{"refreshToken": refresh}).Expect(t, "logout", http.StatusNoContent)
			h.call("POST", "/api/v1/auth/refresh", "", map[string]any{"refreshToken": refresh}).Expect(t, "refresh after logout", http.StatusUnauthorized)

			// Accounts of the tenant.
			r = h.call("POST", "/api/v1/users", admin, map[string]any{"email": "op@example.com", "username": "op1", "password": testPassword}).
				Expect(t, "create user", http.StatusCreated)
			memberID := r.Str("id")
			if r.Str("role") != RoleMember || r.Str("tenantId") != tenant || strings.Contains(r.Raw, "password") {
				t.Errorf("created user: %s", r.Raw)
			}
			r = h.call("GET", "/api/v1/users", admin, nil).Expect(t, "list users", http.StatusOK)
			if len(r.List("users")) != 2 {
				t.Errorf("users: %s", r.Raw)
			}
			member, _ := h.login("op1", testPassword)
			h.call("GET", "/api/v1/users/"+memberID, member, nil).Expect(t, "member reads their own account", http.StatusOK)
			r = h.call("PUT", "/api/v1/users/"+memberID, admin, map[string]any{"role": "admin", "username": "op-one"}).Expect(t, "update", http.StatusOK)
			if r.Str("role") != RoleAdmin || r.Str("username") != "op-one" {
				t.Errorf("updated user: %s", r.Raw)
			}
			h.call("POST", "/api/v1/auth/change-password", member, map[string]any{"currentPassword": testPassword, "newPassword": "another password"}).
				Expect(t, "change password", http.StatusNoContent)
			h.login("op-one", "another password")
			h.call("DELETE", "/api/v1/users/"+memberID, admin, nil).Expect(t, "delete", http.StatusNoContent)
			h.call("GET", "/api/v1/users/"+memberID, admin, nil).Expect(t, "get after delete", http.StatusNotFound)

			// API keys: the plaintext once, then the listing without it.
			r = h.call("POST", "/api/v1/api-keys", admin, map[string]any{"name": "exporter"}).Expect(t, "create api key", http.StatusCreated)
			key, keyID := r.Str("key"), r.Str("apiKey", "id")
			if !IsAPIKey(key) || keyID == "" {
				t.Fatalf("api key answer: %s", r.Raw)
			}
			r = h.call("GET", "/api/v1/api-keys", admin, nil).Expect(t, "list api keys", http.StatusOK)
			if len(r.List("apiKeys")) != 1 || strings.Contains(r.Raw, key) {
				t.Errorf("api keys: %s", r.Raw)
			}
			h.call("DELETE", "/api/v1/api-keys/"+keyID, admin, nil).Expect(t, "revoke api key", http.StatusNoContent)
			h.call("DELETE", "/api/v1/api-keys/"+keyID, admin, nil).Expect(t, "revoke twice", http.StatusNotFound)

			// The audit log, in pages.
			r = h.call("GET", "/api/v1/audit/events?limit=2", admin, nil).Expect(t, "audit", http.StatusOK)
			before, _ := r.Body["nextBefore"].(float64)
			if len(r.List("events")) != 2 || before == 0 {
				t.Fatalf("first audit page: %s", r.Raw)
			}
			r = h.call("GET", "/api/v1/audit/events?kind=auth.bootstrap_admin&before="+strconv.FormatInt(int64(before), 10), admin, nil).
				Expect(t, "audit, second page", http.StatusOK)
			if events := r.List("events"); len(events) != 1 || r.Body["nextBefore"] != nil {
				t.Errorf("bootstrap event below the first page: %s", r.Raw)
			}
			if h.gated == 0 {
				t.Error("the admin gate never ran")
			}
		})
	}
}

// TestMailedLinksIntegration follows the links the handlers mail:
// an invitation and a password reset.
func TestMailedLinksIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine, func(d *Deps) { d.AllowRegistration = true })
			r := h.call("POST", "/api/v1/auth/register", "", map[string]any{"email": "boss@example.com", "password": testPassword, "tenantName": "Plant"}).
				Expect(t, "register", http.StatusCreated)
			admin := r.Str("accessToken")

			r = h.call("POST", "/api/v1/invites", admin, map[string]any{"email": "New@Example.com", "role": "admin"}).Expect(t, "invite", http.StatusCreated)
			inviteID := r.Str("id")
			msg := h.mail.next(t)
			if msg.to != "new@example.com" || !strings.Contains(msg.body, "https://edge.example.com/accept-invite?token=") {
				t.Errorf("invitation mail %+v", msg)
			}
			r = h.call("GET", "/api/v1/invites", admin, nil).Expect(t, "list invites", http.StatusOK)
			if l := r.List("invites"); len(l) != 1 || strings.Contains(r.Raw, msg.token(t)) {
				t.Errorf("invites: %s", r.Raw)
			}
			r = h.call("POST", "/api/v1/invites/accept", "", map[string]any{"token": msg.token(t), "password": testPassword}).
				Expect(t, "accept", http.StatusCreated)
			if r.Str("user", "role") != RoleAdmin || r.Str("accessToken") == "" {
				t.Errorf("accept answer: %s", r.Raw)
			}
			h.call("POST", "/api/v1/invites/accept", "", map[string]any{"token": msg.token(t), "password": testPassword}).
				Expect(t, "accept twice", http.StatusUnauthorized)
			h.call("DELETE", "/api/v1/invites/"+inviteID, admin, nil).Expect(t, "cancel an accepted invite", http.StatusNotFound)

			// Reset by mail: 202 at once, the link comes after.
			h.call("POST", "/api/v1/auth/password/reset", "", map[string]any{"email": "NEW@example.com"}).Expect(t, "reset request", http.StatusAccepted)
			msg = h.mail.next(t)
			if msg.to != "new@example.com" || !strings.Contains(msg.body, "https://edge.example.com/reset-password?token=") {
				t.Errorf("reset mail %+v", msg)
			}
			h.call("POST", "/api/v1/auth/password/reset/confirm", "", map[string]any{"token": msg.token(t), "newPassword": "a reset password"}).
				Expect(t, "confirm", http.StatusNoContent)
			h.login("new@example.com", "a reset password")
			h.call("POST", "/api/v1/auth/password/reset/confirm", "", map[string]any{"token": msg.token(t), "newPassword": "a third password"}).
				Expect(t, "confirm twice", http.StatusUnauthorized)

			// An admin's reset of another account mails the link too.
			r = h.call("GET", "/api/v1/users", admin, nil).Expect(t, "list users", http.StatusOK)
			newID := r.List("users")[1].(map[string]any)["id"].(string)
			h.call("POST", "/api/v1/auth/reset-password", admin, map[string]any{"userId": newID}).Expect(t, "admin reset", http.StatusAccepted)
			if msg := h.mail.next(t); msg.to != "new@example.com" {
				t.Errorf("admin reset mailed %+v", msg)
			}

			// A sign-in through the identity provider finds the account by
			// its verified address.
			r = h.call("POST", "/api/v1/auth/idp-exchange", "verified:new@example.com", nil).Expect(t, "idp exchange", http.StatusOK)
			if r.Str("user", "id") != newID || r.Str("refreshToken") == "" {
				t.Errorf("idp exchange answer: %s", r.Raw)
			}
		})
	}
}
