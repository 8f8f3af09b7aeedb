package readings

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// TestClientClosedRequestIntegration: a request whose client hung up
// before its query ran is answered 499 client_closed_request, not 503
// database_unavailable: the database did nothing wrong.
func TestClientClosedRequestIntegration(t *testing.T) {
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			d := integrationDB(t, engine)
			h := newRouter(t, d, query.Limits{}, testNow)
			for _, tc := range []struct{ method, path, body string }{
				{"GET", "/api/v1/readings/latest", ""},
				{"GET", "/api/v1/metrics", ""},
				{"GET", "/api/v1/readings/" + agentA1 + "/timeseries?metric=a.b", ""},
				{"POST", "/api/v1/readings/query", `{"query": "readings"}`},
				{"POST", "/api/v1/readings", `{"agentUuid": "` + agentA1 + `", "metricName": "a.b", "value": 1}`},
			} {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				req := httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body)).WithContext(ctx)
				req.Header.Set(tenantHeader, tenantA)
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != 499 || !strings.Contains(rec.Body.String(), `"client_closed_request"`) {
					t.Errorf("%s %s with the client gone = %d %s, want 499 client_closed_request", tc.method, tc.path, rec.Code, rec.Body)
				}
			}
			// The same requests with the client there still work.
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/api/v1/readings/latest", nil)
			req.Header.Set(tenantHeader, tenantA)
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				t.Errorf("GET /api/v1/readings/latest = %d %s", rec.Code, rec.Body)
			}
		})
	}
}
