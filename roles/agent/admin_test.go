package agent

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

func sessionCookieOf(t *testing.T, resp *http.Response) *http.Cookie {
	t.Helper()
	for _, c := range resp.Cookies() {
		if c.Name == "admin_session" {
			return c
		}
	}
	t.Fatalf("no %s cookie in %v", "admin_session", resp.Header.Values("Set-Cookie"))
	return nil
}

func TestAdminSessionAndUsers(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, keyMode)
	// The admin UI asks whether to offer setup, without a key or session.
	setupState := func() string {
		_, body := r.do("GET", "/v1/auth/setup", "", map[string]string{"X-Api-Key": ""})
		return body
	}
	if got := setupState(); got != `{"apiKey":true,"required":true}` {
		t.Fatalf("setup state before setup = %s", got)
	}
	// No admin yet, and no default password: login fails until setup.
	if code, _ := r.do("POST", "/v1/auth/login", `{"username":"admin","password":"admin"}`, nil); code != 401 {
		t.Fatalf("login before setup = %d", code)
	}
	if code, body := r.do("POST", "/v1/auth/setup", `{"username":"root","password":"short"}`, nil); code != 400 || !strings.Contains(body, "password") {
		t.Fatalf("setup with a short password = %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/auth/setup", `{"username":"root","password":"correct horse"}`, nil); code != 201 {
		t.Fatalf("setup = %d %s", code, body)
	}
	if code, _ := r.do("POST", "/v1/auth/setup", `{"username":"other","password":"correct horse"}`, nil); code != 409 {
		t.Fatalf("second setup = %d, want 409", code)
	}
	if got := setupState(); got != `{"apiKey":true,"required":false}` {
		t.Fatalf("setup state after setup = %s", got)
	}
	if code, _ := r.do("POST", "/v1/auth/login", `{"username":"root","password":"wrong password"}`, nil); code != 401 {
		t.Fatalf("wrong password = %d", code)
	}

	login := func() *http.Cookie {
		resp := r.raw("POST", "/v1/auth/login", `{"username":"root","password":"correct horse"}`, map[string]string{"X-Api-Key": ""})
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("login = %d", resp.StatusCode)
		}
		return sessionCookieOf(t, resp)
	}
	c1 := login()
	if !c1.HttpOnly || c1.SameSite != http.SameSiteStrictMode || c1.MaxAge != 86400 || len(c1.Value) < 22 {
		t.Fatalf("cookie = %+v (want HttpOnly, SameSite=Strict, Max-Age 86400, >= 128 random bits)", c1)
	}
	c2 := login()
	if c1.Value == c2.Value {
		t.Fatal("two logins gave the same session id")
	}

	// The session works without the API key, for the admin UI.
	r.key = ""
	r.cookies = []*http.Cookie{c2}
	if code, body := r.do("GET", "/v1/auth/me", "", nil); code != 200 || !strings.Contains(body, `"username":"root"`) || !strings.Contains(body, `"is_superuser":true`) {
		t.Fatalf("me = %d %s", code, body)
	}
	if code, _ := r.do("GET", "/v1/endpoints", "", nil); code != 200 {
		t.Fatalf("endpoints with a session = %d", code)
	}

	// Users: create, duplicate, short password, patch, delete, last superuser.
	if code, body := r.do("POST", "/v1/admin/users", `{"username":"op","password":"12345"}`, nil); code != 400 || !strings.Contains(errorOf(t, body), "password") {
		t.Fatalf("short password = %d %s", code, body)
	}
	code, body := r.do("POST", "/v1/admin/users", `{"username":"op","password":"123456"}`, nil)
	if code != 201 || strings.Contains(body, "hash") || strings.Contains(body, "123456") {
		t.Fatalf("create user = %d %s", code, body)
	}
	if code, _ := r.do("POST", "/v1/admin/users", `{"username":"op","password":"1234567"}`, nil); code != 409 {
		t.Fatalf("duplicate user = %d, want 409", code)
	}
	code, body = r.do("GET", "/v1/admin/users", "", nil)
	if code != 200 || !strings.Contains(body, `{"is_active":true,"is_superuser":false,"username":"op"}`) || strings.Contains(body, "password") {
		t.Fatalf("list users = %d %s", code, body)
	}
	if code, body := r.do("PATCH", "/v1/admin/users/op", `{"is_superuser":true}`, nil); code != 200 || !strings.Contains(body, `"is_superuser":true`) {
		t.Fatalf("patch = %d %s", code, body)
	}
	if code, _ := r.do("PATCH", "/v1/admin/users/nobody", `{"is_active":false}`, nil); code != 404 {
		t.Fatalf("patch unknown = %d", code)
	}
	if code, body := r.do("DELETE", "/v1/admin/users/op", "", nil); code != 200 || !strings.Contains(body, `"ok":true`) {
		t.Fatalf("delete = %d %s", code, body)
	}
	if code, _ := r.do("DELETE", "/v1/admin/users/root", "", nil); code != 409 {
		t.Fatalf("deleting the last superuser = %d, want 409", code)
	}

	// Logout invalidates the session, even if the cookie is replayed.
	if code, _ := r.do("POST", "/v1/auth/logout", "", nil); code != 200 {
		t.Fatalf("logout = %d", code)
	}
	if code, _ := r.do("GET", "/v1/auth/me", "", nil); code != 401 {
		t.Fatalf("me after logout = %d, want 401", code)
	}
	if code, _ := r.do("GET", "/v1/admin/users", "", nil); code != 401 {
		t.Fatalf("admin users after logout = %d, want 401", code)
	}
	// The other session is still valid until it ends.
	r.cookies = []*http.Cookie{c1}
	if code, _ := r.do("GET", "/v1/auth/me", "", nil); code != 200 {
		t.Fatalf("the first session = %d", code)
	}
}

