package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// TestSecurityHeaders: serve-api's server, as New builds it, sends the
// security headers every role's server sends, on success and on errors.
func TestSecurityHeaders(t *testing.T) {
	h, _ := fullEngine(t, nil, config.Licence{})
	for _, path := range []string{"/", "/api/v1/agents", "/nope"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		for k, v := range httpx.SecurityHeaders {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s (%d): %s = %q, want %q", path, rec.Code, k, got, v)
			}
		}
	}
}

// TestReadingsOwnershipFromRegistryIntegration: serve-api wires POST
// /readings to the agent registry: tenant B cannot write to tenant A's
// agent nor to an agent nobody registered; A can.
func TestReadingsOwnershipFromRegistryIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokB := admin(t, e)
		tokA := call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "a@example.com", "password": "correct horse battery"}).str("accessToken")
		created := call(t, e, "POST", "/api/v1/agents", tokA, map[string]any{"name": "a-agent"})
		if created.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", created.status, created.raw)
		}
		agentA := created.str("uuid")
		reading := func(agent, metric string) map[string]any {
			return map[string]any{"agentUuid": agent, "metricName": metric, "value": 1, "time": "2024-03-11T00:00:00Z"}
		}
		for _, tc := range []struct {
			name, tok string
			body      any
			status    int
			code      string
		}{
			{"B writes first to A's agent", tokB, reading(agentA, "zzz.claim"), http.StatusNotFound, "not_found"},
			{"A writes to its agent", tokA, reading(agentA, "boiler.temp"), http.StatusCreated, ""},
			{"B again", tokB, reading(agentA, "zzz.claim"), http.StatusNotFound, "not_found"},
			{"an unregistered agent", tokA, reading(randomUUID(t), "boiler.temp"), http.StatusNotFound, "not_found"},
		} {
			r := call(t, e, "POST", "/api/v1/readings", tc.tok, tc.body)
			if r.status != tc.status || r.str("error", "code") != tc.code {
				t.Errorf("%s: %d %s, want %d %q", tc.name, r.status, r.raw, tc.status, tc.code)
			}
		}
		if r := call(t, e, "GET", "/api/v1/metrics", tokB, nil); r.status != http.StatusOK || strings.Contains(r.raw, "boiler.temp") {
			t.Errorf("B's metric names: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/readings/"+agentA+"/latest", tokA, nil); r.status != http.StatusOK || !strings.Contains(r.raw, "boiler.temp") {
			t.Errorf("A's view of its agent: %d %s", r.status, r.raw)
		}
	})
}

// TestNULInputsIntegration: a NUL character in any string input, in a body
// at any depth, in a query parameter or in a path parameter, is a 400
// naming the field; it was a 500 on PostgreSQL, which cannot store it.
func TestNULInputsIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tok := admin(t, e)
		created := call(t, e, "POST", "/api/v1/agents", tok, map[string]any{"name": "press"})
		if created.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", created.status, created.raw)
		}
		agent := created.str("uuid")
		me := call(t, e, "GET", "/api/v1/auth/me", tok, nil).str("id")
		for _, tc := range []struct {
			method, path string
			anonymous    bool
			body         string
			field        string // what the message must name
		}{
			{"POST", "/api/v1/auth/login", true, `{"email": "admin\u0000@example.com", "password": "correct horse battery"}`, "email"},
			{"POST", "/api/v1/auth/login", true, `{"email": "admin@example.com", "password": "x\u0000"}`, "password"},
			{"POST", "/api/v1/auth/register", true, `{"email": "n\u0000@example.com", "password": "correct horse battery"}`, "email"},
			{"POST", "/api/v1/auth/password/reset", true, `{"email": "admin@example.com\u0000"}`, "email"},
			{"POST", "/api/v1/users", false, `{"email": "u@example.com", "password": "correct horse battery", "name": "a\u0000b"}`, "name"},
			{"PUT", "/api/v1/users/" + me, false, `{"name": "\u0000"}`, "name"},
			{"POST", "/api/v1/invites", false, `{"email": "\u0000@example.com"}`, "email"},
			{"POST", "/api/v1/api-keys", false, `{"name": "key\u0000"}`, "name"},
			{"POST", "/api/v1/agents", false, `{"name": "a\u0000"}`, "name"},
			{"POST", "/api/v1/agents", false, `{"name": "ok", "tags": {"location": "hall\u0000 3"}}`, "tags.location"},
			{"POST", "/api/v1/agents", false, `{"name": "ok", "tags": {"lo\u0000c": "x"}}`, "a key of tags"},
			{"PATCH", "/api/v1/agents/" + agent, false, `{"name": "\u0000"}`, "name"},
			{"POST", "/api/v1/agents/" + agent + "/tags", false, `{"tags": {"site": "\u0000"}}`, "tags.site"},
			{"POST", "/api/v1/agents/query", false, `{"tags": {"site": "\u0000"}}`, "tags.site"},
			{"PUT", "/api/v1/agents/" + agent + "/target-state", false, `{"state": {"mode": "run\u0000"}}`, "state.mode"},
			{"PUT", "/api/v1/agents/" + agent + "/target-state", false, `{"state": {"endpoints": [{"name": "a"}, {"name": "\u0000"}]}}`, "state.endpoints[1].name"},
			{"POST", "/api/v1/provisioning/keys", false, `{"name": "\u0000"}`, "name"},
			{"PUT", "/api/v1/broker-auth/user/scada", false, `{"rules": [{"pattern": "a/\u0000", "subscribe": true}]}`, "rules[0].pattern"},
			{"POST", "/api/v1/readings", false, `{"agentUuid": "` + agent + `", "metricName": "a.\u0000", "value": 1}`, "metricName"},
			{"POST", "/api/v1/readings/query", false, `{"query": "readings where metric = '\u0000'"}`, "query"},
			{"GET", "/api/v1/readings/latest?metric=boiler%00", false, "", "query parameter metric"},
			{"GET", "/api/v1/readings/" + agent + "/timeseries?metric=a.b%00", false, "", "query parameter metric"},
			{"GET", "/api/v1/readings/hourly?start=%00", false, "", "query parameter start"},
			{"GET", "/api/v1/audit/events?kind=%00", false, "", "query parameter kind"},
			{"GET", "/api/v1/agents/" + agent + "%00", false, "", "path parameter uuid"},
			{"GET", "/api/v1/broker-auth/user/sca%00da", false, "", "path parameter username"},
		} {
			bearer := tok
			if tc.anonymous {
				bearer = ""
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := call(t, e, tc.method, tc.path, bearer, body)
			msg := r.str("error", "message")
			if r.status != http.StatusBadRequest || !strings.Contains(msg, tc.field) || !strings.Contains(msg, "NUL") {
				t.Errorf("%s %s %s: %d %s, want 400 naming %s", tc.method, tc.path, tc.body, r.status, r.raw, tc.field)
			}
		}
	})
}
