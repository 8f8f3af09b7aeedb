package anomaly

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

func zscoreRule(extra map[string]any) map[string]any {
	r := map[string]any{"name": "temp spikes", "type": "zscore", "metric": "temp*", "k": 3, "window": "10m",
		"minSamples": 5, "recoverAfter": "30s", "severity": "critical"}
	for k, v := range extra {
		r[k] = v
	}
	return r
}

// TestZScoreIncidentIntegration: a z-score rule fires on injected readings
// and opens one incident (not one per reading); recovery closes it after
// recoverAfter; a new firing opens another, which PATCH resolve closes.
func TestZScoreIncidentIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		rule := h.call("POST", "/anomaly/rules", "member-a", zscoreRule(nil)).Expect(t, "create", http.StatusCreated)
		id := rule.Str("id")
		h.reload()
		t0 := h.now
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", t0, time.Second, 20, 21, 20, 21, 20, 21)
		if r := h.call("GET", "/anomaly/incidents", "admin-a", nil).Expect(t, "list", http.StatusOK); len(r.List("incidents")) != 0 {
			t.Fatalf("incident before any spike: %s", r.Raw)
		}
		// Two spikes in a row and a third reading: one incident.
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", t0.Add(6*time.Second), time.Second, 60, 61)
		// Another tenant's agent with the same readings: not A's rule.
		h.feed(apitest.TenantB, apitest.AgentB1, "plc1", "temperature", t0, time.Second, 20, 21, 20, 21, 20, 21, 60)
		list := h.call("GET", "/anomaly/incidents?status=open", "admin-a", nil).Expect(t, "list", http.StatusOK).List("incidents")
		if len(list) != 1 {
			t.Fatalf("%d open incidents, want 1: %v", len(list), list)
		}
		inc := list[0].(map[string]any)
		sensor := inc["sensor"].(map[string]any)
		if inc["ruleId"] != id || sensor["agentUuid"] != apitest.AgentA1 || sensor["metric"] != "plc1.temperature" || sensor["deviceName"] != "plc1" ||
			inc["value"].(float64) != 60 || inc["score"].(float64) < 3 || inc["severity"] != "critical" || inc["closedAt"] != nil {
			t.Fatalf("incident %v", inc)
		}
		// Clear readings, but for less than recoverAfter: still open.
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", t0.Add(10*time.Second), 10*time.Second, 20, 21, 20)
		if n := len(h.call("GET", "/anomaly/incidents?status=open", "admin-a", nil).List("incidents")); n != 1 {
			t.Fatalf("%d open incidents after 20 s of recovery, want 1", n)
		}
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", t0.Add(40*time.Second), time.Second, 21)
		detail := h.call("GET", "/anomaly/incidents/"+inc["id"].(string), "member-a", nil).Expect(t, "detail", http.StatusOK)
		if detail.Str("status") != "closed" || detail.Str("closeReason") != "recovered" {
			t.Fatalf("after recovery: %s", detail.Raw)
		}
		// opened at t0+6s (the second spike, z < 3, already clears), closed at t0+40s.
		if d := detail.Body["durationSeconds"].(float64); d != 34 {
			t.Errorf("duration %g s, want 34", d)
		}
		// A second firing is a second incident; resolve closes it.
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", t0.Add(50*time.Second), time.Second, 20, 21, 20, 90)
		open := h.call("GET", "/anomaly-incidents?status=open", "admin-a", nil).List("incidents")
		if len(open) != 1 {
			t.Fatalf("%d open after the second spike, want 1", len(open))
		}
		second := open[0].(map[string]any)["id"].(string)
		h.call("PATCH", "/anomaly-incidents/"+second+"/resolve", "admin-b", nil).ExpectError(t, http.StatusNotFound, "not_found")
		h.call("PATCH", "/anomaly-incidents/"+second+"/resolve", "viewer-a", nil).ExpectError(t, http.StatusForbidden, "forbidden")
		res := h.call("PATCH", "/anomaly-incidents/"+second+"/resolve", "member-a", nil).Expect(t, "resolve", http.StatusOK)
		if res.Str("status") != "closed" || res.Str("closeReason") != "resolved" || res.Str("resolvedBy") != accountstest.Callers["member-a"].UserID {
			t.Fatalf("resolved: %s", res.Raw)
		}
		h.call("PATCH", "/anomaly-incidents/"+second+"/resolve", "member-a", nil).ExpectError(t, http.StatusConflict, "conflict")
		if n := len(h.call("GET", "/anomaly/incidents", "admin-a", nil).List("incidents")); n != 2 {
			t.Errorf("%d incidents in all, want 2", n)
		}
		// Tenant B sees none of it.
		h.call("GET", "/anomaly/incidents/"+second, "admin-b", nil).ExpectError(t, http.StatusNotFound, "not_found")
		if n := len(h.call("GET", "/anomaly/incidents", "admin-b", nil).List("incidents")); n != 0 {
			t.Errorf("tenant B lists %d incidents", n)
		}
	})
}

