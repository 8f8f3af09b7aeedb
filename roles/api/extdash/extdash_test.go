package extdash

// The Grafana these tests call is grafanatest's scripted server, which
// replays the answers Grafana documents for the dashboard search and the
// alerting provisioning API: Grafana itself cannot run here.

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/extdash/grafanatest"
)

const token = "glsa_test_9f8e7d6c5b4a"

type harness struct {
	t      *testing.T
	e      *gin.Engine
	g      *grafanatest.Server
	events []accounts.Event
}

// newHarness serves the routes against a scripted Grafana reached with
// clientToken; without a Grafana (configured false) they have none.
func newHarness(t *testing.T, configured bool, clientToken string) *harness {
	t.Helper()
	h := &harness{t: t, g: grafanatest.New(t, token)}
	var c *Client
	if configured {
		var err error
		if c, err = NewClient(h.g.URL+"/grafana/", clientToken, nil); err != nil {
			t.Fatal(err)
		}
	}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), Deps{Grafana: c, Caller: accountstest.Caller, WriteError: apitest.WriteError,
		Audit: func(_ *gin.Context, e accounts.Event) { h.events = append(h.events, e) },
		Log:   slog.New(slog.NewTextHandler(t.Output(), nil))})
	return h
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1/external-dashboards"+path, who, body)
}

// TestNotConfigured: without api.grafana_url every route answers 503
// and calls nothing.
func TestNotConfigured(t *testing.T) {
	h := newHarness(t, false, "")
	h.call("GET", "/dashboards", "member-a", nil).ExpectError(t, http.StatusServiceUnavailable, "not_configured")
	h.call("GET", "/alert-rules", "member-a", nil).ExpectError(t, http.StatusServiceUnavailable, "not_configured")
	h.call("POST", "/update-alert-threshold", "admin-a", map[string]any{"ruleUid": grafanatest.RuleThreshold, "threshold": 1}).
		ExpectError(t, http.StatusServiceUnavailable, "not_configured")
	h.call("GET", "/dashboards", "", nil).ExpectError(t, http.StatusUnauthorized, "unauthorized")
	if r := h.g.Requests(); len(r) != 0 {
		t.Errorf("requests to Grafana: %v", r)
	}
}

// TestLists: every user lists the dashboards (folders left out, URLs
// absolute under Grafana's sub-path) and the alert rules with their
// thresholds; the token goes as a bearer token.
func TestLists(t *testing.T) {
	h := newHarness(t, true, token)
	r := h.call("GET", "/dashboards", "member-a", nil).Expect(t, "dashboards", http.StatusOK)
	ds := r.List("dashboards")
	if len(ds) != 2 || r.Body["truncated"] != false {
		t.Fatalf("dashboards %s", r.Raw)
	}
	first := ds[0].(map[string]any)
	if first["uid"] != "cIBgcSjkk" || first["url"] != h.g.URL+"/grafana/d/cIBgcSjkk/production-overview" || first["folderTitle"] != "Plant 7" {
		t.Errorf("first dashboard %v", first)
	}
	if tags, _ := ds[1].(map[string]any)["tags"].([]any); tags == nil {
		t.Errorf("null tags kept: %v", ds[1])
	}
	if got := h.g.Requests()[0]; got != "GET /grafana/api/search?limit=5000&type=dash-db" {
		t.Errorf("search request %q", got)
	}
	if got := h.g.LastHeader().Get("Authorization"); got != "Bearer "+token {
		t.Errorf("Authorization %q", got)
	}

	r = h.call("GET", "/alert-rules", "member-a", nil).Expect(t, "alert rules", http.StatusOK)
	rules := r.List("alertRules")
	if len(rules) != 3 {
		t.Fatalf("alert rules %s", r.Raw)
	}
	want := map[string]string{
		grafanatest.RuleThreshold: `{"kind":"threshold","op":"gt","refId":"C","value":80}`,
		grafanatest.RuleClassic:   `{"kind":"classic_conditions","op":"lt","refId":"B","value":10}`,
		grafanatest.RuleRange:     `null`,
	}
	for _, x := range rules {
		m := x.(map[string]any)
		got, _ := json.Marshal(m["threshold"]) // keys sorted
		if string(got) != want[m["uid"].(string)] {
			t.Errorf("rule %s threshold %s, want %s", m["uid"], got, want[m["uid"].(string)])
		}
		if m["folderUid"] != "plant-alerts" || m["ruleGroup"] != "boilers" || m["paused"] != false {
			t.Errorf("rule %v", m)
		}
	}
}

