package registry

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// TestDevicesRoutesIntegration edits an agent's devices through the
// devices routes: each edit is a new target-state version whose document
// the target-state route shows, the shape and the names are checked on
// the cloud, and another tenant's agent is not found.
func TestDevicesRoutesIntegration(t *testing.T) {
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t, engine, limit(10))
			a := mustCreate(t, h.store, tenantA, NewAgent{Name: "press"})
			path := "/agents/" + a.UUID + "/devices"

			r := h.call("GET", path, "member-a", nil).Expect(t, "list without a target state", http.StatusOK)
			if r.Body["managed"] != false || len(r.List("devices")) != 0 || r.Body["version"] != float64(0) {
				t.Errorf("devices before any: %s", r.Raw)
			}
			plc := map[string]any{"name": "plc1", "protocol": "modbus", "poll_interval": 1000,
				"connection": map[string]any{"host": "10.0.0.5", "port": 502}, "data_points": []any{map[string]any{"name": "t", "register": "holding:0"}}}
			r = h.call("POST", path, "admin-a", plc).Expect(t, "add", http.StatusCreated)
			if r.Body["version"] != float64(1) || r.Str("device") != "plc1" {
				t.Errorf("add: %s", r.Raw)
			}
			h.call("POST", path, "admin-a", plc).Expect(t, "add a taken name", http.StatusConflict)
			h.call("POST", path, "member-a", map[string]any{"name": "x", "protocol": "modbus"}).Expect(t, "member adds", http.StatusForbidden)
			for _, bad := range []struct {
				body any
				want string
			}{
				{map[string]any{"protocol": "modbus"}, "name: is required"},
				{map[string]any{"name": "a/b", "protocol": "modbus"}, "name: must not contain '/'"},
				{map[string]any{"name": "x", "protocol": "modbus", "poll_interval": "fast"}, "poll_interval: must be an integer"},
				{map[string]any{"name": "x", "protocol": "modbus", "colour": "red"}, "colour: unknown field"},
				{map[string]any{"name": "x", "protocol": "opcua", "connection": map[string]any{"password": "pw"}}, "connection.password: a secret must be a reference"},
			} {
				r := h.call("POST", path, "admin-a", bad.body)
				if r.Status != http.StatusUnprocessableEntity || !strings.Contains(r.Raw, bad.want) || strings.Contains(r.Raw, "endpoints[0]") {
					t.Errorf("POST %v: %d %s, want 422 naming %q", bad.body, r.Status, r.Raw, bad.want)
				}
			}
			r = h.call("POST", path, "admin-a", map[string]any{"name": "plc2", "protocol": "modbus"}).Expect(t, "add a second", http.StatusCreated)
			if r.Body["version"] != float64(2) {
				t.Errorf("second add: %s", r.Raw)
			}

			plc["poll_interval"] = 500
			r = h.call("PUT", path+"/plc1", "admin-a", plc).Expect(t, "replace", http.StatusOK)
			if r.Body["version"] != float64(3) {
				t.Errorf("replace: %s", r.Raw)
			}
			h.call("PUT", path+"/plc9", "admin-a", map[string]any{"name": "plc9", "protocol": "modbus"}).Expect(t, "replace a missing device", http.StatusNotFound)
			h.call("PUT", path+"/plc1", "admin-a", map[string]any{"name": "plc2", "protocol": "modbus"}).Expect(t, "replace under another name", http.StatusUnprocessableEntity)

			h.call("DELETE", path+"/plc2", "admin-a", nil).Expect(t, "delete", http.StatusOK)
			h.call("DELETE", path+"/plc2", "admin-a", nil).Expect(t, "delete again", http.StatusNotFound)

			r = h.call("GET", path, "member-a", nil).Expect(t, "list", http.StatusOK)
			devs := r.List("devices")
			if r.Body["managed"] != true || r.Body["version"] != float64(4) || len(devs) != 1 || devs[0].(map[string]any)["poll_interval"] != float64(500) {
				t.Errorf("devices: %s", r.Raw)
			}
			// The edits are the target state's, in its document.
			r = h.call("GET", "/agents/"+a.UUID+"/target-state", "member-a", nil).Expect(t, "target state", http.StatusOK)
			var doc struct {
				SchemaVersion int              `json:"schemaVersion"`
				Endpoints     []map[string]any `json:"endpoints"`
			}
			if err := json.Unmarshal(mustJSON(t, r.Body["state"]), &doc); err != nil || doc.SchemaVersion != 1 || len(doc.Endpoints) != 1 || r.Body["version"] != float64(4) {
				t.Errorf("target state after the edits: %s", r.Raw)
			}

			// Concurrent adds: none is lost, each is its own version or
			// told to retry.
			var wg sync.WaitGroup
			statuses := make([]int, 8)
			for i := range statuses {
				wg.Go(func() {
					statuses[i] = h.call("POST", path, "admin-a", map[string]any{"name": "c" + string(rune('a'+i)), "protocol": "modbus"}).Status
				})
			}
			wg.Wait()
			added := 0
			for _, s := range statuses {
				switch s {
				case http.StatusCreated:
					added++
				case http.StatusConflict:
				default:
					t.Errorf("concurrent add answered %d", s)
				}
			}
			r = h.call("GET", path, "member-a", nil).Expect(t, "list after concurrent adds", http.StatusOK)
			if len(r.List("devices")) != 1+added || r.Body["version"] != float64(4+added) {
				t.Errorf("%d adds answered 201, devices now %s", added, r.Raw)
			}

			// Another tenant's agent does not exist for tenant B.
			for _, c := range []struct {
				method, path string
				body         any
			}{
				{"GET", path, nil}, {"POST", path, map[string]any{"name": "z", "protocol": "modbus"}},
				{"PUT", path + "/plc1", plc}, {"DELETE", path + "/plc1", nil},
			} {
				h.call(c.method, c.path, "admin-b", c.body).Expect(t, c.method+" as another tenant", http.StatusNotFound)
			}
		})
	}
}
