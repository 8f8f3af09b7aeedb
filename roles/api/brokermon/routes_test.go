package brokermon

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

func keyOf(t testing.TB, tenantUUID string) string {
	u, err := codec.ParseUUID(tenantUUID)
	if err != nil {
		t.Fatal(err)
	}
	return codec.EncodeID(u)
}

func engine(t testing.TB, m *Monitor) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	Register(e.Group("/api/v1"), Deps{Monitor: m, Caller: accountstest.Caller, WriteError: apitest.WriteError})
	return e
}

func reading(name string, v float64) telemetry.Reading {
	return telemetry.Reading{Name: name, Value: &v}
}

// feed publishes, as the pipeline hands them over, payloads whose
// readings a and b always come and c every other time.
func feed(m *Monitor, tenant, topic string, n int) {
	for i := range n {
		msg := telemetry.Message{DeviceName: "plc1", Protocol: "modbus",
			Readings: []telemetry.Reading{reading("a", float64(i)), reading("b", 0.5*float64(i))}}
		if i%2 == 1 {
			msg.Readings = append(msg.Readings, reading("c", -float64(i)))
		}
		if m.Observe(tenant, topic, 64) {
			m.SampleMessages(topic, []telemetry.Message{msg})
		}
	}
}

func TestSchemaRouteRequiredAndOptional(t *testing.T) {
	m, err := New(Options{SampleEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := engine(t, m)
	ka := keyOf(t, apitest.TenantA)
	topic := "i/" + ka + "/a/" + agentA + "/endpoints/modbus"
	feed(m, ka, topic, 10)

	// The topic as it is, and with its slashes escaped: the same answer.
	for _, path := range []string{"/api/v1/broker/topics/" + topic + "/schema", "/api/v1/broker/topics/" + url.PathEscape(topic) + "%2Fschema"} {
		r := apitest.Call(t, e, "GET", path, "member-a", nil).Expect(t, path, http.StatusOK)
		if r.Str("topic") != topic || r.Body["samples"] != 10.0 {
			t.Errorf("%s: %s", path, r.Raw)
		}
		doc, _ := r.Body["schema"].(map[string]any)
		if !reflect.DeepEqual(doc["required"], []any{"deviceName", "protocol", "readings"}) {
			t.Errorf("required %v", doc["required"])
		}
		readings := prop(doc, "readings")
		if !reflect.DeepEqual(readings["required"], []any{"a", "b"}) {
			t.Errorf("readings required %v, want a and b (c comes every other time)", readings["required"])
		}
		if a := prop(readings, "a"); a["type"] != "integer" || a["minimum"] != 0.0 || a["maximum"] != 9.0 {
			t.Errorf("a: %v", a)
		}
		if b := prop(readings, "b"); b["type"] != "number" || b["maximum"] != 4.5 {
			t.Errorf("b: %v", b)
		}
		if c := prop(readings, "c"); c["type"] != "integer" || c["minimum"] != -9.0 || c["maximum"] != -1.0 || c["x-presence"] != 0.5 {
			t.Errorf("c: %v", c)
		}
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topic, "member-a", nil).ExpectError(t, http.StatusNotFound, "not_found")
	apitest.Call(t, e, "GET", "/api/v1/broker/topics//schema", "member-a", nil).ExpectError(t, http.StatusBadRequest, "validation_failed")
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/i/"+ka+"/never/schema", "member-a", nil).ExpectError(t, http.StatusNotFound, "not_found")
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topic+"/schema", "", nil).ExpectError(t, http.StatusUnauthorized, "unauthorized")
}

// TestBrokerRoutesTenancy: tenant B sees none of tenant A's topics and
// gets 404 for their schema; the broker's own figures are for admins.
func TestBrokerRoutesTenancy(t *testing.T) {
	m, err := New(Options{SampleEvery: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := engine(t, m)
	ka, kb := keyOf(t, apitest.TenantA), keyOf(t, apitest.TenantB)
	topicA := "i/" + ka + "/a/" + agentA + "/endpoints/modbus"
	feed(m, ka, topicA, 3)

	r := apitest.Call(t, e, "GET", "/api/v1/broker/topics", "member-a", nil).Expect(t, "A's topics", http.StatusOK)
	if !strings.Contains(r.Raw, topicA) || r.Str("root") != "i/"+ka {
		t.Errorf("tenant A's own tree: %s", r.Raw)
	}
	if n, ok := find(treeOf(t, r), topicA); !ok || n.Own != 3 || n.LastSeen == nil {
		t.Errorf("tenant A's topic in its tree: %+v", n)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/topics", "admin-b", nil).Expect(t, "B's topics", http.StatusOK)
	if strings.Contains(r.Raw, ka) || r.Str("root") != "i/"+kb {
		t.Errorf("tenant B's tree shows tenant A's topics: %s", r.Raw)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/dashboard", "admin-b", nil).Expect(t, "B's dashboard", http.StatusOK)
	if strings.Contains(r.Raw, ka) {
		t.Errorf("tenant B's dashboard shows tenant A's topics: %s", r.Raw)
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topicA+"/schema", "admin-b", nil).ExpectError(t, http.StatusNotFound, "not_found")
	apitest.Call(t, e, "GET", "/api/v1/broker/topics/"+topicA+"/schema", "member-a", nil).Expect(t, "A's schema", http.StatusOK)

	for _, p := range []string{"status", "metrics", "stats", "system-stats"} {
		apitest.Call(t, e, "GET", "/api/v1/broker/"+p, "member-a", nil).ExpectError(t, http.StatusForbidden, "forbidden")
		apitest.Call(t, e, "GET", "/api/v1/broker/"+p, "", nil).ExpectError(t, http.StatusUnauthorized, "unauthorized")
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/dashboard", "member-a", nil).Expect(t, "A's dashboard", http.StatusOK)
	if _, ok := r.Body["status"]; ok {
		t.Errorf("a member's dashboard shows the broker's figures: %s", r.Raw)
	}
	if top, _ := r.Body["topics"].(map[string]any)["top"].([]any); len(top) != 1 {
		t.Errorf("a member's dashboard topics: %s", r.Raw)
	}
	// No $SYS message yet: status says so, the figures are unavailable.
	r = apitest.Call(t, e, "GET", "/api/v1/broker/status", "admin-a", nil).Expect(t, "status", http.StatusOK)
	if r.Str("status") != "degraded" || r.Body["statsAvailable"] != false {
		t.Errorf("status without figures: %s", r.Raw)
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/metrics", "admin-a", nil).ExpectError(t, http.StatusServiceUnavailable, "broker_stats_unavailable")
}

func treeOf(t testing.TB, r apitest.Reply) TopicNode {
	t.Helper()
	var root TopicNode
	var build func(v any) TopicNode
	build = func(v any) TopicNode {
		m, _ := v.(map[string]any)
		n := TopicNode{}
		n.Topic, _ = m["topic"].(string)
		if f, ok := m["ownMessages"].(float64); ok {
			n.Own = int64(f)
		}
		if s, ok := m["lastSeen"].(string); ok {
			at, err := time.Parse(time.RFC3339Nano, s)
			if err == nil {
				n.LastSeen = &at
			}
		}
		cs, _ := m["children"].([]any)
		for _, c := range cs {
			n.Children = append(n.Children, build(c))
		}
		return n
	}
	root = build(r.Body["tree"])
	return root
}

// fakeSource is an in-process broker's counters.
type fakeSource struct{ stats Stats }

func (f *fakeSource) BrokerStats() Stats { return f.stats }

func TestBrokerRoutesFromSource(t *testing.T) {
	clk := newFakeClock()
	src := &fakeSource{}
	m, err := New(Options{Source: src, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	e := engine(t, m)
	for i := range 5 {
		src.stats = Stats{Version: "v2.7.9", Values: map[string]float64{PublishReceived: float64(100 * i), ClientsConnected: 2, UptimeSeconds: float64(i)}}
		m.poll.poll(clk.now())
		clk.add(time.Second)
	}
	clk.add(-time.Second)
	r := apitest.Call(t, e, "GET", "/api/v1/broker/status", "admin-a", nil).Expect(t, "status", http.StatusOK)
	if r.Str("status") != "ok" || r.Str("source") != "embedded" || r.Str("version") != "v2.7.9" || r.Body["clientsConnected"] != 2.0 {
		t.Errorf("status %s", r.Raw)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/metrics", "admin-a", nil).Expect(t, "metrics", http.StatusOK)
	if per, _ := r.Body["perSecond"].(map[string]any); per["publishReceived"] != 100.0 || r.Body["windowSeconds"] != 4.0 {
		t.Errorf("metrics %s", r.Raw)
	}
	r = apitest.Call(t, e, "GET", "/api/v1/broker/stats", "admin-a", nil).Expect(t, "stats", http.StatusOK)
	if tot, _ := r.Body["totals"].(map[string]any); tot["publishReceived"] != 400.0 {
		t.Errorf("stats %s", r.Raw)
	}
	apitest.Call(t, e, "GET", "/api/v1/broker/system-stats", "admin-a", nil).Expect(t, "system stats", http.StatusOK)
	r = apitest.Call(t, e, "GET", "/api/v1/broker/dashboard", "admin-a", nil).Expect(t, "dashboard", http.StatusOK)
	for _, k := range []string{"status", "metrics", "stats", "systemStats", "topics"} {
		if r.Body[k] == nil {
			t.Errorf("admin's dashboard without %s: %s", k, r.Raw)
		}
	}
}
