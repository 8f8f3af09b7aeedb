package ai

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/dashboards"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// seedDevice stores readings of every kind the rules tell apart for
// agent A1, and one metric of tenant B.
func (h *harness) seedDevice() {
	for i := range 12 {
		h.reading(apitest.AgentA1, "plc-01", "running", "", i, float64(i%2))
	}
	for i := range 20 {
		h.reading(apitest.AgentA1, "plc-01", "temp", "°C", i, 20+float64(i)/10)
	}
	for i, v := range []float64{40, 55, 61} {
		h.reading(apitest.AgentA1, "plc-01", "level", "%", i, v)
	}
	for i, v := range []float64{4, 6} {
		h.reading(apitest.AgentA1, "pump-2", "pressure", "bar", i, v)
	}
	h.reading(apitest.AgentA1, "plc-01", "broken", "", 1, nil)
	h.reading(apitest.AgentB1, "b-secret-plc", "b_secret_pressure", "bar", 1, 987.654)
}

func decodeSuggestion(t *testing.T, r apitest.Reply) Suggestion {
	t.Helper()
	var s Suggestion
	if err := json.Unmarshal([]byte(r.Raw), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// summary writes a layout's widgets as type:metric(s)@device.
func summary(l dashboards.Layout) string {
	var parts []string
	for _, w := range l.Widgets {
		m := w.Source.Metric
		if m == "" {
			m = strings.Join(w.Source.Metrics, "+")
		}
		parts = append(parts, w.Type+":"+m+"@"+w.Source.DeviceName)
	}
	return strings.Join(parts, " ")
}

// TestSuggestionsDeterministicIntegration: without a provider the
// proposal follows the documented rules, and the dashboard layout routes
// store it as it is.
func TestSuggestionsDeterministicIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, config.API{}, licence.FeatureAI)
		h.seedDevice()
		r := h.call("POST", "/dashboard/ai/suggestions", "viewer-a", map[string]any{"deviceUuid": apitest.AgentA1}).Expect(t, "suggest", 200)
		s := decodeSuggestion(t, r)
		if s.Source != "rules" || s.Refinement.Status != "off" || s.Usage != nil {
			t.Errorf("source %q, refinement %+v", s.Source, s.Refinement)
		}
		if got, want := summary(s.Layout), "stat:running@plc-01 gauge:level@plc-01 gauge:pressure@pump-2 line:temp@plc-01"; got != want {
			t.Errorf("widgets %s, want %s", got, want)
		}
		gauge := s.Layout.Widgets[2]
		if *gauge.Options.Min != 3 || *gauge.Options.Max != 7 || gauge.Options.Unit != "bar" {
			t.Errorf("pressure gauge options %+v", gauge.Options)
		}
		if l := s.Layout.Widgets[1]; *l.Options.Min != 0 || *l.Options.Max != 100 {
			t.Errorf("level gauge is not 0..100: %+v", l.Options)
		}
		kinds := map[string]string{}
		for _, m := range s.Metrics {
			kinds[m.Metric] = m.Kind + "/" + m.Widget + "/" + m.Skipped
		}
		for metric, want := range map[string]string{"running": "boolean/w1/", "temp": "numeric/w4/", "broken": "empty//no values to show (failed reads only)"} {
			if kinds[metric] != want {
				t.Errorf("%s: %q, want %q", metric, kinds[metric], want)
			}
		}
		if strings.Contains(r.Raw, "b_secret") {
			t.Errorf("tenant B's metric in A's suggestion: %s", r.Raw)
		}
		// What it proposes, the layout routes take.
		h.call("POST", "/dashboard-layouts/"+apitest.AgentA1, "member-a", map[string]any{"name": "Suggested", "layout": s.Layout}).Expect(t, "store", 201)
		// One device of the agent.
		r = h.call("POST", "/dashboard/ai/suggestions", "viewer-a", map[string]any{"deviceUuid": apitest.AgentA1, "deviceName": "pump-2"}).Expect(t, "one device", 200)
		if got := summary(decodeSuggestion(t, r).Layout); got != "gauge:pressure@pump-2" {
			t.Errorf("pump-2's widgets %s", got)
		}
		// An agent without readings gets an empty layout.
		if s := decodeSuggestion(t, h.call("POST", "/dashboard/ai/suggestions", "viewer-a", map[string]any{"deviceUuid": apitest.AgentA2})); len(s.Layout.Widgets) != 0 {
			t.Errorf("widgets without readings: %s", summary(s.Layout))
		}
	})
}

