package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/db"
)

// TestTargetStateSecretsIntegration: secrets are write-only and reach the
// agent alone. A document refers to them by name; users read references
// only; the agent's GET /device/:uuid/state carries the values (its own
// secret before the tenant's), and a changed value moves its ETag.
func TestTargetStateSecretsIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _, _ := fullRole(t, d, testLicence(t, 0))
		tok := admin(t, e)
		reg := func(name string) (key, agent string) {
			r := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": name})
			if r.status != http.StatusCreated {
				t.Fatalf("register: %d %s", r.status, r.raw)
			}
			return r.str("apiKey"), r.str("agentUuid")
		}
		keyA, agentA := reg("a")
		keyB, agentB := reg("b")

		doc := map[string]any{"schemaVersion": 1, "destinations": []any{map[string]any{"name": "broker", "type": "mqtt",
			"config_json": map[string]any{"url": "tcp://h:1883", "username": "u", "password": map[string]any{"secretRef": "broker-pw"}}}}}
		for _, agent := range []string{agentA, agentB} {
			if r := call(t, e, "PUT", "/api/v1/agents/"+agent+"/target-state", tok, map[string]any{"state": doc}); r.status != http.StatusOK {
				t.Fatalf("target state: %d %s", r.status, r.raw)
			}
		}
		// A value in the document is refused: secrets are references.
		literal := map[string]any{"schemaVersion": 1, "destinations": []any{map[string]any{"name": "broker", "type": "mqtt",
			"config_json": map[string]any{"url": "tcp://h:1883", "password": "hunter2"}}}}
		if r := call(t, e, "PUT", "/api/v1/agents/"+agentA+"/target-state", tok, map[string]any{"state": literal}); r.status != http.StatusUnprocessableEntity ||
			!strings.Contains(r.raw, "state.destinations[0].config_json.password: a secret must be a reference") {
			t.Fatalf("a literal secret: %d %s", r.status, r.raw)
		}

		state := func(key, agent, etag string) (int, string, string) {
			var hdr []string
			if etag != "" {
				hdr = []string{"If-None-Match", etag}
			}
			w := deviceCall(t, e, "GET", "/api/v1/device/"+agent+"/state", key, nil, hdr...)
			return w.Code, w.Header().Get("ETag"), w.Body.String()
		}
		// No value yet: the reference goes as it is (the agent refuses
		// the document naming it), under the plain version ETag's form.
		code, etag0, body := state(keyA, agentA, "")
		if code != http.StatusOK || !strings.Contains(body, `"secretRef":"broker-pw"`) {
			t.Fatalf("state without the secret: %d %s", code, body)
		}

		if r := call(t, e, "PUT", "/api/v1/secrets/broker-pw", tok, map[string]any{"value": "tenant-pw"}); r.status != http.StatusCreated || strings.Contains(r.raw, "tenant-pw") {
			t.Fatalf("tenant secret: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "PUT", "/api/v1/agents/"+agentA+"/secrets/broker-pw", tok, map[string]any{"value": "a-pw"}); r.status != http.StatusCreated || strings.Contains(r.raw, "a-pw") {
			t.Fatalf("agent secret: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "PUT", "/api/v1/secrets/bad%20name", tok, map[string]any{"value": "x"}); r.status != http.StatusUnprocessableEntity {
			t.Fatalf("bad secret name: %d %s", r.status, r.raw)
		}
		// The agent's own secret wins; the other agent gets the tenant's.
		code, etagA, body := state(keyA, agentA, etag0)
		if code != http.StatusOK || etagA == etag0 || !strings.Contains(body, `"password":"a-pw"`) || strings.Contains(body, "secretRef") {
			t.Fatalf("agent A's state: %d %s %s", code, etagA, body)
		}
		if _, _, body := state(keyB, agentB, ""); !strings.Contains(body, `"password":"tenant-pw"`) {
			t.Fatalf("agent B's state: %s", body)
		}
		if code, _, _ := state(keyA, agentA, etagA); code != http.StatusNotModified {
			t.Fatalf("unchanged resolved state: %d, want 304", code)
		}
		// A changed value moves the ETag although the version did not.
		call(t, e, "PUT", "/api/v1/agents/"+agentA+"/secrets/broker-pw", tok, map[string]any{"value": "a-pw-2"})
		code, etag2, body := state(keyA, agentA, etagA)
		if code != http.StatusOK || etag2 == etagA || !strings.Contains(body, `"password":"a-pw-2"`) || !strings.HasPrefix(etag2, `"1-`) {
			t.Fatalf("after a secret change: %d %s %s", code, etag2, body)
		}

		// No user-facing GET returns a value.
		for _, p := range []string{"/api/v1/secrets", "/api/v1/agents/" + agentA + "/secrets", "/api/v1/agents/" + agentA + "/target-state", "/api/v1/agents/" + agentA} {
			r := call(t, e, "GET", p, tok, nil)
			if r.status != http.StatusOK || strings.Contains(r.raw, "tenant-pw") || strings.Contains(r.raw, "a-pw") {
				t.Errorf("GET %s: %d %s", p, r.status, r.raw)
			}
		}
		r := call(t, e, "GET", "/api/v1/agents/"+agentA+"/secrets", tok, nil)
		var list struct {
			Secrets []map[string]any `json:"secrets"`
		}
		if err := json.Unmarshal([]byte(r.raw), &list); err != nil || len(list.Secrets) != 1 || list.Secrets[0]["name"] != "broker-pw" || list.Secrets[0]["scope"] != "agent" {
			t.Fatalf("agent secrets: %s", r.raw)
		}
		// Deleting the agent's secret falls back to the tenant's.
		if r := call(t, e, "DELETE", "/api/v1/agents/"+agentA+"/secrets/broker-pw", tok, nil); r.status != http.StatusNoContent {
			t.Fatalf("delete: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "DELETE", "/api/v1/agents/"+agentA+"/secrets/broker-pw", tok, nil); r.status != http.StatusNotFound {
			t.Fatalf("delete again: %d %s", r.status, r.raw)
		}
		if _, _, body := state(keyA, agentA, ""); !strings.Contains(body, `"password":"tenant-pw"`) {
			t.Fatalf("after deleting the agent's secret: %s", body)
		}
	})
}
