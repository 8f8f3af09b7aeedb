package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/db"
)

// TestReadingsBatchOwnershipIntegration: serve-api checks the agents of a
// POST /readings body against the registry in one query on both engines:
// a body mixing the tenant's agents with another tenant's and an
// unregistered one is refused naming the first foreign reading, and a body
// of the tenant's own agents only is written.
func TestReadingsBatchOwnershipIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokA, tokB, agentA := twoTenants(t, e)
		var own []string
		for _, name := range []string{"a-2", "a-3", "a-4"} {
			r := call(t, e, "POST", "/api/v1/agents", tokA, map[string]any{"name": name})
			if r.status != http.StatusCreated {
				t.Fatalf("create agent %s: %d %s", name, r.status, r.raw)
			}
			own = append(own, r.str("uuid"))
		}
		own = append(own, agentA)
		agentB := call(t, e, "POST", "/api/v1/agents", tokB, map[string]any{"name": "b-1"}).str("uuid")
		if agentB == "" {
			t.Fatal("tenant B's agent was not created")
		}
		batch := func(agents ...string) []map[string]any {
			var b []map[string]any
			for _, a := range agents {
				b = append(b, map[string]any{"agentUuid": a, "metricName": "boiler.temp", "value": 1, "time": "2024-03-11T00:00:00Z"})
			}
			return b
		}
		unregistered := randomUUID(t)
		for _, tc := range []struct {
			name   string
			tok    string
			body   []map[string]any
			status int
			msg    string
		}{
			{"A's agents and B's", tokA, batch(own[0], own[1], agentB, own[2], unregistered), http.StatusNotFound, `readings[2].agentUuid "` + agentB + `"`},
			{"A's agents and an unregistered one", tokA, batch(own[0], own[1], own[2], unregistered, agentA), http.StatusNotFound, `readings[3].agentUuid "` + unregistered + `"`},
			{"upper-case id of A's agent and B's", tokA, batch(strings.ToUpper(own[3]), agentB), http.StatusNotFound, `readings[1].agentUuid "` + agentB + `"`},
			{"B naming A's agents", tokB, batch(agentB, own[0]), http.StatusNotFound, `readings[1].agentUuid "` + own[0] + `"`},
			{"A's agents only", tokA, batch(append(own, own[0])...), http.StatusCreated, ""},
		} {
			r := call(t, e, "POST", "/api/v1/readings", tc.tok, tc.body)
			if r.status != tc.status || !strings.Contains(r.str("error", "message"), tc.msg) {
				t.Errorf("%s: %d %s, want %d naming %s", tc.name, r.status, r.raw, tc.status, tc.msg)
			}
		}
	})
}