// refined is a layout a model might answer: the temperature in a wide
// line chart and the running flag beside nothing else.
func refined(mutate func(w map[string]any)) string {
	w := map[string]any{"id": "temp", "type": "line", "title": "Boiler temperature", "x": 0, "y": 0, "w": 12, "h": 5,
		"source": map[string]any{"deviceName": "plc-01", "metric": "temp"}, "options": map[string]any{"unit": "°C", "window": "1h"}}
	if mutate != nil {
		mutate(w)
	}
	b, _ := json.Marshal(map[string]any{"schemaVersion": 1, "columns": 12, "widgets": []any{w}})
	return "Here is the layout:\n```json\n" + string(b) + "\n```"
}

// TestSuggestionsRefinedIntegration: with a provider the model's layout
// replaces the proposal when the dashboard schema and the catalogue
// accept it; otherwise the deterministic proposal stays and the answer
// says why.
func TestSuggestionsRefinedIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		model := newScripted(t,
			completion(refined(nil), 900).then(func(t *testing.T, req Request, _ *http.Request) {
				if len(req.Tools) != 0 || len(req.Messages) != 2 || !strings.Contains(req.Messages[1].Content, `"proposal"`) ||
					!strings.Contains(req.Messages[1].Content, `"kind":"boolean"`) {
					t.Errorf("refinement request %+v", req)
				}
			}),
			completion(refined(func(w map[string]any) { w["w"] = 13 }), 10),
			completion(refined(func(w map[string]any) {
				w["source"] = map[string]any{"deviceName": "b-secret-plc", "metric": "b_secret_pressure"}
			}), 10),
			completion("I cannot help with that.", 10),
			step{status: http.StatusServiceUnavailable, body: map[string]any{"error": map[string]any{"message": "down"}}},
			step{block: true},
		)
		h := newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "m", AITokenBudget: 2000, AITimeout: 300 * time.Millisecond}, licence.FeatureAI)
		h.seedDevice()
		ask := func() Suggestion {
			return decodeSuggestion(t, h.call("POST", "/dashboard/ai/suggestions", "member-a", map[string]any{"deviceUuid": apitest.AgentA1}).Expect(t, "suggest", 200))
		}
		s := ask()
		if s.Source != "model" || s.Refinement.Status != "applied" || summary(s.Layout) != "line:temp@plc-01" || s.Layout.Widgets[0].Title != "Boiler temperature" {
			t.Errorf("applied: %+v", s)
		}
		if s.Usage == nil || s.Usage.Tokens != 900 || s.Usage.Budget != 2000 {
			t.Errorf("usage %+v", s.Usage)
		}
		for _, m := range s.Metrics {
			if m.Metric == "running" && m.Skipped != "left out by the model" {
				t.Errorf("running: %+v", m)
			}
		}
		deterministic := "stat:running@plc-01 gauge:level@plc-01 gauge:pressure@pump-2 line:temp@plc-01"
		for _, want := range []struct{ status, says string }{
			{"rejected", "widgets[0].w: must be 1..12, got 13"},
			{"rejected", `metric "b_secret_pressure" of device "b-secret-plc" is not in the catalogue`},
			{"rejected", "breaks the schema"},
			{"failed", "ai_provider_error: ai provider: status 503: down"},
			{"failed", CodeProviderTimeout},
		} {
			s := ask()
			if s.Source != "rules" || s.Refinement.Status != want.status || !strings.Contains(s.Refinement.Reason, want.says) || summary(s.Layout) != deterministic {
				t.Errorf("want %s saying %q: source %s, refinement %+v, widgets %s", want.status, want.says, s.Source, s.Refinement, summary(s.Layout))
			}
		}
	})
}
