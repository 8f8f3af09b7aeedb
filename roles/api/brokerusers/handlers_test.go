package brokerusers

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	apibrokerauth "github.com/edgeplat/edgeplat/roles/api/brokerauth"
)

const callbackSecret = "callback-secret"

// writeError is the API's error shape, as roles/api writes it.
func writeError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

// harness is the admin routes on /api/v1 behind a stand-in for the API's
// authenticator (the bearer token names one of the test callers), and the
// broker callbacks of roles/api/brokerauth over the same store, wired as
// the API wires them.
type harness struct {
	t     *testing.T
	e     *gin.Engine
	store *Store

	mu          sync.Mutex
	invalidated []string
	events      []accounts.Event
}

var callers = map[string]accounts.Caller{
	"admin-a":  {UserID: adminA, TenantUUID: tenantA, Role: accounts.RoleAdmin},
	"member-a": {UserID: memberA, TenantUUID: tenantA, Role: accounts.RoleMember},
	"admin-b":  {UserID: adminB, TenantUUID: tenantB, Role: accounts.RoleAdmin},
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	s, _ := newTestStore(t, engine)
	a, err := brokerauth.New(brokerauth.Options{
		Store:        CombinedStore(&deviceStore{}, s),
		ServiceUsers: map[string]config.Secret{"edgeplat-api": "service-secret"},
		CacheTTL:     time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: s}
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: writeError})
	protected := e.Group("/api/v1", func(c *gin.Context) {
		if who, ok := callers[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]; ok {
			c.Set("caller", who)
		}
	})
	gated := 0
	Register(protected, Deps{
		Store: s,
		Caller: func(c *gin.Context) (accounts.Caller, bool) {
			v, ok := c.Get("caller")
			if !ok {
				return accounts.Caller{}, false
			}
			return v.(accounts.Caller), true
		},
		WriteError: writeError,
		Audit: func(_ *gin.Context, ev accounts.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, ev)
		},
		Invalidate: func(username string) {
			h.mu.Lock()
			h.invalidated = append(h.invalidated, username)
			h.mu.Unlock()
			a.Invalidate(username)
		},
		AdminGate: func(c *gin.Context) { gated++; c.Next() },
	})
	if err := apibrokerauth.Register(e, a, config.BrokerAuth{Secret: callbackSecret}, writeError); err != nil {
		t.Fatal(err)
	}
	h.e = e
	t.Cleanup(func() {
		if gated == 0 {
			t.Error("the admin gate never ran")
		}
	})
	return h
}

type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (h *harness) call(method, path, who string, body any) reply {
	h.t.Helper()
	var rd *bytes.Reader
	switch b := body.(type) {
	case nil:
		rd = bytes.NewReader(nil)
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			h.t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req := httptest.NewRequest(method, path, rd)
	req.Header.Set("Content-Type", "application/json")
	if who != "" {
		req.Header.Set("Authorization", "Bearer "+who)
	}
	if strings.HasPrefix(path, "/broker-auth/") {
		req.Header.Set(apibrokerauth.SecretHeader, callbackSecret)
	}
	rec := httptest.NewRecorder()
	h.e.ServeHTTP(rec, req)
	r := reply{status: rec.Code, raw: rec.Body.String()}
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &r.body); err != nil {
			h.t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, r.raw, err)
		}
	}
	return r
}

// errorCode returns the code of an error answer, checking its shape.
func (r reply) errorCode(t *testing.T) string {
	t.Helper()
	e, ok := r.body["error"].(map[string]any)
	if !ok || len(r.body) != 1 {
		t.Fatalf("error body %s is not {\"error\": {...}}", r.raw)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error body %s has no message", r.raw)
	}
	code, _ := e["code"].(string)
	return code
}

func (h *harness) invalidations() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.invalidated...)
}

func (h *harness) lastEvent() accounts.Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.events) == 0 {
		return accounts.Event{}
	}
	return h.events[len(h.events)-1]
}

// brokerConnect and brokerACL ask the broker callbacks as
// mosquitto-go-auth does; they report whether the answer was allow.
func (h *harness) brokerConnect(username, password, clientID string) bool {
	h.t.Helper()
	r := h.call("POST", "/broker-auth/user", "", map[string]any{"username": username, "password": password, "clientid": clientID})
	return r.status == http.StatusOK
}

