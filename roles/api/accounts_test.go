package api

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/token"
)

// accountsEngine is New's /api/v1 engine with the access routes on d and
// no licence.
func accountsEngine(t *testing.T, d *db.DB, tokens *token.Service) *gin.Engine {
	e, _ := accessEngine(t, d, tokens, config.Licence{})
	return e
}

// accessEngine mounts the access layer as New does, on d, with the licence
// lic (loaded). The auth rate limit is off (tests of flows make more than
// ten calls a minute from one address) unless a mod sets it.
func accessEngine(t *testing.T, d *db.DB, tokens *token.Service, lic config.Licence, mods ...func(*config.Config)) (*gin.Engine, *access) {
	t.Helper()
	a := testAccess(t, testBackends(t, d, nil), tokens,
		append([]func(*config.Config){func(c *config.Config) { c.Licence = lic }}, mods...)...)
	return mountAccess(t, a), a
}

// testAccess builds the access layer as accessEngine does, on r, without
// mounting it, so that a test can replace parts (the mailer) first.
func testAccess(t *testing.T, b rt.Backends, tokens *token.Service, mods ...func(*config.Config)) *access {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Auth.RateLimitAuth = 0
	cfg.Auth.AllowRegistration = true
	for _, m := range mods {
		m(cfg)
	}
	cfg.MQTT.BrokerURL = "tcp://127.0.0.1:1"
	a, err := newAccess(cfg, testRuntime(), b, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// mountAccess loads a's licence and mounts it on a new engine.
func mountAccess(t *testing.T, a *access) *gin.Engine {
	t.Helper()
	a.licence.Load(t.Context())
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError, Metrics: prometheus.NewRegistry(), Server: "api"})
	a.mount(e)
	return e
}

type reply struct {
	status int
	body   map[string]any
	raw    string
	header http.Header
}

func (r reply) str(path ...string) string {
	var v any = r.body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

func call(t *testing.T, e http.Handler, method, path, bearer string, body any) reply {
	t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	r := reply{status: w.Code, raw: w.Body.String(), header: w.Header()}
	_ = json.Unmarshal(w.Body.Bytes(), &r.body)
	return r
}

func forEngine(t *testing.T, fn func(t *testing.T, d *db.DB)) {
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) { fn(t, dbtest.Migrated(t, engine)) })
	}
}

func TestBootstrapAdminOnceIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		tokens := testTokens(t)
		e := accountsEngine(t, d, tokens)
		const n = 8
		var wg sync.WaitGroup
		statuses := make([]int, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := call(t, e, "POST", "/api/v1/auth/bootstrap-admin", "", map[string]string{
					"email": "admin" + string(rune('a'+i)) + "@example.com", "password": "correct horse battery"})
				statuses[i] = r.status
			}()
		}
		wg.Wait()
		created := 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusConflict:
			default:
				t.Fatalf("bootstrap answered %d", s)
			}
		}
		if created != 1 {
			t.Fatalf("%d concurrent bootstraps succeeded, want exactly 1 (statuses %v)", created, statuses)
		}
		// A restart is a new engine on the same database.
		e2 := accountsEngine(t, d, tokens)
		r := call(t, e2, "POST", "/api/v1/auth/bootstrap-admin", "", map[string]string{"email": "late@example.com", "password": "correct horse battery"})
		if r.status != http.StatusConflict || r.str("error", "code") != "already_bootstrapped" {
			t.Fatalf("bootstrap after restart: %d %s", r.status, r.raw)
		}
	})
}

func TestAuthFlowIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		tokens := testTokens(t)
		e := accountsEngine(t, d, tokens)
		r := call(t, e, "POST", "/api/v1/auth/bootstrap-admin", "", map[string]string{"email": "Admin@Example.com", "username": "root", "password": "correct horse battery"})
		if r.status != http.StatusCreated || r.str("accessToken") == "" || r.str("user", "role") != "admin" {
			t.Fatalf("bootstrap: %d %s", r.status, r.raw)
		}
		if r.str("user", "email") != "admin@example.com" {
			t.Errorf("email stored as %q, want it lowercased", r.str("user", "email"))
		}

		// Logins by e-mail and by user name; one answer for every failure.
		for _, body := range []map[string]string{
			{"email": "admin@example.com", "password": "correct horse battery"},
			{"username": "ROOT", "password": "correct horse battery"},
		} {
			if r := call(t, e, "POST", "/api/v1/auth/login", "", body); r.status != http.StatusOK || r.body["expiresIn"] != float64(60) {
				t.Fatalf("login %v: %d %s", body, r.status, r.raw)
			}
		}
		wrong := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "wrong password!"})
		unknown := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "nobody@example.com", "password": "wrong password!"})
		if wrong.status != http.StatusUnauthorized || wrong.raw != unknown.raw || unknown.status != wrong.status {
			t.Fatalf("wrong password %d %s; unknown user %d %s: want the same 401", wrong.status, wrong.raw, unknown.status, unknown.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/login", "", `{"email":"admin@example.com","password":"x","remember":true}`); r.status != http.StatusBadRequest ||
			!strings.Contains(r.str("error", "message"), "remember") {
			t.Fatalf("unknown field: %d %s", r.status, r.raw)
		}

		login := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "correct horse battery"})
		access, refresh := login.str("accessToken"), login.str("refreshToken")
		if me := call(t, e, "GET", "/api/v1/auth/me", access, nil); me.status != http.StatusOK || me.str("email") != "admin@example.com" {
			t.Fatalf("me: %d %s", me.status, me.raw)
		}
		// Token kinds do not cross.
		if r := call(t, e, "GET", "/api/v1/auth/me", refresh, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("refresh token as access token: %d", r.status)
		}
		if r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": access}); r.status != http.StatusUnauthorized {
			t.Fatalf("access token as refresh token: %d", r.status)
		}

		// Rotation: the old refresh token dies; reusing it revokes the family.
		rot := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": refresh})
		if rot.status != http.StatusOK || rot.str("refreshToken") == "" || rot.str("refreshToken") == refresh {
			t.Fatalf("refresh: %d %s", rot.status, rot.raw)
		}
		next := rot.str("refreshToken")
		if r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": refresh}); r.status != http.StatusUnauthorized {
			t.Fatalf("reused refresh token: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": next}); r.status != http.StatusUnauthorized {
			t.Fatalf("refresh token of a revoked family: %d %s", r.status, r.raw)
		}

		// Logout ends the session.
		s2 := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "correct horse battery"})
		if r := call(t, e, "POST", "/api/v1/auth/logout", "", map[string]string{"refreshToken": s2.str("refreshToken")}); r.status != http.StatusNoContent {
			t.Fatalf("logout: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": s2.str("refreshToken")}); r.status != http.StatusUnauthorized {
			t.Fatalf("refresh after logout: %d", r.status)
		}

		// Changing the password ends other sessions and needs the old one.
		s3 := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "correct horse battery"})
		// The first session ended with the reuse, its access token with it.
		if r := call(t, e, "GET", "/api/v1/auth/me", access, nil); r.status != http.StatusUnauthorized {
			t.Fatalf("access token of a revoked family: %d %s", r.status, r.raw)
		}
		access = s3.str("accessToken")
		if r := call(t, e, "POST", "/api/v1/auth/change-password", access, map[string]string{"currentPassword": "nope nope", "newPassword": "another long one"}); r.status != http.StatusUnauthorized {
			t.Fatalf("change with a wrong current password: %d", r.status)
		}
		if r := call(t, e, "POST", "/api/v1/auth/change-password", access, map[string]string{"currentPassword": "correct horse battery", "newPassword": "short"}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("change to a short password: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/change-password", access, map[string]string{"currentPassword": "correct horse battery", "newPassword": "another long one"}); r.status != http.StatusNoContent {
			t.Fatalf("change password: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/refresh", "", map[string]string{"refreshToken": s3.str("refreshToken")}); r.status != http.StatusUnauthorized {
			t.Fatalf("refresh of a session from before the password change: %d", r.status)
		}
		relogin := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "admin@example.com", "password": "another long one"})
		if relogin.status != http.StatusOK {
			t.Fatalf("login with the new password: %d", relogin.status)
		}
		access = relogin.str("accessToken")

		// The audit log saw it.
		ev := call(t, e, "GET", "/api/v1/audit/events?kind=auth.refresh_reuse", access, nil)
		if evs, _ := ev.body["events"].([]any); ev.status != http.StatusOK || len(evs) != 1 {
			t.Fatalf("audit events: %d %s", ev.status, ev.raw)
		}
		// The wrong password for this tenant's account is in its log; the
		// unknown account is in no tenant's.
		if r := call(t, e, "GET", "/api/v1/audit/events?kind=auth.login_failed", access, nil); r.status != http.StatusOK {
			t.Fatalf("failed-login events: %d %s", r.status, r.raw)
		} else if evs, _ := r.body["events"].([]any); len(evs) != 1 || !strings.Contains(r.raw, "admin@example.com") {
			t.Fatalf("failed-login events: %s", r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/audit/events?limit=0", access, nil); r.status != http.StatusBadRequest || !strings.Contains(r.str("error", "message"), "limit") {
			t.Fatalf("bad limit: %d %s", r.status, r.raw)
		}
	})
}

