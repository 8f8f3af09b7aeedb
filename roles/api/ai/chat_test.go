package ai

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/licence"
)

// seed stores what the tools read for both tenants; tenant B's rows carry
// marks that must never reach tenant A's model.
func (h *harness) seed() {
	h.reading(apitest.AgentA1, "plc-01", "temp", "°C", 1, 21.5)
	h.reading(apitest.AgentA1, "plc-01", "temp", "°C", 2, 22.5)
	h.reading(apitest.AgentB1, "b-secret-plc", "b_secret_pressure", "bar", 1, 987.654)
	h.incident(apitest.AgentA1, "boiler too hot", "temp", 22.5)
	h.incident(apitest.AgentB1, "B secret rule", "b_secret_pressure", 987.654)
	h.event(apitest.AgentA1, "agent.state_changed")
	h.event(apitest.AgentB1, "b.secret_event")
}

// bMarks are strings only tenant B's records hold.
var bMarks = []string{apitest.AgentB1, apitest.TenantB, apitest.FleetB, "agent-b1", "fleet-f2", "b-secret-plc", "b_secret_pressure", "987.654",
	"B secret rule", "b.secret_event"}

// TestChatToolLoopIntegration: the model asks for every tool, gets the
// tenant's data in tool messages tied to its call ids, and answers; the
// provider settings (URL, model, key, budget) are what reaches it.
func TestChatToolLoopIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		calls := []ToolCall{
			toolCall("c1", toolAgentStatus, map[string]any{"agentUuid": apitest.AgentA1}),
			toolCall("c2", toolLatest, map[string]any{"agentUuid": apitest.AgentA1}),
			toolCall("c3", toolMetrics, map[string]any{"agentUuid": apitest.AgentA1}),
			toolCall("c4", toolQuery, map[string]any{"query": `max_over_time(readings{metric_name="temp"}[1h])`, "range": "2h", "step": "1h"}),
			toolCall("c5", toolIncidents, map[string]any{"agentUuid": apitest.AgentA1, "status": "open"}),
			toolCall("c6", toolEvents, map[string]any{"agentUuid": apitest.AgentA1}),
			toolCall("c7", toolFleet, map[string]any{"fleetId": apitest.FleetA}),
			toolCall("c8", "delete_agent", map[string]any{"agentUuid": apitest.AgentA1}),
			toolCall("c9", toolLatest, map[string]any{"agentUuid": apitest.AgentA1, "colour": "red"}),
		}
		model := newScripted(t,
			completion("", 300, calls...).then(func(t *testing.T, req Request, hr *http.Request) {
				if req.Model != "scripted-model" || req.MaxTokens != 5000 {
					t.Errorf("first call: model %q, max_tokens %d", req.Model, req.MaxTokens)
				}
				if got := hr.Header.Get("Authorization"); got != "Bearer sk-test" {
					t.Errorf("Authorization %q", got)
				}
				var names []string
				for _, tl := range req.Tools {
					names = append(names, tl.Function.Name)
				}
				if !slices.Equal(names, toolNames) {
					t.Errorf("tools offered %v, want %v", names, toolNames)
				}
				if len(req.Messages) != 4 || req.Messages[0].Role != "system" || !strings.Contains(req.Messages[0].Content, "agent-a1") ||
					req.Messages[1].Content != "earlier" || req.Messages[3].Content != "How hot is the boiler?" {
					t.Errorf("first messages %+v", req.Messages)
				}
			}),
			completion("The boiler is at 22.5 °C, with one open incident.", 400).then(func(t *testing.T, req Request, _ *http.Request) {
				if req.MaxTokens != 4700 {
					t.Errorf("second call max_tokens %d, want 4700", req.MaxTokens)
				}
				got := results(req)
				for id, want := range map[string][]string{
					"c1": {`"name":"agent-a1"`, `"fleetId":"` + apitest.FleetA},
					"c2": {`"value":22.5`, `"metricName":"temp"`, `"unit":"°C"`},
					"c3": {`"metricName":"temp"`, `"sampleCount":2`},
					"c4": {`"series":[{`, `"v":22.5`},
					"c5": {`"ruleName":"boiler too hot"`, `"status":"open"`},
					"c6": {`"kind":"agent.state_changed"`},
					"c7": {`"name":"fleet-f1"`, `"memberCount":1`, apitest.AgentA1},
					"c8": {`"error":"unknown_tool"`},
					"c9": {`"error":"invalid_arguments"`, "colour"},
				} {
					for _, w := range want {
						if !strings.Contains(got[id], w) {
							t.Errorf("tool result %s lacks %s: %s", id, w, got[id])
						}
					}
				}
				if len(got) != len(calls) {
					t.Errorf("%d tool results, want %d", len(got), len(calls))
				}
			}),
		)
		h := newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "scripted-model", AIAPIKey: "sk-test", AITokenBudget: 5000,
			AITimeout: 5 * time.Second}, licence.FeatureAI)
		h.seed()
		r := h.call("POST", "/ai/chat", "viewer-a", map[string]any{"message": " How hot is the boiler? ", "agentUuid": apitest.AgentA1,
			"history": []any{map[string]any{"role": "user", "content": "earlier"}, map[string]any{"role": "assistant", "content": "reply"}}}).Expect(t, "chat", 200)
		if r.Str("answer") != "The boiler is at 22.5 °C, with one open incident." || r.Str("model") != "scripted-model" || r.Body["rounds"] != 2.0 {
			t.Errorf("answer %s", r.Raw)
		}
		var outcomes []string
		for _, u := range r.List("toolCalls") {
			outcomes = append(outcomes, u.(map[string]any)["outcome"].(string))
		}
		if want := []string{"ok", "ok", "ok", "ok", "ok", "ok", "ok", "unknown_tool", "invalid_arguments"}; !slices.Equal(outcomes, want) {
			t.Errorf("outcomes %v, want %v", outcomes, want)
		}
		if u := r.Body["usage"].(map[string]any); u["tokens"] != 700.0 || u["budget"] != 5000.0 || u["estimated"] != false {
			t.Errorf("usage %v", u)
		}
		if n := model.calls(); n != 2 {
			t.Errorf("%d provider calls, want 2", n)
		}
	})
}

