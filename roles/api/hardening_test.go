package api

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// TestSecurityHeaders: serve-api's server, as New builds it, sends the
// security headers every role's server sends, on success and on errors.
func TestSecurityHeaders(t *testing.T) {
	// No route asked for here reaches the database: a handle that was
	// never opened is enough.
	d, err := db.New(config.DB{Driver: "sqlite", SQLitePath: filepath.Join(t.TempDir(), "never-opened.db"), PoolSize: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, _ := fullEngine(t, d, config.Licence{})
	for _, path := range []string{"/", "/api/v1/agents", "/nope"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		for k, v := range httpx.SecurityHeaders {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s (%d): %s = %q, want %q", path, rec.Code, k, got, v)
			}
		}
	}
}

// TestReadingsOwnershipFromRegistryIntegration: serve-api wires POST
// /readings to the agent registry: tenant B cannot write to tenant A's
// agent nor to an agent nobody registered; A can.
func TestReadingsOwnershipFromRegistryIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokA, tokB, agentA := twoTenants(t, e)
		reading := func(agent, metric string) map[string]any {
			return map[string]any{"agentUuid": agent, "metricName": metric, "value": 1, "time": "2024-03-11T00:00:00Z"}
		}
		for _, tc := range []struct {
			name, tok string
			body      any
			status    int
			code      string
		}{
			{"B writes first to A's agent", tokB, reading(agentA, "zzz.claim"), http.StatusNotFound, "not_found"},
			{"A writes to its agent", tokA, reading(agentA, "boiler.temp"), http.StatusCreated, ""},
			{"B again", tokB, reading(agentA, "zzz.claim"), http.StatusNotFound, "not_found"},
			{"an unregistered agent", tokA, reading(randomUUID(t), "boiler.temp"), http.StatusNotFound, "not_found"},
		} {
			r := call(t, e, "POST", "/api/v1/readings", tc.tok, tc.body)
			if r.status != tc.status || r.str("error", "code") != tc.code {
				t.Errorf("%s: %d %s, want %d %q", tc.name, r.status, r.raw, tc.status, tc.code)
			}
		}
		if r := call(t, e, "GET", "/api/v1/metrics", tokB, nil); r.status != http.StatusOK || strings.Contains(r.raw, "boiler.temp") {
			t.Errorf("B's metric names: %d %s", r.status, r.raw)
		}
		if r := call(t, e, "GET", "/api/v1/readings/"+agentA+"/latest", tokA, nil); r.status != http.StatusOK || !strings.Contains(r.raw, "boiler.temp") {
			t.Errorf("A's view of its agent: %d %s", r.status, r.raw)
		}
	})
}

// twoTenants makes the first admin (tenant B) and a user of a second
// tenant (A) with an agent of its own, named a-agent.
func twoTenants(t *testing.T, e http.Handler) (tokA, tokB, agentA string) {
	t.Helper()
	tokB = admin(t, e)
	tokA = call(t, e, "POST", "/api/v1/auth/register", "", map[string]string{"email": "a@example.com", "password": "correct horse battery"}).str("accessToken")
	created := call(t, e, "POST", "/api/v1/agents", tokA, map[string]any{"name": "a-agent"})
	if created.status != http.StatusCreated {
		t.Fatalf("create agent: %d %s", created.status, created.raw)
	}
	return tokA, tokB, created.str("uuid")
}