// TestScopeIntegration: a rule scoped to a fleet or an agent watches only
// those agents.
func TestScopeIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		th := func(scope map[string]any) map[string]any {
			return map[string]any{"name": "hot", "type": "threshold", "metric": "plc*.temp", "op": "above", "threshold": 50, "scope": scope}
		}
		h.call("POST", "/anomaly/rules", "admin-a", th(map[string]any{"fleetId": apitest.FleetA})).Expect(t, "fleet rule", http.StatusCreated)
		h.call("POST", "/anomaly/rules", "admin-a", th(map[string]any{"fleetId": apitest.FleetB})).ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
		h.call("POST", "/anomaly/rules", "admin-a", th(map[string]any{"agentUuid": apitest.AgentB1})).ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
		h.reload()
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temp", h.now, time.Second, 60) // in fleet A
		h.feed(apitest.TenantA, apitest.AgentA2, "plc1", "temp", h.now, time.Second, 60) // in no fleet
		h.feed(apitest.TenantA, apitest.AgentA1, "pump", "temp", h.now, time.Second, 60) // another metric
		list := h.call("GET", "/anomaly/incidents", "admin-a", nil).List("incidents")
		if len(list) != 1 || list[0].(map[string]any)["sensor"].(map[string]any)["agentUuid"] != apitest.AgentA1 {
			t.Fatalf("incidents %v, want one of agent A1", list)
		}
	})
}

// TestCorrelationLicenceIntegration: a correlation rule needs the licence
// feature correlation_rules: 403 licence_feature_missing without it, and
// with it the rule is stored and fires when both conditions hold within
// its window.
func TestCorrelationLicenceIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		corr := map[string]any{"name": "overheat without flow", "type": "correlation", "window": "5m", "recoverAfter": "0s",
			"conditions": []any{
				map[string]any{"type": "rate_of_change", "metric": "temp*", "op": "rising", "rate": 5, "per": "minute", "window": "2m"},
				map[string]any{"type": "threshold", "metric": "flow*", "op": "below", "threshold": 10},
			}}
		h.useLicence()
		h.call("POST", "/anomaly/rules", "admin-a", corr).ExpectError(t, http.StatusForbidden, licence.CodeFeatureMissing)
		// Other rule types need no feature.
		h.call("POST", "/anomaly/rules", "admin-a", zscoreRule(nil)).Expect(t, "zscore without the feature", http.StatusCreated)
		h.useLicence(licence.FeatureCorrelationRules)
		created := h.call("POST", "/anomaly/rules", "admin-a", corr).Expect(t, "with the feature", http.StatusCreated)
		if created.Str("type") != "correlation" || len(created.List("conditions")) != 2 {
			t.Fatalf("created %s", created.Raw)
		}
		h.reload()
		t0 := h.now
		// Temperature rises by 10 a minute; flow is fine: no incident.
		h.feed(apitest.TenantA, apitest.AgentA1, "boiler", "temperature", t0, time.Minute, 50, 60)
		h.feed(apitest.TenantA, apitest.AgentA1, "boiler", "flow", t0.Add(time.Minute), time.Second, 30)
		if n := len(h.call("GET", "/anomaly/incidents", "admin-a", nil).List("incidents")); n != 0 {
			t.Fatalf("%d incidents with flow fine", n)
		}
		// Flow drops within the window: the rule fires.
		h.feed(apitest.TenantA, apitest.AgentA1, "boiler", "flow", t0.Add(3*time.Minute), time.Second, 5)
		list := h.call("GET", "/anomaly/incidents", "admin-a", nil).List("incidents")
		if len(list) != 1 || list[0].(map[string]any)["sensor"].(map[string]any)["metric"] != "temp* & flow*" {
			t.Fatalf("incidents %v, want one correlation incident", list)
		}
		// Without the feature again, the evaluator drops the rule.
		h.useLicence()
		h.reload()
		if n := len(h.x.eval.tenants[apitest.TenantA].rules); n != 1 {
			t.Errorf("%d rules evaluated without the feature, want the z-score only", n)
		}
	})
}