// TestForgedTokensRefused sends the tokens an attacker would try; each is a
// 401 in the API's error shape.
func TestForgedTokensRefused(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	privPEM := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	rs, err := token.New(config.JWT{PrivateKey: config.Secret(privPEM), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tenant := randomUUID(t)
	claims := func(mod func(jwt.MapClaims)) jwt.MapClaims {
		now := time.Now()
		c := jwt.MapClaims{"iss": token.Issuer, "sub": "user-1", "tid": tenant, "typ": "access", "fam": "session-1", "iat": now.Unix(), "exp": now.Add(time.Minute).Unix()}
		if mod != nil {
			mod(c)
		}
		return c
	}
	signWith := func(m jwt.SigningMethod, k any, c jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, c).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	good := signWith(jwt.SigningMethodRS256, key, claims(nil))
	e := restEngine(t, rs, nil)
	if r := call(t, e, "GET", "/api/v1/whoami", good, nil); r.status != http.StatusOK {
		t.Fatalf("the control token was refused: %d %s", r.status, r.raw)
	}
	for _, tt := range []struct{ name, tok string }{
		{"alg none", signWith(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims(nil))},
		{"wrong key", signWith(jwt.SigningMethodRS256, other, claims(nil))},
		{"HS256 signed with the RS256 public key", signWith(jwt.SigningMethodHS256, pubPEM, claims(nil))},
		{"expired", signWith(jwt.SigningMethodRS256, key, claims(func(c jwt.MapClaims) { c["exp"] = time.Now().Add(-time.Hour).Unix() }))},
		{"no exp", signWith(jwt.SigningMethodRS256, key, claims(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{"refresh token as access token", signWith(jwt.SigningMethodRS256, key, claims(func(c jwt.MapClaims) { c["typ"] = "refresh"; c["fam"] = "f" }))},
		{"tampered payload", good[:strings.LastIndexByte(good, '.')-2] + "AA" + good[strings.LastIndexByte(good, '.'):]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e, "GET", "/api/v1/whoami", tt.tok, nil)
			if r.status != http.StatusUnauthorized || r.str("error", "code") != "unauthorized" {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		})
	}
}

// TestTenantIsolationIntegration: a user of tenant A reaching tenant B's
// users and keys gets 404, the answer for a record that does not exist.
func TestTenantIsolationIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e := accountsEngine(t, d, testTokens(t))
		reg := func(email string) reply {
			r := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": email, "password": "correct horse battery"})
			if r.status != http.StatusCreated {
				t.Fatalf("register %s: %d %s", email, r.status, r.raw)
			}
			return r
		}
		a, b := reg("a@example.com"), reg("b@example.com")
		if a.str("user", "tenantId") == b.str("user", "tenantId") {
			t.Fatal("two registrations share a tenant")
		}
		ta, tb := a.str("accessToken"), b.str("accessToken")
		bUser := b.str("user", "id")
		key := call(t, e, "POST", "/api/v1/api-keys", tb, map[string]string{"name": "ci"})
		if key.status != http.StatusCreated || !strings.HasPrefix(key.str("key"), "ek_") {
			t.Fatalf("create api key: %d %s", key.status, key.raw)
		}
		bKey := key.str("apiKey", "id")
		for _, tt := range []struct{ method, path string }{
			{"GET", "/api/v1/users/" + bUser},
			{"PUT", "/api/v1/users/" + bUser},
			{"DELETE", "/api/v1/users/" + bUser},
			{"DELETE", "/api/v1/api-keys/" + bKey},
		} {
			var body any
			if tt.method == "PUT" {
				body = map[string]any{"role": "member"}
			}
			if r := call(t, e, tt.method, tt.path, ta, body); r.status != http.StatusNotFound {
				t.Errorf("%s %s across tenants: %d %s, want 404", tt.method, tt.path, r.status, r.raw)
			}
		}
		if r := call(t, e, "GET", "/api/v1/users", ta, nil); !strings.Contains(r.raw, "a@example.com") || strings.Contains(r.raw, "b@example.com") {
			t.Errorf("tenant A's user list: %s", r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/api-keys", ta, nil); strings.Contains(r.raw, bKey) {
			t.Errorf("tenant A sees tenant B's key: %s", r.raw)
		}

		// The key works as a Bearer credential until revoked.
		if r := call(t, e, "GET", "/api/v1/auth/me", key.str("key"), nil); r.status != http.StatusOK || r.str("id") != bUser {
			t.Fatalf("api key as bearer: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "DELETE", "/api/v1/api-keys/"+bKey, tb, nil); r.status != http.StatusNoContent {
			t.Fatalf("revoke: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/auth/me", key.str("key"), nil); r.status != http.StatusUnauthorized {
			t.Fatalf("revoked api key: %d %s", r.status, r.raw)
		}
		// The last admin cannot demote or delete themself.
		if r := call(t, e, "PUT", "/api/v1/users/"+bUser, tb, map[string]any{"role": "member"}); r.status != http.StatusConflict {
			t.Fatalf("demote the last admin: %d %s", r.status, r.raw)
		}
		// A member is not an admin.
		m := call(t, e, "POST", "/api/v1/users", ta, map[string]string{"email": "m@example.com", "password": "correct horse battery", "role": "member"})
		if m.status != http.StatusCreated {
			t.Fatalf("create member: %d %s", m.status, m.raw)
		}
		ml := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "m@example.com", "password": "correct horse battery"})
		if r := call(t, e, "GET", "/api/v1/users", ml.str("accessToken"), nil); r.status != http.StatusForbidden {
			t.Fatalf("member lists users: %d", r.status)
		}
	})
}

func TestPasswordResetIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		a := testAccess(t, testBackends(t, d, nil), testTokens(t))
		mail := &mailbox{}
		a.mailer = mail
		e := mountAccess(t, a)
		r := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "r@example.com", "password": "correct horse battery"})
		if r.status != http.StatusCreated {
			t.Fatalf("register: %d %s", r.status, r.raw)
		}
		// The same answer whether the address has an account or not.
		known := call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": "r@example.com"})
		unknown := call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": "x@example.com"})
		if known.status != http.StatusAccepted || known.raw != unknown.raw {
			t.Fatalf("reset request: %d %s vs %d %s", known.status, known.raw, unknown.status, unknown.raw)
		}
		// The account's token is stored and mailed after the answer.
		coretest.Eventually(t, 30*time.Second, "the reset mail", func() bool { return mail.count() == 1 })
		tok := mail.token(t)
		if r := call(t, e, "POST", "/api/v1/auth/password/reset/confirm", "", map[string]string{"token": tok, "newPassword": "a brand new secret"}); r.status != http.StatusNoContent {
			t.Fatalf("confirm: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/password/reset/confirm", "", map[string]string{"token": tok, "newPassword": "yet another secret"}); r.status != http.StatusUnauthorized {
			t.Fatalf("second use of a reset token: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/auth/login", "", map[string]string{"email": "r@example.com", "password": "a brand new secret"}); r.status != http.StatusOK {
			t.Fatalf("login with the reset password: %d", r.status)
		}
	})
}

