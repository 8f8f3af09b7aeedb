package registry

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

const (
	memberA = "22222222-2222-4222-8222-222222222222"
	adminB  = "33333333-3333-4333-8333-333333333333"
)

var callers = map[string]accounts.Caller{
	"admin-a":  {UserID: adminA, TenantUUID: tenantA, Role: accounts.RoleAdmin},
	"member-a": {UserID: memberA, TenantUUID: tenantA, Role: accounts.RoleMember},
	"admin-b":  {UserID: adminB, TenantUUID: tenantB, Role: accounts.RoleAdmin},
}

// harness is the registry routes on /api/v1 behind a stand-in for the
// API's authenticator: the bearer token names one of the test callers.
type harness struct {
	t     *testing.T
	e     *gin.Engine
	store *Store

	mu      sync.Mutex
	revoked []string
	events  []accounts.Event
	gated   int
}

func newHarness(t *testing.T, engine string, admit func(int) error) *harness {
	t.Helper()
	s, _ := newTestStore(t, engine)
	h := &harness{t: t, store: s}
	e := httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	public := e.Group("/api/v1")
	protected := e.Group("/api/v1", func(c *gin.Context) {
		if who, ok := callers[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]; ok {
			c.Set("caller", who)
		}
	})
	Register(public, protected, Deps{
		Store: s,
		Caller: func(c *gin.Context) (accounts.Caller, bool) {
			v, ok := c.Get("caller")
			if !ok {
				return accounts.Caller{}, false
			}
			return v.(accounts.Caller), true
		},
		WriteError: apitest.WriteError,
		Audit: func(_ *gin.Context, ev accounts.Event) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.events = append(h.events, ev)
		},
		Admit: admit,
		Revoked: func(kids []string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.revoked = append(h.revoked, kids...)
		},
		BrokerURL: "mqtts://broker.example.com:8883",
		AdminGate: func(c *gin.Context) {
			h.mu.Lock()
			h.gated++
			h.mu.Unlock()
			c.Next()
		},
		Log: slog.New(slog.DiscardHandler),
	})
	h.e = e
	return h
}

// call sends a request as who (a key of callers, or "") with body (JSON
// unless a string) to /api/v1 + path.
func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// takeRevoked returns the kids reported revoked since the last call.
func (h *harness) takeRevoked() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	r := h.revoked
	h.revoked = nil
	return r
}

func (h *harness) eventKinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var kinds []string
	for _, e := range h.events {
		kinds = append(kinds, e.Kind)
	}
	return kinds
}

func TestHandlerErrorsIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", limit(3))
	ctx := t.Context()
	a := mustCreate(t, h.store, tenantA, NewAgent{Name: "press"})
	if _, err := h.store.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(`{}`), adminA, true); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, h.store, tenantB, NewAgent{Name: "foreign"})
	agentPath := "/agents/" + a.UUID
	tests := []struct {
		name         string
		method, path string
		who          string
		body         any
		status       int
		code         string
	}{
		{"list without a credential", "GET", "/agents", "", nil, 401, "unauthorized"},
		{"get without a credential", "GET", agentPath, "", nil, 401, "unauthorized"},
		{"member creates", "POST", "/agents", "member-a", map[string]any{"name": "x"}, 403, "forbidden"},
		{"member updates", "PATCH", agentPath, "member-a", map[string]any{"name": "x"}, 403, "forbidden"},
		{"member deletes", "DELETE", agentPath, "member-a", nil, 403, "forbidden"},
		{"member disables", "PATCH", agentPath + "/active", "member-a", map[string]any{"active": false}, 403, "forbidden"},
		{"member sets the target state", "PUT", agentPath + "/target-state", "member-a", map[string]any{"state": map[string]any{}}, 403, "forbidden"},
		{"member lists device keys", "GET", agentPath + "/keys", "member-a", nil, 403, "forbidden"},
		{"member sets tags", "POST", agentPath + "/tags", "member-a", map[string]any{"tags": map[string]any{}}, 403, "forbidden"},
		{"member makes a provisioning key", "POST", "/provisioning/keys", "member-a", nil, 403, "forbidden"},
		{"member issues a device key", "POST", "/auth/api-keys", "member-a", map[string]any{"agentUuid": a.UUID}, 403, "forbidden"},
		{"create, not JSON", "POST", "/agents", "admin-a", "name=x", 400, "invalid_body"},
		{"create, unknown field", "POST", "/agents", "admin-a", map[string]any{"name": "x", "tenantId": tenantB}, 400, "invalid_body"},
		{"create, blank name", "POST", "/agents", "admin-a", map[string]any{"name": ""}, 422, "validation_failed"},
		{"create, bad location", "POST", "/agents", "admin-a", map[string]any{"name": "x", "location": map[string]any{"latitude": 95, "longitude": 0}}, 422, "validation_failed"},
		{"create, taken uuid", "POST", "/agents", "admin-a", map[string]any{"name": "x", "uuid": a.UUID}, 409, "conflict"},
		{"get, another tenant's agent", "GET", agentPath, "admin-b", nil, 404, "not_found"},
		{"get, malformed uuid", "GET", "/agents/press", "admin-a", nil, 404, "not_found"},
		{"update, another tenant's agent", "PATCH", agentPath, "admin-b", map[string]any{"name": "x"}, 404, "not_found"},
		{"update, long version", "PATCH", agentPath, "admin-a", map[string]any{"version": strings.Repeat("v", 101)}, 422, "validation_failed"},
		{"delete, another tenant's agent", "DELETE", agentPath, "admin-b", nil, 404, "not_found"},
		{"active missing", "PATCH", agentPath + "/active", "admin-a", map[string]any{}, 400, "invalid_body"},
		{"active not a boolean", "PATCH", agentPath + "/active", "admin-a", map[string]any{"active": "no"}, 400, "invalid_body"},
		{"target state missing", "PUT", agentPath + "/target-state", "admin-a", map[string]any{}, 400, "invalid_body"},
		{"target state not an object", "PUT", agentPath + "/target-state", "admin-a", map[string]any{"state": []any{1}}, 422, "validation_failed"},
		{"target state created twice", "POST", agentPath + "/target-state", "admin-a", map[string]any{"state": map[string]any{}}, 409, "conflict"},
		{"target state of another tenant's agent", "GET", agentPath + "/target-state", "admin-b", nil, 404, "not_found"},
		{"tags, blank key", "POST", agentPath + "/tags", "admin-a", map[string]any{"tags": map[string]any{" ": "x"}}, 422, "validation_failed"},
		{"tags of another tenant's agent", "GET", agentPath + "/tags", "admin-b", nil, 404, "not_found"},
		{"query, unknown field", "POST", "/agents/query", "member-a", map[string]any{"tag": map[string]any{}}, 400, "invalid_body"},
		{"revoke an unknown device key", "DELETE", agentPath + "/keys/ZZZZZZZZ", "admin-a", nil, 404, "not_found"},
		{"device keys of another tenant's agent", "GET", agentPath + "/keys", "admin-b", nil, 404, "not_found"},
		{"provisioning key, bad body", "POST", "/provisioning/keys", "admin-a", "{", 400, "invalid_body"},
		{"provisioning key, zero lifetime", "POST", "/provision/keys", "admin-a", map[string]any{"expiresIn": 0}, 422, "validation_failed"},
		{"provisioning key, past expiry", "POST", "/provisioning/keys/generate", "admin-a", map[string]any{"expiresAt": "2020-01-01T00:00:00Z"}, 422, "validation_failed"},
		{"provisioning key for another tenant's agent", "POST", "/provisioning/keys", "admin-b", map[string]any{"agentUuid": a.UUID}, 404, "not_found"},
		{"delete an unknown provisioning key", "DELETE", "/provisioning/keys/" + unknownID, "admin-a", nil, 404, "not_found"},
		{"device key without an agent", "POST", "/auth/api-keys", "admin-a", map[string]any{"name": "x"}, 400, "invalid_body"},
		{"device key for another tenant's agent", "POST", "/auth/api-keys", "admin-b", map[string]any{"agentUuid": a.UUID}, 404, "not_found"},
		{"register without a key", "POST", "/provisioning/register", "", map[string]any{"agentName": "x"}, 400, "invalid_body"},
		{"register, unknown key", "POST", "/provision/agent", "", map[string]any{"key": "pk_AAAAAAAA_" + strings.Repeat("a", secretLen), "agentName": "x"}, 401, "provisioning_key_refused"},
		{"register, unknown field", "POST", "/provision/agent", "", map[string]any{"key": "pk_x", "tenantId": tenantA}, 400, "invalid_body"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.call(tt.method, tt.path, tt.who, tt.body).ExpectError(t, tt.status, tt.code)
		})
	}
	// Over the licence: the licence's own status and code.
	mustCreate(t, h.store, tenantA, NewAgent{Name: "lathe"})
	r := h.call("POST", "/agents", "admin-a", map[string]any{"name": "one too many"})
	if r.Status != http.StatusForbidden || r.ErrorCode(t) != "agent_limit" {
		t.Errorf("creating over the licence: %d %s", r.Status, r.Raw)
	}
	if got, err := h.store.Agent(ctx, tenantA, a.UUID); err != nil || got.Name != "press" || !got.Active {
		t.Errorf("the refused requests changed the agent: %+v, %v", got, err)
	}
	if kids := h.takeRevoked(); len(kids) != 0 {
		t.Errorf("refused requests revoked %v", kids)
	}
	if kinds := h.eventKinds(); !slices.Equal(kinds, []string{AuditRegistrationFailed}) {
		t.Errorf("audit events %v, want the failed registration only", kinds)
	}
}

