package api

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/roles/api/token"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func reportDBs(t *testing.T) map[string]config.DB {
	dbs := map[string]config.DB{"sqlite": coretest.SQLite(t)}
	if !testing.Short() {
		dbs["postgres"] = coretest.Postgres(t)
	}
	return dbs
}

func openMigrated(t *testing.T, cfg config.DB) *db.DB { return dbtest.Open(t, cfg) }

func encode(t *testing.T, v any, f codec.Format) []byte {
	t.Helper()
	b, err := codec.Encode(v, codec.EncodeOptions{Format: f})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReportsIntegration: state and system-metrics reports in any codec
// layering replace the agent's stored report unless they are older; the
// REST endpoints serve the latest one to the agent's tenant only.
func TestReportsIntegration(t *testing.T) {
	for name, cfg := range reportDBs(t) {
		t.Run(name, func(t *testing.T) {
			d := openMigrated(t, cfg)
			rep := newReports(&rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry()}, d)
			now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
			rep.now = func() time.Time { return now }

			tenantA, tenantB, agent := randomUUID(t), randomUUID(t), randomUUID(t)
			keyA, _ := codec.IDFromUUID(tenantA)
			agentKey, _ := codec.IDFromUUID(agent)
			topic := func(kind string) string { return "i/" + keyA + "/a/" + agentKey + "/" + kind }
			ctx := context.Background()
			deliver := func(kind string, payload []byte) {
				t.Helper()
				if err := rep.handle(ctx, mqttx.Message{Topic: topic(kind), Payload: payload}); err != nil {
					t.Fatalf("handle %s: %v", kind, err)
				}
			}

			deliver("state", encode(t, map[string]any{"timestamp": "2026-11-22T11:00:00Z", "apps": map[string]any{"web": "running"}}, codec.FormatJSON))
			deliver("state", encode(t, map[string]any{"timestamp": "2026-11-22T11:05:00Z", "apps": map[string]any{"web": "stopped"}}, codec.FormatMsgpackDeflate))
			// A redelivery of the first report arrives late: it must not roll back.
			deliver("state", encode(t, map[string]any{"timestamp": "2026-11-22T11:00:00Z", "apps": map[string]any{"web": "running"}}, codec.FormatJSON))
			deliver("metrics", encode(t, map[string]any{"timestamp": now.Add(-time.Minute).UnixMilli(), "cpu_usage": 12.5, "memory_percent": 40}, codec.FormatMsgpack))
			// Unusable reports are acknowledged and dropped.
			deliver("metrics", []byte("not json"))
			deliver("metrics", encode(t, []any{1, 2}, codec.FormatJSON))
			if err := rep.handle(ctx, mqttx.Message{Topic: "i/x/a/y/state", Payload: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			if got := testutil.ToFloat64(rep.stored.WithLabelValues("state", "stale")); got != 1 {
				t.Errorf("stale state reports = %v, want 1", got)
			}
			if got := testutil.ToFloat64(rep.dropped.WithLabelValues("payload")); got != 2 {
				t.Errorf("dropped payloads = %v, want 2", got)
			}
			// A document PostgreSQL's jsonb refuses (a NUL character) is
			// acknowledged as well: no redelivery could ever store it.
			otherAgent, _ := codec.IDFromUUID(randomUUID(t))
			if err := rep.handle(ctx, mqttx.Message{Topic: "i/" + keyA + "/a/" + otherAgent + "/state", Payload: []byte(`{"note":"a\u0000b"}`)}); err != nil {
				t.Errorf("report with a NUL character: %v, want it acknowledged", err)
			}
			if want := map[string]float64{"sqlite": 2, "postgres": 3}[name]; testutil.ToFloat64(rep.dropped.WithLabelValues("payload")) != want {
				t.Errorf("dropped payloads after a NUL report = %v, want %v on %s", testutil.ToFloat64(rep.dropped.WithLabelValues("payload")), want, name)
			}

			tokens := testTokens(t)
			e := httpx.NewEngine(httpx.EngineOptions{WriteError: WriteError})
			v1 := e.Group("/api/v1", claimsAuthenticator(tokens).require)
			v1.GET("/agents/:uuid/current-state", rep.currentState)
			v1.GET("/agents/:uuid/metrics", rep.systemMetrics)
			get := func(tenant, path string) (int, map[string]json.RawMessage) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Header.Set("Authorization", "Bearer "+sign(t, tokens, tenant, token.Access))
				w := httptest.NewRecorder()
				e.ServeHTTP(w, req)
				var body map[string]json.RawMessage
				if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
					t.Fatalf("%s: %v: %s", path, err, w.Body)
				}
				return w.Code, body
			}

			code, body := get(tenantA, "/api/v1/agents/"+agent+"/current-state")
			if code != http.StatusOK || !jsonEqual(t, body["state"], `{"apps":{"web":"stopped"},"timestamp":"2026-11-22T11:05:00Z"}`) ||
				string(body["reportedAt"]) != `"2026-11-22T11:05:00Z"` || string(body["receivedAt"]) != `"2026-11-22T12:00:00Z"` {
				t.Errorf("current-state = %d %s", code, body)
			}
			code, body = get(tenantA, "/api/v1/agents/"+agent+"/metrics")
			if code != http.StatusOK || !jsonEqual(t, body["metrics"], `{"cpu_usage":12.5,"memory_percent":40,"timestamp":`+jsonInt(now.Add(-time.Minute).UnixMilli())+`}`) ||
				string(body["reportedAt"]) != `"2026-11-22T11:59:00Z"` {
				t.Errorf("metrics = %d %s", code, body)
			}
			for _, tt := range []struct {
				tenant, path string
				status       int
			}{
				{tenantB, "/api/v1/agents/" + agent + "/current-state", http.StatusNotFound},
				{tenantA, "/api/v1/agents/" + randomUUID(t) + "/metrics", http.StatusNotFound},
				{tenantA, "/api/v1/agents/not-a-uuid/current-state", http.StatusBadRequest},
			} {
				if code, body := get(tt.tenant, tt.path); code != tt.status || body["error"] == nil {
					t.Errorf("%s = %d %s, want %d with an error", tt.path, code, body, tt.status)
				}
			}
		})
	}
}

