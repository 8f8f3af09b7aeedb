package ai

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/anomaly"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/dashboards"
	"github.com/edgeplat/edgeplat/roles/api/licence"
	"github.com/edgeplat/edgeplat/roles/api/licence/licencetest"
	"github.com/edgeplat/edgeplat/roles/api/readings"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// start is the seeded rows' time; the clock stands an hour later.
var start = time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)

type harness struct {
	t *testing.T
	d *db.DB
	e *gin.Engine
}

// newHarness mounts the routes, with the dashboard layout routes beside
// them, on a seeded database of engine, under a licence granting
// features.
func newHarness(t *testing.T, engine string, cfg config.API, features ...string) *harness {
	t.Helper()
	h := &harness{t: t, d: apitest.SeededDB(t, engine, start, apitest.AgentA1, apitest.AgentA2, apitest.AgentB1)}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	g := h.e.Group("/api/v1")
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	Register(g, Deps{
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Licence:    testLicence(t, features...).RequireFeature(licence.FeatureAI, apitest.WriteError),
		Agents:     registry.NewStore(h.d),
		Readings:   readings.Reader{DB: h.d},
		Incidents:  anomaly.New(anomaly.Deps{DB: h.d}),
		Events:     LogEvents{DB: h.d},
		Config:     cfg,
		Log:        log,
		Now:        apitest.NewClock(start.Add(time.Hour)).Now,
	})
	dashboards.Register(g, dashboards.Deps{DB: h.d, Caller: accountstest.Caller, WriteError: apitest.WriteError, Log: log})
	return h
}

// testLicence is a licence granting features, issued and verified as in
// production.
func testLicence(t *testing.T, features ...string) *licence.Manager {
	t.Helper()
	return licencetest.Manager(t, features...)
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// reading stores one reading of agent at start + minutes; a nil value is
// a failed read.
func (h *harness) reading(agent, device, metric, unit string, minutes int, value any) {
	h.t.Helper()
	tu, err := codec.ParseUUID(apitest.TenantOf(agent))
	if err != nil {
		h.t.Fatal(err)
	}
	apitest.Exec(h.t, h.d, `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, h.d.Dialect().TimeArg(start.Add(time.Duration(minutes)*time.Minute)), agent, metric, value,
		"modbus", unit, "GOOD", device, codec.EncodeID(tu))
}

// incident stores an open incident of agent.
func (h *harness) incident(agent, rule, metric string, value float64) {
	h.t.Helper()
	apitest.Exec(h.t, h.d, `INSERT INTO anomaly_incidents (id, tenant_uuid, rule_key, rule_name, rule_type, severity, agent_uuid, device_name, metric, value, score, peak_score, opened_at)
VALUES ($1, $2, $3, $4, 'threshold', 'high', $5, 'plc', $6, $7, 3, 3, $8)`, codec.NewUUID().String(), apitest.TenantOf(agent), codec.NewUUID().String(),
		rule, agent, metric, value, h.d.Dialect().TimeArg(start.Add(30*time.Minute)))
}

// event stores an audit event whose target is agent.
func (h *harness) event(agent, kind string) {
	h.t.Helper()
	apitest.Exec(h.t, h.d, `INSERT INTO audit_events (tenant_uuid, at, kind, actor, actor_kind, target, outcome) VALUES ($1, $2, $3, 'someone', 'user', $4, 'success')`,
		apitest.TenantOf(agent), h.d.Dialect().TimeArg(start.Add(10*time.Minute)), kind, agent)
}

// step answers one provider call: a status and a body (encoded as JSON
// unless a string), or nothing at all while block is set, until the
// client gives up.
type step struct {
	status int
	body   any
	block  bool
	// check looks at the request before it is answered.
	check func(t *testing.T, req Request, hr *http.Request)
}

// scripted is an OpenAI-compatible chat-completions server that plays a
// script: the nth call gets the nth step. No real model is reachable
// from the tests; this one asks for what the test wants asked.
type scripted struct {
	t     *testing.T
	srv   *httptest.Server
	mu    sync.Mutex
	steps []step
	got   []Request
}

func newScripted(t *testing.T, steps ...step) *scripted {
	s := &scripted{t: t, steps: steps}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scripted) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req Request
	if r.URL.Path != "/v1/chat/completions" || r.Method != http.MethodPost {
		s.t.Errorf("provider called at %s %s", r.Method, r.URL.Path)
	}
	if err := json.Unmarshal(b, &req); err != nil {
		s.t.Errorf("provider request is not a chat request: %v: %s", err, b)
	}
	s.mu.Lock()
	s.got = append(s.got, req)
	n := len(s.got)
	s.mu.Unlock()
	if n > len(s.steps) {
		s.t.Errorf("provider call %d, the script has %d", n, len(s.steps))
		w.WriteHeader(http.StatusInternalServerError)
		return
	}
	st := s.steps[n-1]
	if st.check != nil {
		st.check(s.t, req, r)
	}
	if st.block {
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(st.status)
	if str, ok := st.body.(string); ok {
		_, _ = io.WriteString(w, str)
		return
	}
	_ = json.NewEncoder(w).Encode(st.body)
}

// calls is how many calls the server had.
func (s *scripted) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.got)
}

// url is the provider base URL as api.ai_provider_url takes it.
func (s *scripted) url() string { return s.srv.URL + "/v1" }

// completion is a provider answer: content, tool calls, or both; tokens
// is its usage (none when negative).
func completion(content string, tokens int, calls ...ToolCall) step {
	msg := map[string]any{"role": "assistant", "content": nil}
	if content != "" {
		msg["content"] = content
	}
	if len(calls) > 0 {
		msg["tool_calls"] = calls
	}
	body := map[string]any{"id": "x", "object": "chat.completion", "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}}}
	if tokens >= 0 {
		body["usage"] = map[string]any{"prompt_tokens": tokens / 2, "completion_tokens": tokens - tokens/2, "total_tokens": tokens}
	}
	return step{status: http.StatusOK, body: body}
}

func (s step) then(check func(t *testing.T, req Request, hr *http.Request)) step {
	s.check = check
	return s
}

// toolCall is a call of tool with args.
func toolCall(id, tool string, args any) ToolCall {
	b, err := json.Marshal(args)
	if err != nil {
		panic(err)
	}
	return ToolCall{ID: id, Type: "function", Function: FunctionCall{Name: tool, Arguments: string(b)}}
}

// results maps the tool results of req (the messages of role tool) by
// their call id.
func results(req Request) map[string]string {
	out := map[string]string{}
	for _, m := range req.Messages {
		if m.Role == "tool" {
			out[m.ToolCallID] = m.Content
		}
	}
	return out
}
