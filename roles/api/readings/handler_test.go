package readings

import (
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// TestDatabaseNotOpen: before cmd has opened the database every endpoint
// answers 503, and still 401 without a tenant.
func TestDatabaseNotOpen(t *testing.T) {
	h := newRouter(t, nil, query.Limits{}, testNow)
	for _, tc := range []apiCase{
		{path: "/api/v1/readings/latest"},
		{path: "/api/v1/readings/$A1/latest"},
		{path: "/api/v1/readings/catalog"},
		{path: "/api/v1/metrics"},
		{path: "/api/v1/profiles"},
		{path: "/api/v1/readings/daily"},
		{path: "/api/v1/readings/$A1/timeseries?metric=a.b&interval=1h"},
		{method: "POST", path: "/api/v1/readings/query", body: `{"query": "readings"}`},
		{method: "POST", path: "/api/v1/readings", body: `{"agentUuid": "$A1", "metricName": "a.b", "value": 1}`},
	} {
		tc.name, tc.tenant, tc.status, tc.code, tc.msg = tc.path, tenantA, 503, "database_unavailable", "the database is not available"
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
	apiCase{path: "/api/v1/readings/latest", status: 401, code: "unauthorized", msg: "tenant"}.run(t, h)
}