// TestRuleValidationIntegration: bad input answers naming the field; an
// unreadable body is 400, a value that breaks a rule 422
// (docs/api-errors.md).
func TestRuleValidationIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		tests := []struct {
			name   string
			body   any
			status int
			field  string
		}{
			{"unknown type", zscoreRule(map[string]any{"type": "magic"}), 422, "type"},
			{"missing metric", zscoreRule(map[string]any{"metric": ""}), 422, "metric"},
			{"bad window", zscoreRule(map[string]any{"window": "5 minutes"}), 422, "window"},
			{"bad scope id", zscoreRule(map[string]any{"scope": map[string]any{"agentUuid": "nope"}}), 422, "scope.agentUuid"},
			{"unknown fleet", zscoreRule(map[string]any{"scope": map[string]any{"fleetId": "f9000000-0000-4000-8000-000000000009"}}), 422, "scope.fleetId"},
			{"unknown agent", zscoreRule(map[string]any{"scope": map[string]any{"agentUuid": "a9000000-0000-4000-8000-000000000009"}}), 422, "scope.agentUuid"},
			{"unknown field", zscoreRule(map[string]any{"treshold": 3}), 400, "treshold"},
			{"mistyped field", zscoreRule(map[string]any{"k": "three"}), 400, "k"},
			{"not json", "{", 400, "body"},
		}
		for _, tt := range tests {
			r := h.call("POST", "/anomaly/rules", "admin-a", tt.body)
			if r.Status != tt.status || !strings.Contains(r.Str("error", "message"), tt.field) {
				t.Errorf("%s: %d %s, want %d naming %q", tt.name, r.Status, r.Raw, tt.status, tt.field)
			}
		}
		if n := len(h.call("GET", "/anomaly/rules", "admin-a", nil).List("rules")); n != 0 {
			t.Errorf("%d rules stored from bad input", n)
		}
		h.call("PUT", "/anomaly/rules/"+codec.NewUUID().String(), "admin-a", zscoreRule(nil)).ExpectError(t, http.StatusNotFound, "not_found")
		h.call("POST", "/anomaly/rules", "viewer-a", zscoreRule(nil)).ExpectError(t, http.StatusForbidden, "forbidden")
		h.call("GET", "/anomaly/incidents?status=maybe", "admin-a", nil).ExpectError(t, http.StatusBadRequest, "invalid_parameter")
		h.call("GET", "/anomaly/hourly?hours=1000", "admin-a", nil).ExpectError(t, http.StatusBadRequest, "invalid_parameter")
	})
}

