package readings

import (
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// agentC is a well-formed agent id that nobody registered.
const agentC = "5d5d5d5d-5555-4555-8555-555555555555"

// TestAgentOwnershipIntegration: POST /readings takes an agent's owner from
// the registry. Tenant B writing first to tenant A's registered agent used
// to claim it: A's writes were refused, A's views went empty and A's metric
// names showed to B. Now B is refused, A is unaffected, and neither the
// readings stored before nor an unregistered id decide anything.
func TestAgentOwnershipIntegration(t *testing.T) {
	const a2Latest = `{"truncated": false, "readings": [
		{"agentUuid": "$A2", "metricName": "pump.speed", "deviceName": "pump", "protocol": "", "unit": "", "quality": "", "time": "2024-03-11T00:00:00Z", "value": 5}]}`
	const legacyLatest = `{"truncated": false, "readings": [
		{"agentUuid": "$A3", "metricName": "aaa.legacy", "deviceName": "aaa", "protocol": "", "unit": "", "quality": "", "time": "2024-03-10T00:00:00Z", "value": 1}]}`
	cases := []apiCase{
		{name: "B writes first to A's agent", method: "POST", path: "/api/v1/readings", tenant: tenantB,
			body:   `{"agentUuid": "$A2", "metricName": "zzz.claim", "value": 1, "time": "2024-03-11T00:30:00Z"}`,
			status: 404, code: "not_found", msg: `agentUuid "$A2" is not an agent of this tenant`},
		{name: "B's batch naming A's agent", method: "POST", path: "/api/v1/readings", tenant: tenantB,
			body:   `[{"agentUuid": "$B1", "metricName": "own.x", "value": 1}, {"agentUuid": "$A2", "metricName": "zzz.claim", "value": 1}]`,
			status: 404, code: "not_found", msg: `readings[1].agentUuid "$A2" is not an agent of this tenant`},
		{name: "A writes to its agent", method: "POST", path: "/api/v1/readings", tenant: tenantA,
			body:   `{"agentUuid": "$A2", "metricName": "pump.speed", "value": 5, "time": "2024-03-11T00:00:00Z"}`,
			status: 201, want: `{"inserted": 1, "ignored": 0}`},
		{name: "B tries again after A's write", method: "POST", path: "/api/v1/readings", tenant: tenantB,
			body:   `{"agentUuid": "$A2", "metricName": "zzz.claim", "value": 1, "time": "2024-03-11T00:30:00Z"}`,
			status: 404, code: "not_found", msg: `agentUuid "$A2" is not an agent of this tenant`},
		{name: "A's view of its agent is unchanged", path: "/api/v1/readings/$A2/latest", tenant: tenantA, status: 200, want: a2Latest},
		{name: "A's tenant-wide view is unchanged", path: "/api/v1/readings/latest", tenant: tenantA, status: 200, want: a2Latest},
		// B sees its own legacy row on A3, and nothing of A.
		{name: "no metric name of A shows to B", path: "/api/v1/metrics", tenant: tenantB, status: 200, want: `{"metrics": ["aaa.legacy"]}`},
		{name: "B sees none of A's readings", path: "/api/v1/readings/latest", tenant: tenantB, status: 200, want: legacyLatest},
		{name: "an unregistered agent is refused", method: "POST", path: "/api/v1/readings", tenant: tenantA,
			body:   `{"agentUuid": "` + agentC + `", "metricName": "x.y", "value": 1}`,
			status: 404, code: "not_found", msg: `agentUuid "` + agentC + `" is not an agent of this tenant`},
		// A3 carries a row of tenant B, written before writes were checked
		// against the registry: it no longer decides who may write.
		{name: "legacy rows of another tenant do not decide", method: "POST", path: "/api/v1/readings", tenant: tenantA,
			body:   `{"agentUuid": "$A3", "metricName": "valve.open", "value": 1, "time": "2024-03-11T00:00:00Z"}`,
			status: 201, want: `{"inserted": 1, "ignored": 0}`},
		{name: "A sees its write", path: "/api/v1/readings/$A3/latest?metric=valve.open", tenant: tenantA, status: 200, want: `{"truncated": false, "readings": [
		{"agentUuid": "$A3", "metricName": "valve.open", "deviceName": "valve", "protocol": "", "unit": "", "quality": "", "time": "2024-03-11T00:00:00Z", "value": 1}]}`},
		{name: "still no metric name of A shows to B", path: "/api/v1/metrics", tenant: tenantB, status: 200, want: `{"metrics": []}`},
	}
	// A claim made before the registry check: B's row sorts last on A1,
	// so the walk files A1 under B. B still sees none of A's names.
	claimed := []apiCase{
		{name: "A writes to A1", method: "POST", path: "/api/v1/readings", tenant: tenantA,
			body:   `{"agentUuid": "$A1", "metricName": "boiler.temp", "value": 1, "time": "2024-03-10T00:00:00Z"}`,
			status: 201, want: `{"inserted": 1, "ignored": 0}`},
		{name: "B sees only its own legacy name", path: "/api/v1/metrics", tenant: tenantB, status: 200, want: `{"metrics": ["zzz.claim"]}`},
	}
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			if _, err := d.SQL().ExecContext(t.Context(), insertSQL, d.Dialect().TimeArg(mustTime("2024-03-10T00:00:00Z")),
				agentA3, "aaa.legacy", 1.0, nil, nil, nil, "aaa", tenantB); err != nil {
				t.Fatal(err)
			}
			h := newRouter(t, d, query.Limits{}, testNow)
			for _, tc := range cases {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
			}
			if _, err := d.SQL().ExecContext(t.Context(), insertSQL, d.Dialect().TimeArg(mustTime("2024-03-10T00:00:00Z")),
				agentA1, "zzz.claim", 1.0, nil, nil, nil, "zzz", tenantB); err != nil {
				t.Fatal(err)
			}
			for _, tc := range claimed {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
			}
		})
	}
}