func (h *harness) brokerACL(username, clientID, topic string, acc int) bool {
	h.t.Helper()
	r := h.call("POST", "/broker-auth/acl", "", map[string]any{"username": username, "clientid": clientID, "topic": topic, "acc": acc})
	return r.status == http.StatusOK
}

func TestHandlerErrorsIntegration(t *testing.T) {
	h := newHarness(t, "sqlite")
	if _, _, err := h.store.Create(t.Context(), tenantA, adminA, NewUser{Username: "scada", Rules: []Rule{}}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		method string
		path   string
		who    string
		body   any
		status int
		code   string
	}{
		{"no credential", "GET", "/api/v1/broker-auth/user", "", nil, http.StatusUnauthorized, "unauthorized"},
		{"member lists", "GET", "/api/v1/broker-auth/user", "member-a", nil, http.StatusForbidden, "forbidden"},
		{"member reads rules", "GET", "/api/v1/broker-auth/acl", "member-a", nil, http.StatusForbidden, "forbidden"},
		{"member creates", "PUT", "/api/v1/broker-auth/user/bridge", "member-a", map[string]any{"rules": []any{}}, http.StatusForbidden, "forbidden"},
		{"member deletes", "DELETE", "/api/v1/broker-auth/user/scada", "member-a", nil, http.StatusForbidden, "forbidden"},
		{"create without rules", "PUT", "/api/v1/broker-auth/user/bridge", "admin-a", map[string]any{}, http.StatusBadRequest, "invalid_body"},
		{"admin-chosen password", "PUT", "/api/v1/broker-auth/user/bridge", "admin-a", map[string]any{"rules": []any{}, "password": "mine"}, http.StatusBadRequest, "invalid_body"},
		{"unknown rule field", "PUT", "/api/v1/broker-auth/user/bridge", "admin-a", map[string]any{"rules": []any{map[string]any{"pattern": "a", "access": "readwrite"}}}, http.StatusBadRequest, "invalid_body"},
		{"not JSON", "PUT", "/api/v1/broker-auth/user/bridge", "admin-a", "rules=1", http.StatusBadRequest, "invalid_body"},
		{"bad pattern", "PUT", "/api/v1/broker-auth/user/bridge", "admin-a", map[string]any{"rules": []any{map[string]any{"pattern": "a/#/b", "publish": true}}}, http.StatusUnprocessableEntity, "validation_failed"},
		{"bad username", "PUT", "/api/v1/broker-auth/user/Bridge", "admin-a", map[string]any{"rules": []any{}}, http.StatusUnprocessableEntity, "validation_failed"},
		{"device key as username", "PUT", "/api/v1/broker-auth/user/dk2_abcdefgh", "admin-a", map[string]any{"rules": []any{}}, http.StatusUnprocessableEntity, "validation_failed"},
		{"service user's name", "PUT", "/api/v1/broker-auth/user/edgeplat-api", "admin-a", map[string]any{"rules": []any{}}, http.StatusUnprocessableEntity, "validation_failed"},
		{"unknown user", "GET", "/api/v1/broker-auth/user/nobody", "admin-a", nil, http.StatusNotFound, "not_found"},
		{"delete unknown user", "DELETE", "/api/v1/broker-auth/user/nobody", "admin-a", nil, http.StatusNotFound, "not_found"},
		{"rules of unknown user", "GET", "/api/v1/broker-auth/acl?username=nobody", "admin-a", nil, http.StatusNotFound, "not_found"},
		{"other tenant gets", "GET", "/api/v1/broker-auth/user/scada", "admin-b", nil, http.StatusNotFound, "not_found"},
		{"other tenant deletes", "DELETE", "/api/v1/broker-auth/user/scada", "admin-b", nil, http.StatusNotFound, "not_found"},
		{"other tenant reads rules", "GET", "/api/v1/broker-auth/acl?username=scada", "admin-b", nil, http.StatusNotFound, "not_found"},
		{"other tenant takes the name", "PUT", "/api/v1/broker-auth/user/scada", "admin-b", map[string]any{"rules": []any{}}, http.StatusConflict, "conflict"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := h.call(tt.method, tt.path, tt.who, tt.body)
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.raw)
			}
			if code := r.errorCode(t); code != tt.code {
				t.Errorf("code %q, want %q", code, tt.code)
			}
		})
	}
	if inv := h.invalidations(); len(inv) != 0 {
		t.Errorf("refused requests invalidated %q", inv)
	}
	if _, err := h.store.User(t.Context(), tenantA, "scada"); err != nil {
		t.Errorf("the refused requests changed the user: %v", err)
	}
}