// TestRulesCRUDIntegration: update and delete, within the tenant only.
func TestRulesCRUDIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		id := h.call("POST", "/anomaly/rules", "admin-a", zscoreRule(nil)).Expect(t, "create", http.StatusCreated).Str("id")
		h.call("PUT", "/anomaly/rules/"+id, "admin-b", zscoreRule(nil)).ExpectError(t, http.StatusNotFound, "not_found")
		h.call("DELETE", "/anomaly/rules/"+id, "admin-b", nil).ExpectError(t, http.StatusNotFound, "not_found")
		if n := len(h.call("GET", "/anomaly/rules", "admin-b", nil).List("rules")); n != 0 {
			t.Fatalf("tenant B lists %d rules", n)
		}
		up := h.call("PUT", "/anomaly/rules/"+id, "member-a", zscoreRule(map[string]any{"k": 4, "enabled": false})).Expect(t, "update", http.StatusOK)
		if up.Body["k"].(float64) != 4 || up.Body["enabled"] != false {
			t.Fatalf("updated %s", up.Raw)
		}
		h.reload()
		if h.x.eval.tenants[apitest.TenantA] != nil {
			t.Error("a disabled rule is evaluated")
		}
		h.call("DELETE", "/anomaly/rules/"+id, "member-a", nil).Expect(t, "delete", http.StatusNoContent)
		h.call("DELETE", "/anomaly/rules/"+id, "member-a", nil).ExpectError(t, http.StatusNotFound, "not_found")
	})
}

type hook struct {
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	fail   int // answer 500 to this many requests first
}

func (k *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.fail > 0 {
		k.fail--
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	k.bodies = append(k.bodies, b)
	k.heads = append(k.heads, r.Header.Clone())
}

func (k *hook) got() ([][]byte, []http.Header) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([][]byte(nil), k.bodies...), append([]http.Header(nil), k.heads...)
}

// runDispatcher runs the alert dispatcher, with short backoffs, until the
// test ends.
func (h *harness) runDispatcher() {
	h.x.dispatch.backoff = func(int) time.Duration { return 10 * time.Millisecond }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = h.x.dispatch.Run(ctx)
	}()
	h.t.Cleanup(func() { cancel(); <-done })
}

// waitFor polls cond (no timing assertion: it only bounds the wait).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestWebhookIntegration: an alert rule's webhook receives the incident,
// signed with the rule's secret over the timestamp and the exact body, as
// an independent HMAC computation confirms; a failed delivery is retried
// and the outcome shows on the alert rule.
func TestWebhookIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		k := &hook{fail: 1}
		srv := httptest.NewServer(k)
		defer srv.Close()
		h.runDispatcher()
		ruleID := h.call("POST", "/anomaly/rules", "admin-a", zscoreRule(nil)).Expect(t, "rule", http.StatusCreated).Str("id")
		alert := map[string]any{"name": "ops hook", "condition": map[string]any{"ruleIds": []string{ruleID}, "minSeverity": "warning"},
			"target": map[string]any{"type": "webhook", "url": srv.URL + "/hook"}}
		h.call("POST", "/anomaly/alerts", "member-a", alert).ExpectError(t, http.StatusForbidden, "forbidden")
		created := h.call("POST", "/anomaly/alerts", "admin-a", alert).Expect(t, "alert rule", http.StatusCreated)
		secret := created.Str("secret")
		if len(secret) < minSecret || created.Body["hasSecret"] != true {
			t.Fatalf("created %s: no secret", created.Raw)
		}
		listed := h.call("GET", "/anomaly/alerts", "admin-a", nil).Expect(t, "list", http.StatusOK)
		if strings.Contains(listed.Raw, secret) {
			t.Fatal("the list shows the secret")
		}
		// Another tenant's rule id, another tenant's alert rule.
		bad := map[string]any{"name": "x", "condition": map[string]any{"ruleIds": []string{ruleID}}, "target": map[string]any{"type": "live"}}
		h.call("POST", "/anomaly/alerts", "admin-b", bad).ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
		h.call("PUT", "/anomaly/alerts/"+created.Str("id"), "admin-b", alert).ExpectError(t, http.StatusNotFound, "not_found")

		h.reload()
		h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", h.now, time.Second, 20, 21, 20, 21, 20, 80)
		waitFor(t, "the webhook", func() bool { b, _ := k.got(); return len(b) > 0 })
		bodies, heads := k.got()
		body, head := bodies[0], heads[0]
		ts := head.Get(HeaderTimestamp)
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write([]byte(ts + "." + string(body)))
		if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); head.Get(HeaderSignature) != want {
			t.Fatalf("signature %q, want %q", head.Get(HeaderSignature), want)
		}
		if sec, err := strconv.ParseInt(ts, 10, 64); err != nil || sec != h.now.Unix() {
			t.Errorf("timestamp %q, want %d", ts, h.now.Unix())
		}
		var n Notification
		if err := json.Unmarshal(body, &n); err != nil || n.Event != "incident.opened" || n.Incident == nil || n.Incident.RuleID != ruleID ||
			head.Get(HeaderEvent) != "incident.opened" {
			t.Fatalf("notification %s (%v)", body, err)
		}
		waitFor(t, "the delivery status", func() bool {
			a := h.call("GET", "/anomaly/alerts", "admin-a", nil).List("alerts")[0].(map[string]any)["lastDelivery"].(map[string]any)
			return a["status"] == "delivered" && a["attempts"].(float64) == 2
		})
	})
}

