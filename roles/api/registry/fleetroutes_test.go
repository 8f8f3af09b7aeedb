package registry

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
)

func TestFleetHandlerErrorsIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", nil)
	a := mustCreate(t, h.store, tenantA, NewAgent{Name: "press"})
	foreignAgent := mustCreate(t, h.store, tenantB, NewAgent{Name: "foreign"})
	f := mustFleet(t, h.store, tenantA, "north", json.RawMessage(fleetTemplate))
	foreign := mustFleet(t, h.store, tenantB, "theirs", nil)
	if _, err := h.store.AddFleetAgents(t.Context(), tenantA, f.ID, adminA, []string{a.UUID}); err != nil {
		t.Fatal(err)
	}
	p := "/fleets/" + f.ID
	tests := []struct {
		name         string
		method, path string
		who          string
		body         any
		status       int
		code         string
	}{
		{"list without a credential", "GET", "/fleets", "", nil, 401, "unauthorized"},
		{"member creates", "POST", "/fleets", "member-a", map[string]any{"name": "x"}, 403, "forbidden"},
		{"member patches", "PATCH", p, "member-a", map[string]any{"name": "x"}, 403, "forbidden"},
		{"member replaces", "PUT", p, "member-a", map[string]any{"name": "x"}, 403, "forbidden"},
		{"member deletes", "DELETE", p, "member-a", nil, 403, "forbidden"},
		{"member stops", "POST", p + "/stop", "member-a", nil, 403, "forbidden"},
		{"member starts", "POST", p + "/start", "member-a", nil, 403, "forbidden"},
		{"member adds an agent", "POST", p + "/agents", "member-a", map[string]any{"agentUuid": a.UUID}, 403, "forbidden"},
		{"member removes an agent", "DELETE", p + "/agents/" + a.UUID, "member-a", nil, 403, "forbidden"},
		{"another tenant's fleet", "GET", "/fleets/" + foreign.ID, "admin-a", nil, 404, "not_found"},
		{"another tenant's fleet, patch", "PATCH", "/fleets/" + foreign.ID, "admin-a", map[string]any{"name": "x"}, 404, "not_found"},
		{"another tenant's fleet, delete", "DELETE", "/fleets/" + foreign.ID, "admin-a", nil, 404, "not_found"},
		{"another tenant's fleet, events", "GET", "/fleets/" + foreign.ID + "/usage-events", "admin-a", nil, 404, "not_found"},
		{"malformed fleet id", "GET", "/fleets/north", "admin-a", nil, 404, "not_found"},
		{"another tenant's agent", "POST", p + "/agents", "admin-a", map[string]any{"agentUuid": foreignAgent.UUID}, 404, "not_found"},
		{"no agent", "POST", p + "/agents", "admin-a", map[string]any{}, 422, "validation_failed"},
		{"unknown field", "POST", "/fleets", "admin-a", map[string]any{"name": "x", "runState": "stopped"}, 400, "invalid_body"},
		{"no name", "POST", "/fleets", "admin-a", map[string]any{"description": "x"}, 422, "validation_failed"},
		{"name that is a UUID", "POST", "/fleets", "admin-a", map[string]any{"name": unknownID}, 422, "validation_failed"},
		{"bad template", "POST", "/fleets", "admin-a", map[string]any{"name": "x", "template": map[string]any{"endpoints": []any{}}}, 422, "validation_failed"},
		{"duplicate name", "POST", "/fleets", "admin-a", map[string]any{"name": "north"}, 409, "conflict"},
		{"put without a name", "PUT", p, "admin-a", map[string]any{"description": "x"}, 422, "validation_failed"},
		{"delete with members", "DELETE", p, "admin-a", nil, 409, "conflict"},
		{"bad force", "DELETE", p + "?force=maybe", "admin-a", nil, 400, "invalid_param"},
		{"bad limit", "GET", p + "/usage-events?limit=0", "member-a", nil, 400, "invalid_param"},
		{"unknown agent fleet", "PATCH", "/agents/" + a.UUID, "admin-a", map[string]any{"fleet": "nowhere"}, 422, "validation_failed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.call(tt.method, tt.path, tt.who, tt.body).ExpectError(t, tt.status, tt.code)
		})
	}
}