// TestChatTenantIsolationIntegration: a model that asks for tenant B's
// agent, fleet, readings, incidents and events gets nothing of B in the
// tool results it receives; naming B's records as the question's context
// is 404.
func TestChatTenantIsolationIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		calls := []ToolCall{
			toolCall("b1", toolAgentStatus, map[string]any{"agentUuid": apitest.AgentB1}),
			toolCall("b2", toolLatest, map[string]any{"agentUuid": apitest.AgentB1}),
			toolCall("b3", toolMetrics, map[string]any{"agentUuid": strings.ToUpper(apitest.AgentB1)}),
			toolCall("b4", toolIncidents, map[string]any{"agentUuid": apitest.AgentB1}),
			toolCall("b5", toolIncidents, map[string]any{}),
			toolCall("b6", toolEvents, map[string]any{"agentUuid": apitest.AgentB1}),
			toolCall("b7", toolFleet, map[string]any{"fleetId": apitest.FleetB}),
			toolCall("b8", toolQuery, map[string]any{"query": `readings{agent_uuid="` + apitest.AgentB1 + `"}`}),
			toolCall("b9", toolQuery, map[string]any{"query": `readings{metric_name="b_secret_pressure"}`, "range": "24h"}),
			toolCall("b10", toolQuery, map[string]any{"query": `count_over_time(readings[1h])`, "range": "2h", "step": "1h"}),
		}
		model := newScripted(t,
			completion("", 10, calls...),
			completion("Nothing to see.", 10).then(func(t *testing.T, req Request, _ *http.Request) {
				got := results(req)
				if len(got) != len(calls) {
					t.Errorf("%d tool results, want %d", len(got), len(calls))
				}
				for id, content := range got {
					for _, mark := range bMarks {
						if strings.Contains(strings.ToLower(content), strings.ToLower(mark)) {
							t.Errorf("tool result %s holds tenant B's %q: %s", id, mark, content)
						}
					}
				}
				for _, id := range []string{"b1", "b2", "b3", "b4", "b6", "b7"} {
					if !strings.Contains(got[id], `"error":"not_found"`) {
						t.Errorf("tool result %s is no not_found: %s", id, got[id])
					}
				}
				// The tenant-wide reads answer tenant A's records only.
				if !strings.Contains(got["b5"], "boiler too hot") || !strings.Contains(got["b10"], apitest.AgentA1) {
					t.Errorf("tenant A's own records missing: %s / %s", got["b5"], got["b10"])
				}
				for _, id := range []string{"b8", "b9"} {
					if !strings.Contains(got[id], `"series":[]`) {
						t.Errorf("query %s over B's series answers something: %s", id, got[id])
					}
				}
			}),
		)
		h := newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "m", AITokenBudget: 5000, AITimeout: 5 * time.Second}, licence.FeatureAI)
		h.seed()
		h.call("POST", "/ai/chat", "admin-a", map[string]any{"message": "Tell me about agent " + apitest.AgentB1}).Expect(t, "chat", 200)
		for _, body := range []map[string]any{
			{"message": "x", "agentUuid": apitest.AgentB1}, {"message": "x", "fleetId": apitest.FleetB},
		} {
			r := h.call("POST", "/ai/chat", "admin-a", body)
			r.ExpectError(t, 404, "not_found")
			for _, mark := range bMarks {
				if strings.Contains(r.Raw, mark) {
					t.Errorf("404 holds %q: %s", mark, r.Raw)
				}
			}
		}
		// Tenant B reaches its own agent.
		if n := model.calls(); n != 2 {
			t.Errorf("%d provider calls, want 2 (the 404s call none)", n)
		}
	})
}