// TestUpdateThreshold: admins only; the one number changes in Grafana
// and everything else of the rule goes back as it came; the change is
// audited with the old and new values.
func TestUpdateThreshold(t *testing.T) {
	h := newHarness(t, true, token)
	ok := map[string]any{"ruleUid": grafanatest.RuleThreshold, "threshold": 85.5}
	for _, who := range []string{"member-a", "viewer-a"} {
		h.call("POST", "/update-alert-threshold", who, ok).ExpectError(t, http.StatusForbidden, "forbidden")
	}
	for _, c := range []struct {
		body  any
		field string
	}{
		{map[string]any{"threshold": 1}, "ruleUid"},
		{map[string]any{"ruleUid": "../admin", "threshold": 1}, "ruleUid"},
		{map[string]any{"ruleUid": strings.Repeat("a", 41), "threshold": 1}, "ruleUid"},
		{map[string]any{"ruleUid": "x"}, "threshold"},
		{map[string]any{"ruleUid": "x", "threshold": "85"}, "threshold"},
		{map[string]any{"ruleUid": "x", "threshold": 1, "refId": "C"}, "refId"},
	} {
		r := h.call("POST", "/update-alert-threshold", "admin-a", c.body)
		r.ExpectError(t, http.StatusBadRequest, "invalid_body")
		if !strings.Contains(r.Str("error", "message"), c.field) {
			t.Errorf("%v: message %q does not name %s", c.body, r.Str("error", "message"), c.field)
		}
	}
	h.call("POST", "/update-alert-threshold", "admin-a", map[string]any{"ruleUid": "nosuchrule", "threshold": 1}).
		ExpectError(t, http.StatusNotFound, "not_found")
	h.call("POST", "/update-alert-threshold", "admin-a", map[string]any{"ruleUid": grafanatest.RuleRange, "threshold": 1}).
		ExpectError(t, http.StatusUnprocessableEntity, "validation_failed")

	before, _ := json.Marshal(h.g.Rule(grafanatest.RuleThreshold))
	r := h.call("POST", "/update-alert-threshold", "admin-a", ok).Expect(t, "update", http.StatusOK)
	if r.Body["previousThreshold"] != 80.0 {
		t.Errorf("previousThreshold %v", r.Body["previousThreshold"])
	}
	if th, _ := r.Body["alertRule"].(map[string]any)["threshold"].(map[string]any); th["value"] != 85.5 {
		t.Errorf("answered rule %s", r.Raw)
	}
	if got := h.g.LastHeader().Get("X-Disable-Provenance"); got != "true" {
		t.Errorf("X-Disable-Provenance %q: the rule would be locked in Grafana's UI", got)
	}
	stored := h.g.Rule(grafanatest.RuleThreshold)
	if stored["provenance"] != "" {
		t.Errorf("provenance %v", stored["provenance"])
	}
	// Only the threshold and Grafana's own updated stamp differ.
	var was map[string]any
	_ = json.Unmarshal(before, &was)
	was["updated"], was["provenance"] = stored["updated"], stored["provenance"]
	data := was["data"].([]any)
	ev := data[2].(map[string]any)["model"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["evaluator"].(map[string]any)
	ev["params"] = []any{85.5}
	wantDoc, _ := json.Marshal(was)
	gotDoc, _ := json.Marshal(stored)
	if string(wantDoc) != string(gotDoc) {
		t.Errorf("stored rule\n%s\nwant\n%s", gotDoc, wantDoc)
	}
	var kinds []string
	for _, e := range h.events {
		kinds = append(kinds, e.Kind+" "+e.Outcome)
	}
	if !slices.Equal(kinds, []string{AuditThresholdUpdated + " "}) || h.events[0].Detail["old"] != 80.0 || h.events[0].Detail["new"] != 85.5 ||
		h.events[0].Target != grafanatest.RuleThreshold || h.events[0].Tenant != apitest.TenantA {
		t.Errorf("audit %+v", h.events)
	}
}

// TestUpstreamErrors: Grafana refusing the token, failing, or gone is 502
// upstream_error, and the answer never carries the token.
func TestUpstreamErrors(t *testing.T) {
	wrong := newHarness(t, true, "glsa_wrong_token")
	r := wrong.call("GET", "/dashboards", "member-a", nil)
	r.ExpectError(t, http.StatusBadGateway, "upstream_error")
	if !strings.Contains(r.Raw, "401") || strings.Contains(r.Raw, "glsa_") {
		t.Errorf("answer %s: want Grafana's status, never the token", r.Raw)
	}

	h := newHarness(t, true, token)
	h.g.FailWith(http.StatusInternalServerError)
	h.call("GET", "/alert-rules", "member-a", nil).ExpectError(t, http.StatusBadGateway, "upstream_error")
	h.call("POST", "/update-alert-threshold", "admin-a", map[string]any{"ruleUid": grafanatest.RuleThreshold, "threshold": 1}).
		ExpectError(t, http.StatusBadGateway, "upstream_error")
	if len(h.events) != 1 || h.events[0].Outcome != "failure" {
		t.Errorf("audit of the failed update: %+v", h.events)
	}
	h.g.FailWith(0)
	h.g.Close()
	h.call("GET", "/dashboards", "member-a", nil).ExpectError(t, http.StatusBadGateway, "upstream_error")
}

// TestNewClient: the URL must be http or https with a host.
func TestNewClient(t *testing.T) {
	for raw, ok := range map[string]bool{"http://grafana:3000": true, "https://g.example/sub/": true, "grafana:3000": false, "ftp://g": false, "": false} {
		if _, err := NewClient(raw, "", nil); (err == nil) != ok {
			t.Errorf("NewClient(%q): %v", raw, err)
		}
	}
}