// TestFleetHandlersIntegration walks a fleet through its routes.
func TestFleetHandlersIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine, nil)
			a := mustCreate(t, h.store, tenantA, NewAgent{Name: "press"})
			b := mustCreate(t, h.store, tenantA, NewAgent{Name: "lathe"})

			r := h.call("POST", "/fleets", "admin-a", map[string]any{"name": "north", "description": "hall 3", "template": json.RawMessage(fleetTemplate)}).
				Expect(t, "create", http.StatusCreated)
			id := r.Str("id")
			if r.Str("runState") != "running" || r.Body["templateVersion"] != float64(1) || r.Body["memberCount"] != float64(0) {
				t.Errorf("created: %s", r.Raw)
			}
			p := "/fleets/" + id
			r = h.call("POST", p+"/agents", "admin-a", map[string]any{"agentUuids": []string{a.UUID, b.UUID}}).Expect(t, "add agents", http.StatusOK)
			if r.Body["memberCount"] != float64(2) || len(r.List("members")) != 2 {
				t.Errorf("after adding: %s", r.Raw)
			}
			// A member's part that needs the template is accepted, and
			// its own document and the merged one are both shown.
			h.call("PUT", "/agents/"+a.UUID+"/target-state", "admin-a", map[string]any{"state": json.RawMessage(memberOwn)}).
				Expect(t, "member's part", http.StatusOK)
			r = h.call("GET", "/agents/"+a.UUID+"/target-state", "member-a", nil).Expect(t, "get target state", http.StatusOK)
			if r.Str("fleetId") != id || strings.Contains(string(mustJSON(t, r.Body["state"])), "plc") ||
				!strings.Contains(string(mustJSON(t, r.Body["effective"])), `"plc"`) {
				t.Errorf("target state of a member: %s", r.Raw)
			}
			h.call("PUT", "/agents/"+a.UUID+"/target-state", "admin-a", map[string]any{"state": map[string]any{"schemaVersion": 1,
				"subscriptions": []any{map[string]any{"destination": "nowhere"}}}}).ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
			h.call("PATCH", p, "admin-a", map[string]any{"template": map[string]any{"schemaVersion": 1}}).
				ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")

			r = h.call("PATCH", p, "admin-a", map[string]any{"description": "hall 4"}).Expect(t, "patch", http.StatusOK)
			if r.Str("name") != "north" || r.Str("description") != "hall 4" || r.Body["templateVersion"] != float64(1) {
				t.Errorf("patched: %s", r.Raw)
			}
			r = h.call("PUT", p, "admin-a", map[string]any{"name": "north", "template": json.RawMessage(strings.Replace(fleetTemplate, "info", "warn", 1))}).
				Expect(t, "put", http.StatusOK)
			if r.Str("description") != "" || r.Body["templateVersion"] != float64(2) || !strings.Contains(string(mustJSON(t, r.Body["template"])), "warn") {
				t.Errorf("replaced: %s", r.Raw)
			}
			r = h.call("POST", p+"/stop", "admin-a", nil).Expect(t, "stop", http.StatusOK)
			if r.Str("runState") != "stopped" {
				t.Errorf("stopped: %s", r.Raw)
			}
			r = h.call("GET", "/agents/"+b.UUID+"/target-state", "member-a", nil).Expect(t, "get target state", http.StatusOK)
			if !strings.Contains(string(mustJSON(t, r.Body["effective"])), `"runState":"stopped"`) {
				t.Errorf("a stopped fleet's member: %s", r.Raw)
			}
			h.call("POST", p+"/start", "admin-a", nil).Expect(t, "start", http.StatusOK)

			// PATCH /agents/:uuid moves between fleets by name.
			r = h.call("POST", "/fleets", "admin-a", map[string]any{"name": "south"}).Expect(t, "create south", http.StatusCreated)
			if _, listed := r.Body["members"]; !listed {
				t.Errorf("a new fleet's detail has no members list: %s", r.Raw)
			}
			r = h.call("PATCH", "/agents/"+b.UUID, "admin-a", map[string]any{"fleet": "south"}).Expect(t, "move", http.StatusOK)
			if r.Str("fleet") != "south" || r.Str("fleetId") == id {
				t.Errorf("moved agent: %s", r.Raw)
			}
			h.call("DELETE", p+"/agents/"+b.UUID, "admin-a", nil).ExpectError(t, http.StatusNotFound, "not_found")
			r = h.call("GET", "/fleets", "member-a", nil).Expect(t, "list", http.StatusOK)
			if len(r.List("fleets")) != 2 {
				t.Errorf("fleets: %s", r.Raw)
			}
			r = h.call("GET", p+"/usage-events?limit=3", "member-a", nil).Expect(t, "events", http.StatusOK)
			var kinds []string
			for _, ev := range r.List("events") {
				kinds = append(kinds, ev.(map[string]any)["kind"].(string))
			}
			if !slices.Equal(kinds, []string{FleetAgentRemoved, FleetStarted, FleetStopped}) {
				t.Errorf("newest events %v", kinds)
			}
			h.call("DELETE", p, "admin-a", nil).ExpectError(t, http.StatusConflict, "conflict")
			h.call("DELETE", p+"?force=true", "admin-a", nil).Expect(t, "force delete", http.StatusNoContent)
			h.call("GET", p, "member-a", nil).ExpectError(t, http.StatusNotFound, "not_found")

			want := []string{AuditFleetCreated, AuditFleetAgentAdded, AuditFleetAgentAdded, AuditTargetState, AuditFleetUpdated, AuditFleetUpdated,
				AuditFleetStopped, AuditFleetStarted, AuditFleetCreated, AuditAgentUpdated, AuditFleetAgentRemoved, AuditFleetAgentAdded, AuditFleetDeleted}
			if kinds := h.eventKinds(); !slices.Equal(kinds, want) {
				t.Errorf("audit events\n%v\nwant\n%v", kinds, want)
			}
		})
	}
}

// TestFleetProvisioningHandlersIntegration: a key names its fleet by
// name; the registered agent is in it.
func TestFleetProvisioningHandlersIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", nil)
	h.call("POST", "/provisioning/keys", "admin-a", map[string]any{"fleet": "north"}).ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
	id := h.call("POST", "/fleets", "admin-a", map[string]any{"name": "north"}).Expect(t, "create", http.StatusCreated).Str("id")
	r := h.call("POST", "/provisioning/keys", "admin-a", map[string]any{"fleet": "north"}).Expect(t, "key", http.StatusCreated)
	if r.Str("fleetId") != id || r.Str("fleet") != "north" {
		t.Errorf("key: %s", r.Raw)
	}
	r = h.call("POST", "/provision/agent", "", map[string]any{"key": r.Str("key"), "agentName": "press"}).Expect(t, "register", http.StatusCreated)
	agent := r.Str("agentUuid")
	r = h.call("GET", "/agents/"+agent, "member-a", nil).Expect(t, "agent", http.StatusOK)
	if r.Str("fleetId") != id || r.Str("fleet") != "north" {
		t.Errorf("registered agent: %s", r.Raw)
	}
}