// TestHandlersIntegration walks a broker user's life through the admin
// routes and checks at each step what the broker callbacks answer.
func TestHandlersIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine)
			prefix := topicPrefix(t, tenantA)
			endpoints := agentTopic(t, tenantA, "endpoints/modbus")
			const clientID = "scada-plant1:historian"

			// Create: 201 with the password, once.
			r := h.call("PUT", "/api/v1/broker-auth/user/scada-plant1", "admin-a", map[string]any{
				"description": "SCADA plant 1",
				"rules": []any{
					map[string]any{"pattern": "a/+/endpoints/#", "subscribe": true},
					map[string]any{"pattern": "scada/setpoints/+", "publish": true},
				},
			})
			if r.status != http.StatusCreated {
				t.Fatalf("create: %d %s", r.status, r.raw)
			}
			password, _ := r.body["password"].(string)
			if !passwordForm.MatchString(password) || r.body["username"] != "scada-plant1" || r.body["topicPrefix"] != prefix || r.body["tenantId"] != tenantA {
				t.Fatalf("create answer %s", r.raw)
			}
			if rules, _ := r.body["rules"].([]any); len(rules) != 2 || rules[0].(map[string]any)["topic"] != prefix+"a/+/endpoints/#" {
				t.Errorf("create answer rules: %s", r.raw)
			}
			if ev := h.lastEvent(); ev.Kind != AuditBrokerUserCreated || ev.Tenant != tenantA || ev.Actor != adminA || ev.Target != "scada-plant1" {
				t.Errorf("audit event = %+v", ev)
			}

			// The broker lets it in with its rules and nothing more.
			if !h.brokerConnect("scada-plant1", password, clientID) {
				t.Fatal("broker refused the new user")
			}
			if h.brokerConnect("scada-plant1", password, "historian") || h.brokerConnect("scada-plant1", "wrong", clientID) {
				t.Fatal("broker allowed a foreign client id or a wrong password")
			}
			allowed := []struct {
				topic string
				acc   int
			}{
				{prefix + "a/+/endpoints/#", 4},
				{endpoints, 1},
				{prefix + "scada/setpoints/pump1", 2},
			}
			for _, c := range allowed {
				if !h.brokerACL("scada-plant1", clientID, c.topic, c.acc) {
					t.Errorf("ACL refused %q acc %d", c.topic, c.acc)
				}
			}
			refused := []struct {
				topic string
				acc   int
			}{
				{prefix + "#", 4},
				{endpoints, 2},
				{agentTopic(t, tenantA, "cmd/x"), 2},
				{topicPrefix(t, tenantB) + "a/+/endpoints/#", 4},
				{"i/+/a/+/endpoints/#", 4},
				{"$SYS/#", 4},
				{"$share/g/" + prefix + "a/+/endpoints/#", 4},
			}
			for _, c := range refused {
				if h.brokerACL("scada-plant1", clientID, c.topic, c.acc) {
					t.Errorf("ACL allowed %q acc %d", c.topic, c.acc)
				}
			}
			if r := h.call("POST", "/broker-auth/superuser", "", map[string]any{"username": "scada-plant1"}); r.status == http.StatusOK {
				t.Error("a broker user is a superuser")
			}

			// Listings show it without a password.
			r = h.call("GET", "/api/v1/broker-auth/user", "admin-a", nil)
			if users, _ := r.body["users"].([]any); r.status != http.StatusOK || len(users) != 1 || strings.Contains(r.raw, password) || strings.Contains(r.raw, `"password"`) {
				t.Errorf("listing: %d %s", r.status, r.raw)
			}
			r = h.call("GET", "/api/v1/broker-auth/user", "admin-b", nil)
			if users, _ := r.body["users"].([]any); r.status != http.StatusOK || len(users) != 0 {
				t.Errorf("other tenant's listing: %d %s", r.status, r.raw)
			}
			r = h.call("GET", "/api/v1/broker-auth/acl", "admin-a", nil)
			if rules, _ := r.body["rules"].([]any); r.status != http.StatusOK || r.body["topicPrefix"] != prefix || len(rules) != 2 ||
				rules[1].(map[string]any)["username"] != "scada-plant1" || rules[1].(map[string]any)["pattern"] != "scada/setpoints/+" {
				t.Errorf("acl: %d %s", r.status, r.raw)
			}
			r = h.call("GET", "/api/v1/broker-auth/user/scada-plant1", "admin-a", nil)
			if r.status != http.StatusOK || r.body["description"] != "SCADA plant 1" {
				t.Errorf("get: %d %s", r.status, r.raw)
			}

			// The same rules again change nothing the broker knows.
			before := len(h.invalidations())
			r = h.call("PUT", "/api/v1/broker-auth/user/scada-plant1", "admin-a", map[string]any{
				"description": "SCADA, plant 1",
				"rules": []any{
					map[string]any{"pattern": "a/+/endpoints/#", "subscribe": true},
					map[string]any{"pattern": "scada/setpoints/+", "publish": true},
				},
			})
			if r.status != http.StatusOK || r.body["password"] != nil || r.body["description"] != "SCADA, plant 1" {
				t.Fatalf("unchanged update: %d %s", r.status, r.raw)
			}
			if len(h.invalidations()) != before {
				t.Error("an update that changed no rule invalidated the user")
			}
			if !h.brokerACL("scada-plant1", clientID, endpoints, 1) {
				t.Error("an update that changed no rule cut the session off")
			}

			// New rules: the open session is refused until it connects
			// again, and then has the new rules.
			r = h.call("PUT", "/api/v1/broker-auth/user/scada-plant1", "admin-a", map[string]any{
				"rules": []any{map[string]any{"pattern": "bridge/#", "publish": true, "subscribe": true}},
			})
			if r.status != http.StatusOK || r.body["password"] != nil {
				t.Fatalf("rule change: %d %s", r.status, r.raw)
			}
			if inv := h.invalidations(); inv[len(inv)-1] != "scada-plant1" {
				t.Errorf("rule change did not invalidate: %q", inv)
			}
			if ev := h.lastEvent(); ev.Kind != AuditBrokerUserUpdated || ev.Detail["rulesChanged"] != true {
				t.Errorf("audit event = %+v", ev)
			}
			if h.brokerACL("scada-plant1", clientID, endpoints, 1) {
				t.Error("old rules still apply after the change")
			}
			if !h.brokerConnect("scada-plant1", password, clientID) {
				t.Fatal("reconnect after the rule change refused")
			}
			if h.brokerACL("scada-plant1", clientID, endpoints, 1) || !h.brokerACL("scada-plant1", clientID, prefix+"bridge/x", 3) {
				t.Error("the new rules do not apply")
			}

			// A password reset returns the new password once; the old one
			// stops working at once.
			r = h.call("PUT", "/api/v1/broker-auth/user/scada-plant1", "admin-a", map[string]any{"resetPassword": true})
			newPassword, _ := r.body["password"].(string)
			if r.status != http.StatusOK || !passwordForm.MatchString(newPassword) || newPassword == password {
				t.Fatalf("reset: %d %s", r.status, r.raw)
			}
			if rules, _ := r.body["rules"].([]any); len(rules) != 1 {
				t.Errorf("reset changed the rules: %s", r.raw)
			}
			if h.brokerConnect("scada-plant1", password, clientID) {
				t.Error("old password works after the reset")
			}
			if !h.brokerConnect("scada-plant1", newPassword, clientID) {
				t.Fatal("new password refused")
			}

			// Deleted: 204, and the broker refuses it at once.
			r = h.call("DELETE", "/api/v1/broker-auth/user/scada-plant1", "admin-a", nil)
			if r.status != http.StatusNoContent {
				t.Fatalf("delete: %d %s", r.status, r.raw)
			}
			if ev := h.lastEvent(); ev.Kind != AuditBrokerUserDeleted || ev.Target != "scada-plant1" {
				t.Errorf("audit event = %+v", ev)
			}
			if h.brokerACL("scada-plant1", clientID, prefix+"bridge/x", 2) {
				t.Error("ACL allowed a deleted user's session")
			}
			if h.brokerConnect("scada-plant1", newPassword, clientID) {
				t.Error("broker let a deleted user in")
			}
			r = h.call("GET", "/api/v1/broker-auth/user/scada-plant1", "admin-a", nil)
			if r.status != http.StatusNotFound {
				t.Errorf("get after delete: %d %s", r.status, r.raw)
			}
		})
	}
}