// TestClaimedRowsDecideNoViewIntegration: readings another tenant wrote to
// an agent before writes were checked against the registry (here put into
// the table directly, under a metric name that sorts last, as the claimant
// of the report did) no longer decide whose agent it is in the tenant-wide
// views: the registry does. The owner still sees its readings, and the
// claimant sees neither the agent nor its metric names.
func TestClaimedRowsDecideNoViewIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tokA, tokB, agentA := twoTenants(t, e)
		if r := call(t, e, "POST", "/api/v1/readings", tokA, map[string]any{"agentUuid": agentA, "metricName": "boiler.temp", "value": 1, "time": "2024-03-11T00:00:00Z"}); r.status != http.StatusCreated {
			t.Fatalf("A writes: %d %s", r.status, r.raw)
		}
		var tenantB string
		if err := d.SQL().QueryRowContext(t.Context(), `SELECT tenant_uuid FROM users WHERE email <> $1`, "a@example.com").Scan(&tenantB); err != nil {
			t.Fatal(err)
		}
		keyB, err := codec.IDFromUUID(tenantB)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.SQL().ExecContext(t.Context(), `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
			VALUES ($1, $2, $3, $4, '', '', 'GOOD', '', $5)`, d.Dialect().TimeArg(time.Date(2024, 3, 12, 0, 0, 0, 0, time.UTC)), agentA, "zzz.claim", 2.0, keyB); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			name, tok, path string
			want, not       []string
		}{
			{"owner's latest", tokA, "/api/v1/readings/latest", []string{"boiler.temp", agentA}, []string{"zzz.claim"}},
			{"owner's metric names", tokA, "/api/v1/metrics", []string{"boiler.temp"}, []string{"zzz.claim"}},
			{"owner's catalog", tokA, "/api/v1/readings/catalog", []string{"boiler.temp"}, []string{"zzz.claim"}},
			{"claimant's latest", tokB, "/api/v1/readings/latest", nil, []string{agentA, "boiler.temp", "zzz.claim"}},
			{"claimant's metric names", tokB, "/api/v1/metrics", nil, []string{"boiler.temp", "zzz.claim"}},
		} {
			r := call(t, e, "GET", tc.path, tc.tok, nil)
			if r.status != http.StatusOK {
				t.Errorf("%s: %d %s", tc.name, r.status, r.raw)
				continue
			}
			for _, w := range tc.want {
				if !strings.Contains(r.raw, w) {
					t.Errorf("%s: %s lacks %q", tc.name, r.raw, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(r.raw, n) {
					t.Errorf("%s: %s shows %q", tc.name, r.raw, n)
				}
			}
		}
	})
}

// TestNULInputsIntegration: a NUL character in any string input, in a body
// at any depth, in a query parameter or in a path parameter, is a 400
// naming the field; it was a 500 on PostgreSQL, which cannot store it.
func TestNULInputsIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _ := fullEngine(t, d, testLicence(t, 0))
		tok := admin(t, e)
		created := call(t, e, "POST", "/api/v1/agents", tok, map[string]any{"name": "press"})
		if created.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", created.status, created.raw)
		}
		agent := created.str("uuid")
		me := call(t, e, "GET", "/api/v1/auth/me", tok, nil).str("id")
		for _, tc := range []struct {
			method, path string
			anonymous    bool
			body         string
			field        string // what the message must name
		}{
			{"POST", "/api/v1/auth/login", true, `{"email": "admin\u0000@example.com", "password": "correct horse battery"}`, "email"},
			{"POST", "/api/v1/auth/login", true, `{"email": "admin@example.com", "password": "x\u0000"}`, "password"},
			{"POST", "/api/v1/auth/register", true, `{"email": "n\u0000@example.com", "password": "correct horse battery"}`, "email"},
			{"POST", "/api/v1/auth/password/reset", true, `{"email": "admin@example.com\u0000"}`, "email"},
			{"POST", "/api/v1/users", false, `{"email": "u@example.com", "password": "correct horse battery", "name": "a\u0000b"}`, "name"},
			{"PUT", "/api/v1/users/" + me, false, `{"name": "\u0000"}`, "name"},
			{"POST", "/api/v1/invites", false, `{"email": "\u0000@example.com"}`, "email"},
			{"POST", "/api/v1/api-keys", false, `{"name": "key\u0000"}`, "name"},
			{"POST", "/api/v1/agents", false, `{"name": "a\u0000"}`, "name"},
			{"POST", "/api/v1/agents", false, `{"name": "ok", "tags": {"location": "hall\u0000 3"}}`, "tags.location"},
			{"POST", "/api/v1/agents", false, `{"name": "ok", "tags": {"lo\u0000c": "x"}}`, "a key of tags"},
			{"PATCH", "/api/v1/agents/" + agent, false, `{"name": "\u0000"}`, "name"},
			{"POST", "/api/v1/agents/" + agent + "/tags", false, `{"tags": {"site": "\u0000"}}`, "tags.site"},
			{"POST", "/api/v1/agents/query", false, `{"tags": {"site": "\u0000"}}`, "tags.site"},
			{"PUT", "/api/v1/agents/" + agent + "/target-state", false, `{"state": {"mode": "run\u0000"}}`, "state.mode"},
			{"PUT", "/api/v1/agents/" + agent + "/target-state", false, `{"state": {"endpoints": [{"name": "a"}, {"name": "\u0000"}]}}`, "state.endpoints[1].name"},
			{"POST", "/api/v1/provisioning/keys", false, `{"name": "\u0000"}`, "name"},
			{"PUT", "/api/v1/broker-auth/user/scada", false, `{"rules": [{"pattern": "a/\u0000", "subscribe": true}]}`, "rules[0].pattern"},
			{"POST", "/api/v1/readings", false, `{"agentUuid": "` + agent + `", "metricName": "a.\u0000", "value": 1}`, "metricName"},
			{"POST", "/api/v1/readings/query", false, `{"query": "readings where metric = '\u0000'"}`, "query"},
			{"GET", "/api/v1/readings/latest?metric=boiler%00", false, "", "query parameter metric"},
			{"GET", "/api/v1/readings/" + agent + "/timeseries?metric=a.b%00", false, "", "query parameter metric"},
			{"GET", "/api/v1/readings/hourly?start=%00", false, "", "query parameter start"},
			{"GET", "/api/v1/audit/events?kind=%00", false, "", "query parameter kind"},
			{"GET", "/api/v1/agents/" + agent + "%00", false, "", "path parameter uuid"},
			{"GET", "/api/v1/broker-auth/user/sca%00da", false, "", "path parameter username"},
		} {
			bearer := tok
			if tc.anonymous {
				bearer = ""
			}
			var body any
			if tc.body != "" {
				body = tc.body
			}
			r := call(t, e, tc.method, tc.path, bearer, body)
			msg := r.str("error", "message")
			if r.status != http.StatusBadRequest || !strings.Contains(msg, tc.field) || !strings.Contains(msg, "NUL") {
				t.Errorf("%s %s %s: %d %s, want 400 naming %s", tc.method, tc.path, tc.body, r.status, r.raw, tc.field)
			}
		}
	})
}