// jsonEqual compares documents, not text: jsonb keeps its own key order.
func jsonEqual(t *testing.T, got json.RawMessage, want string) bool {
	t.Helper()
	var a, b any
	if err := json.Unmarshal(got, &a); err != nil {
		return false
	}
	if err := json.Unmarshal([]byte(want), &b); err != nil {
		t.Fatal(err)
	}
	return reflect.DeepEqual(a, b)
}

func jsonInt(v int64) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestDecodeReportTime(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		doc  map[string]any
		want time.Time
	}{
		{"ISO 8601", map[string]any{"timestamp": "2026-11-22T10:00:00.5+01:00"}, time.Date(2026, 11, 22, 9, 0, 0, 5e8, time.UTC)},
		{"Unix ms", map[string]any{"timestamp": int64(1700000000123)}, time.UnixMilli(1700000000123).UTC()},
		{"Unix ms as text", map[string]any{"timestamp": "1700000000123"}, time.UnixMilli(1700000000123).UTC()},
		{"none", map[string]any{"cpu": 1}, now},
		{"unparseable", map[string]any{"timestamp": "yesterday"}, now},
		{"far future is capped", map[string]any{"timestamp": "2030-01-01T00:00:00Z"}, now},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, at, err := decodeReport(encode(t, tt.doc, codec.FormatJSON), now)
			if err != nil || !at.Equal(tt.want) {
				t.Errorf("decodeReport = %v, %v; want %v", at, err, tt.want)
			}
		})
	}
}