// TestEmailAndLiveIntegration: e-mail goes through the mailer, a live
// target publishes on the tenant's anomaly channel; an alert rule's
// minimum score filters.
func TestEmailAndLiveIntegration(t *testing.T) {
	h := newHarness(t, "sqlite")
	h.runDispatcher()
	h.call("POST", "/anomaly/rules", "admin-a", zscoreRule(nil)).Expect(t, "rule", http.StatusCreated)
	h.call("POST", "/anomaly/alerts", "admin-a", map[string]any{"name": "board", "target": map[string]any{"type": "live"}}).
		Expect(t, "live rule", http.StatusCreated)
	h.call("POST", "/anomaly/alerts", "admin-a", map[string]any{"name": "mail", "target": map[string]any{"type": "email", "to": "ops@example.com"}}).
		Expect(t, "mail rule", http.StatusCreated)
	h.call("POST", "/anomaly/alerts", "admin-a", map[string]any{"name": "picky", "condition": map[string]any{"minScore": 1e6},
		"target": map[string]any{"type": "email", "to": "picky@example.com"}}).Expect(t, "picky rule", http.StatusCreated)
	h.call("POST", "/anomaly/alerts", "admin-a", map[string]any{"name": "bad", "target": map[string]any{"type": "email", "to": "not mail"}}).
		ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")
	h.reload()
	h.feed(apitest.TenantA, apitest.AgentA1, "plc1", "temperature", h.now, time.Second, 20, 21, 20, 21, 20, 80)
	tu, _ := codec.ParseUUID(apitest.TenantA)
	channel := Channel(codec.EncodeID(tu))
	waitFor(t, "the mail and the live event", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.mails) > 0 && len(h.live[channel]) > 0
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.mails) != 1 || !strings.HasPrefix(h.mails[0], "ops@example.com: ") {
		t.Fatalf("mails %q", h.mails)
	}
	var n Notification
	if err := json.Unmarshal([]byte(h.live[channel][0]), &n); err != nil || n.Event != "incident.opened" || n.Incident == nil ||
		n.Incident.Sensor.Metric != "plc1.temperature" {
		t.Fatalf("live event %s (%v)", h.live[channel][0], err)
	}
	if len(h.live) != 1 {
		t.Errorf("published on %d channels, want the tenant's one", len(h.live))
	}
}