// TestClientClosedRequestIntegration: whichever handler meets a cancelled
// query after its client hung up, serve-api counts the request as 499 (and
// answers 499 client_closed_request where it answers at all), never as a
// 5xx such as 503 database_unavailable.
func TestClientClosedRequestIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, r := fullEngine(t, d, testLicence(t, 0))
		tok := admin(t, e)
		paths := []string{"/api/v1/agents", "/api/v1/readings/latest", "/api/v1/users", "/api/v1/metrics"}
		for _, path := range paths {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			req := httptest.NewRequest(http.MethodGet, path, nil).WithContext(ctx)
			req.Header.Set("Authorization", "Bearer "+tok)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			if rec.Body.Len() > 0 && (rec.Code != httpx.StatusClientClosedRequest || !strings.Contains(rec.Body.String(), `"client_closed_request"`)) {
				t.Errorf("GET %s with the client gone = %d %s, want 499 client_closed_request", path, rec.Code, rec.Body)
			}
		}
		mfs, err := r.Metrics.Gather()
		if err != nil {
			t.Fatal(err)
		}
		counted := map[string]string{}
		for _, mf := range mfs {
			if mf.GetName() != "edgeplat_http_request_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				var route, code string
				for _, l := range m.GetLabel() {
					switch l.GetName() {
					case "route":
						route = l.GetValue()
					case "code":
						code = l.GetValue()
					}
				}
				if strings.HasPrefix(route, "/api/v1/auth/") {
					continue
				}
				counted[route] += code
			}
		}
		for _, path := range paths {
			if counted[path] != "499" {
				t.Errorf("GET %s with the client gone counted with code %q, want 499", path, counted[path])
			}
		}
	})
}