// TestLoginRateLimitIntegration: the 11th login attempt of a minute gets
// 429 with Retry-After and the JSON error.
func TestLoginRateLimitIntegration(t *testing.T) {
	forEngine(t, loginRateLimit)
}

func loginRateLimit(t *testing.T, d *db.DB) {
	a := testAccess(t, testBackends(t, d, nil), testTokens(t), func(c *config.Config) { c.Auth.RateLimitAuth = 10 })
	// The budgets refill one per 6 s: on a slow machine (argon2 under the
	// race detector) eleven logins take longer than that. The clock stands
	// still, so the count is all the test sees.
	frozen := time.Now()
	clock := httpx.WithClock(func() time.Time { return frozen })
	a.authLimit = httpx.Local(httpx.NewLimiter(10, time.Minute, clock))
	a.attempts = httpx.NewAttempts(10, 10, time.Minute, clock)
	e := mountAccess(t, a)
	admin(t, e)
	// From another address than the setup's requests.
	for i := 1; i <= 11; i++ {
		req := httptest.NewRequest("POST", "/api/v1/auth/login", strings.NewReader(`{"email":"admin@example.com","password":"wrong password"}`))
		req.Header.Set("Content-Type", "application/json")
		req.RemoteAddr = "198.51.100.7:40000"
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		if i <= 10 && w.Code != http.StatusUnauthorized {
			t.Fatalf("attempt %d: %d %s", i, w.Code, w.Body)
		}
		if i == 11 {
			var body struct{ Error struct{ Code string } }
			_ = json.Unmarshal(w.Body.Bytes(), &body)
			if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" || body.Error.Code != "rate_limited" {
				t.Fatalf("11th attempt: %d Retry-After=%q %s", w.Code, w.Header().Get("Retry-After"), w.Body)
			}
		}
	}
}