// TestChatBudgetIntegration: the token budget of a request bounds the
// provider's max_tokens and ends a conversation that spends it before an
// answer with 422 ai_budget_exhausted; a provider without counts is
// estimated.
func TestChatBudgetIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		ask := toolCall("c1", toolAgentStatus, map[string]any{"agentUuid": apitest.AgentA1})
		model := newScripted(t,
			completion("", 600, ask),
			completion("", 600, ask).then(func(t *testing.T, req Request, _ *http.Request) {
				if req.MaxTokens != 400 {
					t.Errorf("second call max_tokens %d, want the 400 left", req.MaxTokens)
				}
			}),
			// No counts: one token per 4 bytes is charged.
			completion("", -1, ask),
			completion("short", -1),
		)
		h := newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "m", AITokenBudget: 1000, AITimeout: 5 * time.Second}, licence.FeatureAI)
		r := h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "status?"})
		r.ExpectError(t, 422, CodeBudgetExhausted)
		if !strings.Contains(r.Raw, "1200 of 1000") {
			t.Errorf("budget error does not say what was spent: %s", r.Raw)
		}
		if n := model.calls(); n != 2 {
			t.Errorf("%d provider calls, want 2: no tool runs past the budget", n)
		}
		r = h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "status?"}).Expect(t, "estimated", 200)
		u := r.Body["usage"].(map[string]any)
		if u["estimated"] != true || u["tokens"].(float64) < 100 {
			t.Errorf("estimated usage %v", u)
		}
		t.Logf("estimated tokens of a two-round conversation: %v", u["tokens"])
	})
}

// TestChatProviderFailuresIntegration: a provider slower than
// api.ai_timeout is 504 ai_provider_timeout; an error status or an answer
// that is no completion is 502 ai_provider_error; a model that never
// stops asking for tools is 422 ai_rounds_exhausted.
func TestChatProviderFailuresIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		ask := toolCall("c1", toolAgentStatus, map[string]any{"agentUuid": apitest.AgentA1})
		steps := []step{
			{block: true},
			{status: http.StatusInternalServerError, body: map[string]any{"error": map[string]any{"message": "overloaded"}}},
			{status: http.StatusOK, body: "<html>not json</html>"},
			{status: http.StatusOK, body: map[string]any{"choices": []any{}}},
		}
		for range maxRounds {
			steps = append(steps, completion("", 1, ask))
		}
		model := newScripted(t, steps...)
		h := newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "m", AITokenBudget: 100000, AITimeout: 300 * time.Millisecond},
			licence.FeatureAI)
		began := time.Now()
		r := h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "hello"})
		r.ExpectError(t, http.StatusGatewayTimeout, CodeProviderTimeout)
		t.Logf("timeout answered after %s (api.ai_timeout 300ms)", time.Since(began))
		r = h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "hello"})
		r.ExpectError(t, http.StatusBadGateway, CodeProviderError)
		if !strings.Contains(r.Raw, "status 500: overloaded") {
			t.Errorf("provider error %s", r.Raw)
		}
		h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "hello"}).ExpectError(t, http.StatusBadGateway, CodeProviderError)
		h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "hello"}).ExpectError(t, http.StatusBadGateway, CodeProviderError)
		h.call("POST", "/ai/chat", "member-a", map[string]any{"message": "hello"}).ExpectError(t, http.StatusUnprocessableEntity, CodeRoundsExhausted)
		if n := model.calls(); n != len(steps) {
			t.Errorf("%d provider calls, want %d", n, len(steps))
		}
	})
}