func TestAdminFromEnvironment(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) {
		a.AdminUsername = "boot"
		a.AdminPassword = "from-env-123"
	})
	resp := r.raw("POST", "/v1/auth/login", `{"username":"boot","password":"from-env-123"}`, nil)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("login as the configured admin = %d", resp.StatusCode)
	}
	if code, _ := r.do("POST", "/v1/auth/setup", `{"username":"x","password":"1234567"}`, nil); code != 409 {
		t.Fatalf("setup after an env admin = %d, want 409", code)
	}
}

func TestSettingsLogsDiagnostics(t *testing.T) {
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	code, body := r.do("GET", "/v1/settings", "", nil)
	if code != 200 || !strings.Contains(body, `"agent":{`) || !strings.Contains(body, `"level":"info"`) {
		t.Fatalf("settings = %d %s", code, body)
	}
	code, body = r.do("PATCH", "/v1/settings", `{"logging":{"level":"debug"},"runtime":{"maxMemoryMb":256},"agent":{"uuid":"forged"},"bogus":1}`, nil)
	if code != 200 || !strings.Contains(body, `"level":"debug"`) || strings.Contains(body, "forged") || strings.Contains(body, "bogus") {
		t.Fatalf("patch settings = %d %s", code, body)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"logging":{"level":"loud"}}`, "logging.level"},
		{`{"intervals":{"statePollMs":5}}`, "intervals.statePollMs"},
		{`{"logging":{"colour":true}}`, "colour"},
		{`[1,2]`, "body"},
	} {
		if code, body := r.do("PATCH", "/v1/settings", bad.body, nil); code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Fatalf("PATCH %s = %d %s", bad.body, code, body)
		}
	}
	if code, body := r.do("GET", "/v1/memory", "", nil); code != 200 || !strings.Contains(body, `"thresholdMb":256`) || !strings.Contains(body, `"heapUsed"`) {
		t.Fatalf("memory = %d %s", code, body)
	}
	// Settings survive a restart.
	r.stop()
	r = startAgent(t, dir, true, nil)
	if _, body := r.do("GET", "/v1/settings", "", nil); !strings.Contains(body, `"level":"debug"`) || !strings.Contains(body, `"maxMemoryMb":256`) {
		t.Fatalf("settings after restart: %s", body)
	}

	code, body = r.do("GET", "/v1/logs?level=info&limit=1000", "", nil)
	if code != 200 || !strings.Contains(body, "agent running") || !strings.Contains(body, `"total":`) {
		t.Fatalf("logs = %d %s", code, body)
	}
	if code, body := r.do("GET", "/v1/logs?limit=5000", "", nil); code != 400 || !strings.Contains(errorOf(t, body), "limit") {
		t.Fatalf("logs limit 5000 = %d %s", code, body)
	}
	if code, body := r.do("GET", "/v1/logs?level=loud", "", nil); code != 400 || !strings.Contains(errorOf(t, body), "level") {
		t.Fatalf("logs level loud = %d %s", code, body)
	}
	code, body = r.do("GET", "/v1/dashboard/stats", "", nil)
	for _, f := range []string{"cpu_usage", "memory_percent", "memory_total", "storage_total", "uptime", "hostname", "rx_bytes_per_sec"} {
		if code != 200 || !strings.Contains(body, `"`+f+`"`) {
			t.Fatalf("dashboard stats lack %s: %d %s", f, code, body)
		}
	}
	code, body = r.do("GET", "/v1/db/stats", "", nil)
	if code != 200 || !strings.Contains(body, `"exists":true`) || !strings.Contains(body, `"tableCount"`) {
		t.Fatalf("db stats = %d %s", code, body)
	}
	code, body = r.do("GET", "/v1/device", "", nil)
	if code != 200 || !strings.Contains(body, `"provisioned":false`) || !strings.Contains(body, `"uuid":"`) {
		t.Fatalf("device = %d %s", code, body)
	}
	// The UUID is made once and kept.
	uuid := decode(t, body)["uuid"]
	r.stop()
	r = startAgent(t, dir, true, nil)
	if _, body := r.do("GET", "/v1/device", "", nil); decode(t, body)["uuid"] != uuid {
		t.Fatalf("uuid changed across restarts: %s", body)
	}
}