// TestClockWindowIntegration: readings timed beyond api.clock_max_future
// after their receipt are refused on both write paths (POST /readings
// answers 422 naming the field; MQTT telemetry loses those readings and
// keeps the rest), readings within it are stored, and readings older than
// api.clock_max_past are stored but counted. Both are counted in the metric
// and in the agent's current state.
func TestClockWindowIntegration(t *testing.T) {
	forEngine(t, func(t *testing.T, d *db.DB) {
		e, _, pipe := fullRole(t, d, testLicence(t, 0))
		tok := admin(t, e)
		created := call(t, e, "POST", "/api/v1/agents", tok, map[string]any{"name": "press"})
		if created.status != http.StatusCreated {
			t.Fatalf("create agent: %d %s", created.status, created.raw)
		}
		agent := created.str("uuid")
		tenantUUID, err := codec.ParseUUID(call(t, e, "GET", "/api/v1/auth/me", tok, nil).str("tenantId"))
		if err != nil {
			t.Fatal(err)
		}
		agentUUID, err := codec.ParseUUID(agent)
		if err != nil {
			t.Fatal(err)
		}
		tenantKey, agentKey := codec.EncodeID(tenantUUID), codec.EncodeID(agentUUID)
		now := time.Now().UTC().Truncate(time.Millisecond)
		ts := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339Nano) }

		// POST /readings.
		for _, tc := range []struct {
			name   string
			body   any
			status int
			msg    string
		}{
			{"a day ahead", map[string]any{"agentUuid": agent, "metricName": "boiler.temp", "value": 1, "time": ts(24 * time.Hour)},
				http.StatusUnprocessableEntity, "time " + ts(24*time.Hour)},
			{"a batch with one a day ahead", []map[string]any{
				{"agentUuid": agent, "metricName": "boiler.temp", "value": 1, "time": ts(0)},
				{"agentUuid": agent, "metricName": "boiler.temp", "value": 2, "time": ts(24 * time.Hour)}},
				http.StatusUnprocessableEntity, "readings[1].time"},
			{"within the window", map[string]any{"agentUuid": agent, "metricName": "boiler.temp", "value": 3, "time": ts(2 * time.Minute)},
				http.StatusCreated, ""},
			{"two days behind", map[string]any{"agentUuid": agent, "metricName": "boiler.temp", "value": 4, "time": ts(-48 * time.Hour)},
				http.StatusCreated, ""},
		} {
			r := call(t, e, "POST", "/api/v1/readings", tok, tc.body)
			if r.status != tc.status || !strings.Contains(r.str("error", "message"), tc.msg) {
				t.Errorf("%s: %d %s, want %d naming %q", tc.name, r.status, r.raw, tc.status, tc.msg)
			}
		}
		if r := call(t, e, "GET", "/api/v1/readings/"+agent+"/latest", tok, nil); !strings.Contains(r.raw, `"value":3`) {
			t.Errorf("latest after the refused future readings: %s, want the reading within the window", r.raw)
		}

		// MQTT telemetry.
		topic := "i/" + tenantKey + "/a/" + agentKey + "/endpoints/modbus"
		publish := func(readings ...map[string]any) (envelope.Batch, bool) {
			var rs []any
			for _, rd := range readings {
				rs = append(rs, rd)
			}
			raw, err := codec.Encode(map[string]any{"messages": []any{map[string]any{"readings": rs}}}, codec.EncodeOptions{Format: codec.FormatJSON})
			if err != nil {
				t.Fatal(err)
			}
			_, b, ok := pipe.prepare(mqttx.Message{Topic: topic, Payload: raw})
			return b, ok
		}
		reading := func(metric string, at time.Duration) map[string]any {
			return map[string]any{"deviceName": "boiler", "metric": metric, "value": 1, "timestamp": ts(at)}
		}
		b, ok := publish(reading("ahead", 24*time.Hour), reading("behind", -48*time.Hour), reading("now", 0))
		if !ok || len(b.Messages) != 1 || len(b.Messages[0].Readings) != 2 ||
			b.Messages[0].Readings[0].Name != "behind" || b.Messages[0].Readings[1].Name != "now" {
			t.Errorf("mixed envelope = %+v, %v; want the readings behind and now", b.Messages, ok)
		}
		if _, ok := publish(reading("ahead", 24*time.Hour)); ok {
			t.Error("an envelope of future readings only was not dropped")
		}
		if got := counterValue(t, pipe.m.dropped.WithLabelValues("clock")); got != 1 {
			t.Errorf("messages dropped for the clock = %v, want 1", got)
		}
		for _, c := range []struct {
			source, direction string
			want              float64
		}{{"http", "future", 2}, {"http", "past", 1}, {"mqtt", "future", 2}, {"mqtt", "past", 1}} {
			if got := counterValue(t, pipe.clock.skewed.WithLabelValues(c.source, c.direction)); got != c.want {
				t.Errorf("edgeplat_api_readings_clock_skew_total{source=%s,direction=%s} = %v, want %v", c.source, c.direction, got, c.want)
			}
		}

		// The agent's device health.
		if _, err := upsertReport(t.Context(), d, tenantKey, agent, "state", []byte(`{"status": "running"}`), now, now); err != nil {
			t.Fatal(err)
		}
		st := call(t, e, "GET", "/api/v1/agents/"+agent+"/current-state", tok, nil)
		clock, _ := st.body["clock"].(map[string]any)
		if st.status != http.StatusOK || clock["futureRefused"] != 4.0 || clock["pastAccepted"] != 2.0 ||
			clock["maxAheadSeconds"].(float64) < 86000 || clock["lastFutureAt"] == nil {
			t.Errorf("current state: %d %s, want clock with 4 future readings refused and 2 past accepted", st.status, st.raw)
		}
	})
}