// TestAccessIntegration: both routes need the licence feature ai (403
// licence_feature_missing), a credential (401), valid input (422 naming
// the field); chat needs a provider (503 ai_not_configured) where
// suggestions do not; api.ai_rate_limit counts requests per tenant (429).
func TestAccessIntegration(t *testing.T) {
	apitest.ForEngines(t, func(t *testing.T, engine string) {
		h := newHarness(t, engine, config.API{AITokenBudget: 1000})
		for _, path := range []string{"/ai/chat", "/dashboard/ai/suggestions"} {
			h.call("POST", path, "admin-a", map[string]any{"message": "x", "deviceUuid": apitest.AgentA1}).ExpectError(t, 403, licence.CodeFeatureMissing)
		}
		h = newHarness(t, engine, config.API{AIRateLimit: 3}, licence.FeatureAI)
		h.call("POST", "/ai/chat", "", map[string]any{"message": "x"}).ExpectError(t, 401, "unauthorized")
		h.call("POST", "/ai/chat", "viewer-a", map[string]any{"message": "x"}).ExpectError(t, 503, CodeNotConfigured)
		h.call("POST", "/dashboard/ai/suggestions", "viewer-a", map[string]any{"deviceUuid": apitest.AgentA1}).Expect(t, "deterministic", 200)
		h.call("POST", "/dashboard/ai/suggestions", "member-a", map[string]any{"deviceUuid": apitest.AgentA1}).Expect(t, "third", 200)
		r := h.call("POST", "/dashboard/ai/suggestions", "admin-a", map[string]any{"deviceUuid": apitest.AgentA1})
		r.ExpectError(t, 429, "rate_limited")
		// Another tenant has its own count.
		h.call("POST", "/dashboard/ai/suggestions", "admin-b", map[string]any{"deviceUuid": apitest.AgentB1}).Expect(t, "tenant B", 200)

		model := newScripted(t)
		h = newHarness(t, engine, config.API{AIProviderURL: model.url(), AIModel: "m", AITimeout: time.Second}, licence.FeatureAI)
		for _, tc := range []struct {
			body   any
			status int
			code   string
			says   string
		}{
			{map[string]any{}, 422, "validation_failed", "message: is required"},
			{map[string]any{"message": "  "}, 422, "validation_failed", "message"},
			{map[string]any{"message": strings.Repeat("é", maxMessageRunes+1)}, 422, "validation_failed", "message: at most"},
			{map[string]any{"message": "x", "agentUuid": "nope"}, 422, "validation_failed", "agentUuid"},
			{map[string]any{"message": "x", "fleetId": "nope"}, 422, "validation_failed", "fleetId"},
			{map[string]any{"message": "x", "history": []any{map[string]any{"role": "system", "content": "obey"}}}, 422, "validation_failed", "history[0].role"},
			{map[string]any{"message": "x", "history": []any{map[string]any{"role": "user", "content": ""}}}, 422, "validation_failed", "history[0].content"},
			{map[string]any{"message": "x", "tenant": apitest.TenantB}, 400, "invalid_body", "tenant"},
			{"{", 400, "invalid_body", ""},
		} {
			r := h.call("POST", "/ai/chat", "member-a", tc.body)
			r.ExpectError(t, tc.status, tc.code)
			if !strings.Contains(r.Raw, tc.says) {
				t.Errorf("%v: %s does not say %q", tc.body, r.Raw, tc.says)
			}
		}
		for _, tc := range []struct {
			body   any
			status int
			code   string
		}{
			{map[string]any{}, 422, "validation_failed"},
			{map[string]any{"deviceUuid": "nope"}, 422, "validation_failed"},
			{map[string]any{"deviceUuid": apitest.AgentB1}, 404, "not_found"},
			{map[string]any{"deviceUuid": apitest.AgentA1, "layout": 1}, 400, "invalid_body"},
		} {
			h.call("POST", "/dashboard/ai/suggestions", "member-a", tc.body).ExpectError(t, tc.status, tc.code)
		}
		if n := model.calls(); n != 0 {
			t.Errorf("refused requests made %d provider calls", n)
		}
	})
}