// mailbox keeps the mail the API sends.
type mailbox struct {
	mu   sync.Mutex
	sent []string
}

func (m *mailbox) Send(_ context.Context, to, subject, body string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sent = append(m.sent, to+"\n"+subject+"\n"+body)
	return nil
}

func (m *mailbox) count() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sent)
}

// token returns the token=... of the last mail.
func (m *mailbox) token(t *testing.T) string {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.sent) == 0 {
		t.Fatal("no mail sent")
	}
	last := m.sent[len(m.sent)-1]
	i := strings.Index(last, "token=")
	if i < 0 {
		t.Fatalf("no token in the mail:\n%s", last)
	}
	return strings.Fields(last[i+len("token="):])[0]
}

func TestInvitesIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Auth.RateLimitAuth = 0
		a, err := newAccess(cfg, testRuntime(), testBackends(t, d, nil), testTokens(t))
		if err != nil {
			t.Fatal(err)
		}
		mail := &mailbox{}
		a.mailer = mail
		e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError, Metrics: prometheus.NewRegistry(), Server: "api"})
		a.mount(e)
		tok := admin(t, e)

		inv := call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "New@Example.com", "role": "member"})
		if inv.status != http.StatusCreated || inv.str("email") != "new@example.com" {
			t.Fatalf("invite: %d %s", inv.status, inv.raw)
		}
		if r := call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "new@example.com"}); r.status != http.StatusConflict {
			t.Fatalf("second invitation to one address: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "admin@example.com"}); r.status != http.StatusConflict {
			t.Fatalf("invitation to an existing account: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/invites", tok, nil); !strings.Contains(r.raw, "new@example.com") {
			t.Fatalf("pending invites: %s", r.raw)
		}
		invToken := mail.token(t)
		if r := call(t, e, "POST", "/api/v1/invites/accept", "", map[string]string{"token": invToken, "password": "short"}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("accept with a short password: %d %s", r.status, r.raw)
		}
		acc := call(t, e, "POST", "/api/v1/invites/accept", "", map[string]string{"token": invToken, "password": "correct horse battery"})
		if acc.status != http.StatusCreated || acc.str("user", "role") != "member" || acc.str("accessToken") == "" {
			t.Fatalf("accept: %d %s", acc.status, acc.raw)
		}
		me := call(t, e, "GET", "/api/v1/auth/me", tok, nil)
		if acc.str("user", "tenantId") != me.str("tenantId") {
			t.Fatalf("the invitee joined tenant %s, not the inviter's %s", acc.str("user", "tenantId"), me.str("tenantId"))
		}
		if r := call(t, e, "POST", "/api/v1/invites/accept", "", map[string]string{"token": invToken, "password": "correct horse battery"}); r.status != http.StatusUnauthorized {
			t.Fatalf("second use of an invitation: %d %s", r.status, r.raw)
		}
		// Cancel.
		second := call(t, e, "POST", "/api/v1/invites", tok, map[string]string{"email": "later@example.com"})
		if r := call(t, e, "DELETE", "/api/v1/invites/"+second.str("id"), tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("cancel: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "POST", "/api/v1/invites/accept", "", map[string]string{"token": mail.token(t), "password": "correct horse battery"}); r.status != http.StatusUnauthorized {
			t.Fatalf("accepting a cancelled invitation: %d %s", r.status, r.raw)
		}
		// The reset mail goes through the same mailer, after the answer.
		sent := mail.count()
		call(t, e, "POST", "/api/v1/auth/password/reset", "", map[string]string{"email": "new@example.com"})
		coretest.Eventually(t, 5*time.Second, "the reset mail", func() bool { return mail.count() > sent })
		if r := call(t, e, "POST", "/api/v1/auth/password/reset/confirm", "", map[string]string{"token": mail.token(t), "newPassword": "a brand new secret"}); r.status != http.StatusNoContent {
			t.Fatalf("reset through the mailed link: %d %s", r.status, r.raw)
		}
	})
}