// TestAgentEventsIntegration: an event is stored once however often it
// comes; an agent of another tenant stores nothing; GET
// /agents/:uuid/events and /anomaly-alerts show it.
func TestAgentEventsIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		ctx := t.Context()
		tu, _ := codec.ParseUUID(apitest.TenantA)
		key := codec.EncodeID(tu)
		ev := func(id, kind string, at time.Time) []byte {
			b, _ := json.Marshal(control.Event{ID: id, Kind: kind, Severity: "critical", Timestamp: at.UnixMilli(),
				Data: json.RawMessage(`{"metric":"plc1.temperature","score":0.97}`)})
			return b
		}
		for range 2 {
			if _, err := h.x.StoreEvent(ctx, key, apitest.AgentA1, ev("e1", control.EventAnomalyAlert, h.now)); err != nil {
				t.Fatal(err)
			}
		}
		if stored, err := h.x.StoreEvent(ctx, key, apitest.AgentA1, ev("d1", control.EventDrift, h.now.Add(-time.Minute))); err != nil || !stored {
			t.Fatalf("drift event: %v %v", stored, err)
		}
		// Agent B1 is tenant B's: not under tenant A's topic.
		if stored, _ := h.x.StoreEvent(ctx, key, apitest.AgentB1, ev("x1", control.EventDrift, h.now)); stored {
			t.Error("another tenant's agent stored an event")
		}
		if _, err := h.x.StoreEvent(ctx, key, apitest.AgentA1, []byte(`{"id":"","kind":"drift"}`)); err == nil {
			t.Error("an invalid event was accepted")
		}
		all := h.call("GET", "/agents/"+apitest.AgentA1+"/events", "member-a", nil).Expect(t, "events", http.StatusOK).List("events")
		if len(all) != 2 || all[0].(map[string]any)["id"] != "e1" {
			t.Fatalf("events %v, want e1 then d1", all)
		}
		if n := len(h.call("GET", "/agents/"+apitest.AgentA1+"/events?kind=drift&limit=5", "member-a", nil).List("events")); n != 1 {
			t.Errorf("%d drift events, want 1", n)
		}
		h.call("GET", "/agents/"+apitest.AgentA1+"/events?since=yesterday", "member-a", nil).ExpectError(t, http.StatusBadRequest, "invalid_parameter")
		if n := len(h.call("GET", "/agents/"+apitest.AgentA1+"/events", "admin-b", nil).List("events")); n != 0 {
			t.Errorf("tenant B sees %d of A's events", n)
		}
		alerts := h.call("GET", "/anomaly-alerts", "admin-a", nil).Expect(t, "alerts", http.StatusOK).List("alerts")
		if len(alerts) != 1 || alerts[0].(map[string]any)["source"] != "edge" || alerts[0].(map[string]any)["metric"] != "plc1.temperature" {
			t.Fatalf("active alerts %v", alerts)
		}
		n, err := h.x.s.pruneEvents(ctx, h.now.Add(time.Hour))
		if err != nil || n != 2 {
			t.Errorf("pruned %d (%v), want 2", n, err)
		}
	})
}

