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
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

const (
	tenantA = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	tenantB = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	agentA1 = "a1000000-0000-4000-8000-000000000001"
	agentA2 = "a2000000-0000-4000-8000-000000000002"
	agentA3 = "a3000000-0000-4000-8000-000000000003"
	agentB1 = "b1000000-0000-4000-8000-000000000001"
	unknown = "00000000-0000-4000-8000-000000000000"
)

var callers = map[string]accounts.Caller{
	"admin-a":  {UserID: "11111111-1111-4111-8111-111111111111", TenantUUID: tenantA, Role: accounts.RoleAdmin},
	"member-a": {UserID: "22222222-2222-4222-8222-222222222222", TenantUUID: tenantA, Role: accounts.RoleMember},
	"admin-b":  {UserID: "33333333-3333-4333-8333-333333333333", TenantUUID: tenantB, Role: accounts.RoleAdmin},
}

var engines = []string{"postgres", "sqlite"}

// clock is the fake time every test moves by hand.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

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
	clock   *clock
	pub     *pubRecorder
	deps    Deps
	sched   *Scheduler
	streams streamstore.Store

	mu     sync.Mutex
	events []accounts.Event
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	d := dbtest.Migrated(t, engine)
	ctx := t.Context()
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	for _, tenant := range []string{tenantA, tenantB} {
		if _, err := d.SQL().ExecContext(ctx, `INSERT INTO tenants (uuid, name, created_at) VALUES ($1, $2, $3)`,
			tenant, "tenant "+tenant[:4], d.Dialect().TimeArg(start)); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range [][2]string{{agentA1, tenantA}, {agentA2, tenantA}, {agentA3, tenantA}, {agentB1, tenantB}} {
		if _, err := d.SQL().ExecContext(ctx, `INSERT INTO agents (uuid, tenant_uuid, name, created_at, updated_at) VALUES ($1, $2, $3, $4, $4)`,
			a[0], a[1], "agent "+a[0][:2], d.Dialect().TimeArg(start)); err != nil {
			t.Fatal(err)
		}
	}
	streams, err := memory.New(memory.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { streams.Close() })
	h := &harness{t: t, d: d, clock: &clock{now: start}, pub: &pubRecorder{}, streams: streams}
	h.deps = Deps{
		DB: d,
		Targets: &targets{d: d,
			fleets:  map[string][]string{tenantA + "/north": {agentA1, agentA2}, tenantA + "/empty": nil},
			queries: map[string][]string{tenantA + "/line=3": {agentA2, agentA3}}},
		IsNotFound: func(err error) bool { return errors.Is(err, errNoFleet) },
		IsInvalid:  func(err error) bool { return errors.Is(err, errBadQuery) },
		Publisher:  h.pub,
		Caller: func(c *gin.Context) (accounts.Caller, bool) {
			who, ok := callers[strings.TrimPrefix(c.GetHeader("Authorization"), "Bearer ")]
			return who, ok
		},
		WriteError: apitest.WriteError,
		Audit:      func(_ *gin.Context, e accounts.Event) { h.record(e) },
		Record:     func(_ context.Context, e accounts.Event) error { h.record(e); return nil },
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
			tenant := tenantA
			if agent == agentB1 {
				tenant = tenantB
			}
			return tenant, agent, agent != ""
		},
		Streams: streams,
		Now:     h.clock.Now,
	}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), h.e.Group("/api/v1"), h.deps)
	h.sched = NewScheduler(h.deps, time.Second).(*Scheduler)
	return h
}

func (h *harness) record(e accounts.Event) {
	h.mu.Lock()
	h.events = append(h.events, e)
	h.mu.Unlock()
}

// kinds returns the audit kinds recorded since the last call.
func (h *harness) kinds() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, e := range h.events {
		out = append(out, e.Kind)
	}
	h.events = nil
	slices.Sort(out)
	return out
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
	return serve(h.t, h.e, req)
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
	for _, engine := range engines {
		t.Run(engine, func(t *testing.T) {
			t.Parallel()
			fn(t, newHarness(t, engine))
		})
	}
}

func httptestRequest(method, path, body string) *http.Request {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// serve answers req as apitest.Call does.
func serve(t testing.TB, h http.Handler, req *http.Request) apitest.Reply {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := apitest.Reply{Status: rec.Code, Raw: rec.Body.String()}
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &r.Body); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object: %v", req.Method, req.URL, r.Raw, err)
		}
	}
	return r
}