// TestIdPExchangeIntegration runs /auth/idp-exchange against a local
// identity provider (discovery document and JWKS over HTTP).
func TestIdPExchangeIntegration(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var issuer string
	mux := http.NewServeMux()
	mux.HandleFunc("/.well-known/openid-configuration", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]string{"issuer": issuer, "jwks_uri": issuer + "/jwks"})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, _ *http.Request) {
		_ = json.NewEncoder(w).Encode(map[string]any{"keys": []any{map[string]string{
			"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
			"n": base64.RawURLEncoding.EncodeToString(key.N.Bytes()),
			"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
		}}})
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	issuer = srv.URL
	idpToken := func(email string, verified bool, signer *rsa.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodRS256, jwt.MapClaims{"iss": issuer, "aud": "edgeplat", "sub": "idp|" + email,
			"email": email, "email_verified": verified, "exp": time.Now().Add(time.Minute).Unix(), "iat": time.Now().Unix()})
		tok.Header["kid"] = "k1"
		s, err := tok.SignedString(signer)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	e, _ := accessEngine(t, dbtest.Migrated(t, "sqlite"), testTokens(t), config.Licence{}, func(c *config.Config) {
		c.IDP = config.IDP{Enabled: true, Issuer: issuer, Audience: "edgeplat"}
	})
	admin(t, e)
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	for _, tt := range []struct {
		name  string
		token string
		want  int
	}{
		{"an account's verified e-mail", idpToken("admin@example.com", true, key), http.StatusOK},
		{"no account", idpToken("stranger@example.com", true, key), http.StatusForbidden},
		{"unverified e-mail", idpToken("admin@example.com", false, key), http.StatusForbidden},
		{"signed by another key", idpToken("admin@example.com", true, other), http.StatusUnauthorized},
		{"none", "", http.StatusUnauthorized},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := call(t, e, "POST", "/api/v1/auth/idp-exchange", tt.token, nil)
			if r.status != tt.want {
				t.Fatalf("%d %s, want %d", r.status, r.raw, tt.want)
			}
			if tt.want == http.StatusOK {
				if cc := r.header.Get("Cache-Control"); cc != "no-store" {
					t.Errorf("the exchange's answer has Cache-Control %q, want no-store", cc)
				}
				if me := call(t, e, "GET", "/api/v1/auth/me", r.str("accessToken"), nil); me.status != http.StatusOK || me.str("email") != "admin@example.com" {
					t.Fatalf("the exchanged token: %d %s", me.status, me.raw)
				}
				// The provider's token itself is accepted as a credential.
				if me := call(t, e, "GET", "/api/v1/auth/me", tt.token, nil); me.status != http.StatusOK {
					t.Fatalf("the provider's token as a bearer: %d %s", me.status, me.raw)
				}
			}
		})
	}
}

func TestRegistrationIsOffByDefaultIntegration(t *testing.T) {
	e, _ := accessEngine(t, dbtest.Migrated(t, "sqlite"), testTokens(t), config.Licence{}, func(c *config.Config) { c.Auth.AllowRegistration = false })
	r := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "x@example.com", "password": "correct horse battery"})
	if r.status != http.StatusForbidden || r.str("error", "code") != "registration_disabled" {
		t.Fatalf("register with registration off: %d %s", r.status, r.raw)
	}
}

// TestLastAdminUnderConcurrencyIntegration: two admins demoting each other
// at once leave the tenant one admin, never none.
func TestLastAdminUnderConcurrencyIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		store := accounts.NewStore(d)
		ctx := t.Context()
		for round := range 8 {
			first, err := store.Register(ctx, "", accounts.NewUser{Email: fmt.Sprintf("a%d@example.com", round), Password: "correct horse battery"})
			if err != nil {
				t.Fatal(err)
			}
			second, err := store.CreateUser(ctx, first.TenantUUID, accounts.NewUser{Email: fmt.Sprintf("b%d@example.com", round),
				Password: "correct horse battery", Role: accounts.RoleAdmin})
			if err != nil {
				t.Fatal(err)
			}
			member := accounts.RoleMember
			var wg sync.WaitGroup
			for _, id := range []string{first.ID, second.ID} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = store.UpdateUser(ctx, first.TenantUUID, id, accounts.UserUpdate{Role: &member})
				}()
			}
			wg.Wait()
			users, err := store.Users(ctx, first.TenantUUID)
			if err != nil {
				t.Fatal(err)
			}
			admins := 0
			for _, u := range users {
				if u.Role == accounts.RoleAdmin && u.Active {
					admins++
				}
			}
			if admins != 1 {
				t.Fatalf("round %d: %d active admins left, want 1", round, admins)
			}
		}
	})
}
