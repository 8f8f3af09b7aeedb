package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// unknown is an agent and a job that do not exist.
const unknown = "00000000-0000-4000-8000-000000000000"

// sent is one command the recording publisher got.
type sent struct {
	agent, name, job string
}

// pubRecorder is the Publisher of the tests: it keeps what it is given.
type pubRecorder struct {
	mu   sync.Mutex
	sent []sent
}

func (r *pubRecorder) Publish(_, agent codec.UUID, name string, payload []byte) error {
	var p struct {
		JobID string `json:"jobId"`
	}
	if err := json.Unmarshal(payload, &p); err != nil {
		return err
	}
	if name == control.CmdJob {
		if _, err := control.DecodeJobDispatch(payload); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent = append(r.sent, sent{agent.String(), name, p.JobID})
	return nil
}

// take returns what was sent since the last take, as "name agent".
func (r *pubRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, s := range r.sent {
		out = append(out, s.name+" "+s.agent)
	}
	r.sent = nil
	slices.Sort(out)
	return out
}

// targets stands in for the registry: ownership from the agents table,
// fleets and tag queries from maps.
type targets struct {
	d       *db.DB
	fleets  map[string][]string
	queries map[string][]string
}

var (
	errNoFleet  = errors.New("no such fleet")
	errBadQuery = errors.New("bad tag query")
)

func (t *targets) Owned(ctx context.Context, tenant string, uuids []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, u := range uuids {
		var n int
		if err := t.d.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM agents WHERE uuid = $1 AND tenant_uuid = $2`, u, tenant).Scan(&n); err != nil {
			return nil, err
		}
		out[u] = n == 1
	}
	return out, nil
}

func (t *targets) FleetMembers(_ context.Context, tenant, id string) ([]string, error) {
	m, ok := t.fleets[tenant+"/"+id]
	if !ok {
		return nil, errNoFleet
	}
	return m, nil
}

func (t *targets) AgentsMatching(_ context.Context, tenant string, tags map[string]json.RawMessage) ([]string, error) {
	if len(tags) == 0 {
		return nil, errBadQuery
	}
	var conds []string
	for k, v := range tags {
		var s string
		if json.Unmarshal(v, &s) != nil {
			return nil, errBadQuery
		}
		conds = append(conds, k+"="+s)
	}
	slices.Sort(conds)
	return t.queries[tenant+"/"+strings.Join(conds, ",")], nil
}

// harness is the jobs routes on /api/v1 behind stand-ins for the API's
// authenticators: the bearer token names a test caller, and the device key
// "key-<agent>" authenticates that agent.
type harness struct {
	t       *testing.T
	d       *db.DB
	e       *gin.Engine
	clock   *apitest.Clock
	pub     *pubRecorder
	deps    Deps
	sched   *Scheduler
	streams streamstore.Store
	audit   accountstest.AuditLog
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	d := apitest.SeededDB(t, engine, start, apitest.AgentA1, apitest.AgentA2, apitest.AgentA3, apitest.AgentB1)
	streams, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Close() })
	h := &harness{t: t, d: d, clock: apitest.NewClock(start), pub: &pubRecorder{}, streams: streams}
	h.deps = Deps{
		DB: d,
		Targets: &targets{d: d,
			fleets:  map[string][]string{apitest.TenantA + "/north": {apitest.AgentA1, apitest.AgentA2}, apitest.TenantA + "/empty": nil},
			queries: map[string][]string{apitest.TenantA + "/line=3": {apitest.AgentA2, apitest.AgentA3}}},
		IsNotFound: func(err error) bool { return errors.Is(err, errNoFleet) },
		IsInvalid:  func(err error) bool { return errors.Is(err, errBadQuery) },
		Publisher:  h.pub,
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Audit:      h.audit.Audit,
		Record:     h.audit.Record,
		DeviceAuth: func(c *gin.Context) {
			agent := strings.TrimPrefix(c.GetHeader("X-Device-API-Key"), "key-")
			if agent == "" {
				apitest.WriteError(c, 401, "unauthorized", "missing key")
				return
			}
			if agent != c.Param("uuid") {
				apitest.WriteError(c, 403, "forbidden", "this device key belongs to another agent")
				return
			}
			c.Set("agent", agent)
		},
		Device: func(c *gin.Context) (string, string, bool) {
			agent := c.GetString("agent")
			if agent == "" {
				return "", "", false
			}
			return apitest.TenantOf(agent), agent, true
		},
		Streams: streams,
		Now:     h.clock.Now,
	}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), h.e.Group("/api/v1"), h.deps)
	h.sched = NewScheduler(h.deps, time.Second).(*Scheduler)
	return h
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// agentCall calls an agent route with agent's device key.
func (h *harness) agentCall(method, path, agent string, body any) apitest.Reply {
	h.t.Helper()
	var raw string
	if body != nil {
		b, _ := json.Marshal(body)
		raw = string(b)
	}
	req := httptestRequest(method, "/api/v1"+path, raw)
	req.Header.Set("X-Device-API-Key", "key-"+agent)
	return apitest.Do(h.t, h.e, req)
}

func (h *harness) pass() {
	h.t.Helper()
	if err := h.sched.Pass(h.t.Context()); err != nil {
		h.t.Fatalf("scheduler pass: %v", err)
	}
}

// dispatch posts a job as admin-a and returns its id.
func (h *harness) dispatch(body map[string]any) string {
	h.t.Helper()
	r := h.call("POST", "/jobs/execute", "admin-a", body).Expect(h.t, "dispatch", 201)
	return r.Str("jobId")
}

// status returns the execution's status and reason.
func (h *harness) status(job, agent string) (string, string) {
	h.t.Helper()
	r := h.call("GET", "/agents/"+agent+"/jobs/"+job, "member-a", nil).Expect(h.t, "read execution", 200)
	return r.Str("status"), r.Str("statusReason")
}

func (h *harness) jobStatus(job string) string {
	h.t.Helper()
	return h.call("GET", "/jobs/executions/"+job, "member-a", nil).Expect(h.t, "read job", 200).Str("status")
}

// forEngines runs fn on a fresh harness of each engine, in parallel.
func forEngines(t *testing.T, fn func(t *testing.T, h *harness)) {
	apitest.ForEngines(t, func(t *testing.T, engine string) { fn(t, newHarness(t, engine)) })
}

func httptestRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}