// TestProvisioningHandlersIntegration follows an agent from its
// provisioning key through registration, its device keys and target state
// to its deletion.
func TestProvisioningHandlersIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine, limit(10))
			r := h.call("POST", "/provisioning/keys", "admin-a", nil).Expect(t, "provisioning key with no body", http.StatusCreated)
			if r.Body["singleUse"] != true || !strings.HasPrefix(r.Str("key"), provisioningScheme+r.Str("prefix")+"_") {
				t.Errorf("provisioning key answer: %s", r.Raw)
			}
			h.call("POST", "/provision/keys", "admin-a", map[string]any{"fleet": "north"}).Expect(t, "key naming no fleet", http.StatusUnprocessableEntity)
			h.call("POST", "/fleets", "admin-a", map[string]any{"name": "north"}).Expect(t, "create fleet", http.StatusCreated)
			r = h.call("POST", "/provision/keys", "admin-a", map[string]any{"name": "line 3", "fleet": "north", "expiresIn": 3600}).
				Expect(t, "provisioning key", http.StatusCreated)
			key, keyID := r.Str("key"), r.Str("id")
			r = h.call("GET", "/provisioning/keys", "admin-a", nil).Expect(t, "list provisioning keys", http.StatusOK)
			if len(r.List("keys")) != 2 || strings.Contains(r.Raw, key) {
				t.Errorf("provisioning keys: %s", r.Raw)
			}

			r = h.call("POST", "/provision/agent", "", map[string]any{"key": key, "agentName": "press", "version": "1.0"}).
				Expect(t, "register", http.StatusCreated)
			agent, apiKey := r.Str("agentUuid"), r.Str("apiKey")
			tu, _ := codec.ParseUUID(tenantA)
			au, _ := codec.ParseUUID(agent)
			if r.Str("tenantId") != tenantA || r.Str("mqtt", "brokerUrl") != "mqtts://broker.example.com:8883" || r.Str("mqtt", "username") != apiKey ||
				len(r.Str("mqtt", "password")) != mqttPasswordLen || r.Str("mqtt", "clientId") != brokerauth.AgentClientID(agent) ||
				r.Str("mqtt", "topicPrefix") != "i/"+codec.EncodeID(tu)+"/a/"+codec.EncodeID(au) {
				t.Errorf("registration answer: %s", r.Raw)
			}
			if _, err := h.store.AuthenticateDevice(t.Context(), apiKey, r.Str("mqtt", "password")); err != nil {
				t.Errorf("the issued credentials do not open the broker: %v", err)
			}
			h.call("POST", "/provisioning/register", "", map[string]any{"key": key, "agentName": "press"}).
				Expect(t, "register with a used key", http.StatusUnauthorized)
			h.call("DELETE", "/provisioning/keys/"+keyID, "admin-a", nil).Expect(t, "delete a used key", http.StatusNotFound)

			path := "/agents/" + agent
			r = h.call("GET", path, "member-a", nil).Expect(t, "member gets", http.StatusOK)
			if r.Str("name") != "press" || r.Str("fleet") != "north" || r.Body["active"] != true {
				t.Errorf("agent: %s", r.Raw)
			}
			r = h.call("GET", "/agents", "admin-b", nil).Expect(t, "other tenant lists", http.StatusOK)
			if len(r.List("agents")) != 0 {
				t.Errorf("the other tenant sees %s", r.Raw)
			}
			r = h.call("PATCH", path, "admin-a", map[string]any{"name": "press 7", "location": map[string]any{"latitude": 48.1, "longitude": 11.6}}).
				Expect(t, "update", http.StatusOK)
			if r.Str("name") != "press 7" {
				t.Errorf("updated: %s", r.Raw)
			}
			r = h.call("GET", "/agents/locations", "member-a", nil).Expect(t, "locations", http.StatusOK)
			if l := r.List("locations"); len(l) != 1 || l[0].(map[string]any)["uuid"] != agent {
				t.Errorf("locations: %s", r.Raw)
			}
			r = h.call("POST", path+"/tags", "admin-a", map[string]any{"tags": map[string]any{"line": "3"}}).Expect(t, "set tags", http.StatusOK)
			r = h.call("POST", "/agents/query", "member-a", map[string]any{"tags": map[string]any{"line": "*"}}).Expect(t, "query", http.StatusOK)
			if len(r.List("agents")) != 1 {
				t.Errorf("query: %s", r.Raw)
			}
			for q, n := range map[string]int{
				`{"line": ["2", "3"]}`: 1, `{"line": {"in": ["2"]}}`: 0, `{"line": {"exists": true}}`: 1,
				`{"line": {"exists": false}}`: 0, `{"zone": {"exists": false}, "line": {"eq": "3"}}`: 1,
			} {
				r = h.call("POST", "/agents/query", "member-a", `{"tags": `+q+`}`).Expect(t, "query "+q, http.StatusOK)
				if len(r.List("agents")) != n {
					t.Errorf("query %s: %s, want %d agents", q, r.Raw, n)
				}
			}
			h.call("POST", "/agents/query", "member-a", map[string]any{"tags": map[string]any{"line": map[string]any{"like": "3"}}}).
				ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
			r = h.call("GET", path+"/tags", "member-a", nil).Expect(t, "get tags", http.StatusOK)
			if r.Str("tags", "line") != "3" {
				t.Errorf("tags: %s", r.Raw)
			}

			// Target state: joining the key's fleet wrote version 1, so a
			// create is refused; replace, clear; members read it.
			h.call("POST", path+"/target-state", "admin-a", map[string]any{"state": map[string]any{"schemaVersion": 1, "endpoints": []any{}}}).
				ExpectError(t, http.StatusConflict, "conflict")
			r = h.call("PUT", path+"/target-state", "admin-a", map[string]any{"state": map[string]any{"schemaVersion": 1, "endpoints": []any{}}}).
				Expect(t, "replace target state", http.StatusOK)
			if r.Body["version"] != float64(2) {
				t.Errorf("replaced target state: %s", r.Raw)
			}
			h.call("PUT", path+"/target-state", "admin-a", map[string]any{"state": map[string]any{"schemaVersion": 1, "endpoints": []any{map[string]any{"name": "plc", "protocol": "modbus"}}}}).
				Expect(t, "replace target state", http.StatusOK)
			r = h.call("DELETE", path+"/target-state", "admin-a", nil).Expect(t, "clear target state", http.StatusOK)
			if r.Body["version"] != float64(4) {
				t.Errorf("cleared target state: %s", r.Raw)
			}
			r = h.call("GET", path+"/target-state", "member-a", nil).Expect(t, "get target state", http.StatusOK)
			if r.Body["version"] != float64(4) || string(mustJSON(t, r.Body["state"])) != "{}" {
				t.Errorf("target state: %s", r.Raw)
			}

			// Device keys: another one, revocation, and the broker told.
			r = h.call("POST", "/auth/api-keys", "admin-a", map[string]any{"agentUuid": agent, "name": "spare"}).Expect(t, "issue device key", http.StatusCreated)
			spare := r.Str("kid")
			r = h.call("GET", path+"/keys", "admin-a", nil).Expect(t, "list device keys", http.StatusOK)
			if len(r.List("keys")) != 2 || strings.Contains(r.Raw, apiKey) {
				t.Errorf("device keys: %s", r.Raw)
			}
			h.call("DELETE", path+"/keys/"+spare, "admin-a", nil).Expect(t, "revoke device key", http.StatusNoContent)
			if kids := h.takeRevoked(); !slices.Equal(kids, []string{spare}) {
				t.Errorf("revocation reported %v, want %s", kids, spare)
			}

			// Disabling reports every key of the agent.
			r = h.call("PATCH", path+"/active", "admin-a", map[string]any{"active": false}).Expect(t, "disable", http.StatusOK)
			if r.Body["active"] != false || len(h.takeRevoked()) != 2 {
				t.Errorf("disable: %s", r.Raw)
			}
			h.call("PATCH", path+"/active", "admin-a", map[string]any{"active": true}).Expect(t, "enable", http.StatusOK)
			if kids := h.takeRevoked(); len(kids) != 0 {
				t.Errorf("enabling revoked %v", kids)
			}

			// Re-provisioning with a key made for the agent.
			r = h.call("POST", "/provisioning/keys", "admin-a", map[string]any{"agentUuid": agent}).Expect(t, "re-provisioning key", http.StatusCreated)
			r = h.call("POST", "/provision/agent", "", map[string]any{"key": r.Str("key"), "agentName": "press 7", "agentUuid": agent}).
				Expect(t, "re-provision", http.StatusCreated)
			if r.Str("agentUuid") != agent || r.Str("apiKey") == apiKey || len(h.takeRevoked()) != 2 {
				t.Errorf("re-provision: %s", r.Raw)
			}

			h.call("DELETE", path, "admin-a", nil).Expect(t, "delete", http.StatusNoContent)
			if kids := h.takeRevoked(); len(kids) != 1 {
				t.Errorf("delete reported %v, want the one live key", kids)
			}
			h.call("GET", path, "admin-a", nil).Expect(t, "get after delete", http.StatusNotFound)

			want := []string{AuditProvisioningKey, AuditFleetCreated, AuditProvisioningKey, AuditAgentRegistered, AuditRegistrationFailed, AuditAgentUpdated,
				AuditAgentUpdated, AuditTargetState, AuditTargetState, AuditTargetState, AuditDeviceKeyCreated, AuditDeviceKeyRevoked,
				AuditAgentUpdated, AuditAgentUpdated, AuditProvisioningKey, AuditAgentRegistered, AuditAgentDeleted}
			if kinds := h.eventKinds(); !slices.Equal(kinds, want) {
				t.Errorf("audit events\n%v\nwant\n%v", kinds, want)
			}
			if h.gated == 0 {
				t.Error("the admin gate never ran")
			}
		})
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