// TestAggregatesIntegration: summary, hourly, daily and top-metrics on
// known incidents and edge alerts.
func TestAggregatesIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine)
		id := h.call("POST", "/anomaly/rules", "admin-a", zscoreRule(nil)).Expect(t, "rule", http.StatusCreated).Str("id")
		d := h.d.Dialect()
		now := h.now // 08:00
		add := func(metric, agent, sev string, opened time.Time, closed bool, score float64) {
			var closedAt any
			if closed {
				closedAt = d.TimeArg(opened.Add(time.Minute))
			}
			apitest.Exec(t, h.d, `INSERT INTO anomaly_incidents (id, tenant_uuid, rule_id, rule_key, rule_name, rule_type, severity, agent_uuid, device_name, metric,
value, score, peak_score, opened_at, closed_at) VALUES ($1, $2, $3, $3, 'r', 'zscore', $4, $5, 'plc1', $6, 1, $7, $7, $8, $9)`,
				codec.NewUUID().String(), apitest.TenantA, id, sev, agent, metric, score, d.TimeArg(opened), closedAt)
		}
		add("plc1.t", apitest.AgentA1, "critical", now.Add(-30*time.Minute), false, 5) // this hour... the previous hour: 07:30
		add("plc1.t", apitest.AgentA2, "warning", now.Add(-90*time.Minute), true, 7)   // 06:30
		add("plc1.t", apitest.AgentA1, "warning", now.Add(-25*time.Hour), true, 9)     // yesterday
		add("plc1.p", apitest.AgentA1, "info", now.Add(-2*time.Hour), true, 3)         // 06:00
		apitest.Exec(t, h.d, `INSERT INTO agent_events (tenant_uuid, agent_uuid, kind, event_id, severity, occurred_at, received_at, data)
VALUES ($1, $2, 'anomaly_alert', 'e1', 'critical', $3, $3, '{}')`, apitest.TenantA, apitest.AgentA2, d.TimeArg(now.Add(-10*time.Minute)))

		sm := h.call("GET", "/anomaly/summary", "admin-a", nil).Expect(t, "summary", http.StatusOK).Body
		want := map[string]float64{"openIncidents": 1, "incidents": 3, "edgeAlerts": 1, "affectedAgents": 2, "rules": 1, "enabledRules": 1}
		for k, v := range want {
			if sm[k].(float64) != v {
				t.Errorf("summary %s = %v, want %v", k, sm[k], v)
			}
		}
		if sev := sm["bySeverity"].(map[string]any); sev["critical"].(float64) != 1 || sev["warning"].(float64) != 1 || sev["info"].(float64) != 1 {
			t.Errorf("bySeverity %v", sev)
		}
		hours := h.call("GET", "/anomaly/hourly?hours=3", "admin-a", nil).Expect(t, "hourly", http.StatusOK).List("buckets")
		// 06:00, 07:00, 08:00.
		wantH := [][2]float64{{2, 0}, {1, 1}, {0, 0}}
		if len(hours) != 3 {
			t.Fatalf("hourly %v", hours)
		}
		for i, b := range hours {
			m := b.(map[string]any)
			if m["incidents"].(float64) != wantH[i][0] || m["edgeAlerts"].(float64) != wantH[i][1] {
				t.Errorf("hour %d %v, want %v", i, m, wantH[i])
			}
		}
		if first := hours[0].(map[string]any)["start"]; first != "2026-12-07T06:00:00Z" {
			t.Errorf("first hour %v", first)
		}
		days := h.call("GET", "/anomaly/daily?days=2", "admin-a", nil).Expect(t, "daily", http.StatusOK).List("buckets")
		if len(days) != 2 || days[0].(map[string]any)["incidents"].(float64) != 1 || days[1].(map[string]any)["incidents"].(float64) != 3 ||
			days[1].(map[string]any)["edgeAlerts"].(float64) != 1 {
			t.Errorf("daily %v", days)
		}
		top := h.call("GET", "/anomaly/top-metrics?limit=5", "admin-a", nil).Expect(t, "top", http.StatusOK).List("metrics")
		if len(top) != 2 {
			t.Fatalf("top metrics %v", top)
		}
		first := top[0].(map[string]any)
		if first["metric"] != "plc1.t" || first["incidents"].(float64) != 3 || first["agents"].(float64) != 2 || first["maxScore"].(float64) != 9 {
			t.Errorf("top metric %v", first)
		}
		// Tenant B's figures are its own.
		if sb := h.call("GET", "/anomaly/summary", "admin-b", nil).Body; sb["incidents"].(float64) != 0 || sb["openIncidents"].(float64) != 0 {
			t.Errorf("tenant B summary %v", sb)
		}
	})
}
