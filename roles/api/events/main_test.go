package events

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

type harness struct {
	t     *testing.T
	d     *db.DB
	e     *gin.Engine
	reg   *registry.Store
	acc   *accounts.Store
	snaps *Snapshots

	mu      sync.Mutex
	changes []registry.TargetStateChange
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	start := time.Now().UTC().Add(-time.Hour)
	h := &harness{t: t, d: apitest.SeededDB(t, engine, start, apitest.AgentA1, apitest.AgentA2, apitest.AgentB1)}
	h.reg, h.acc = registry.NewStore(h.d), accounts.NewStore(h.d)
	// What api.New hangs on the store to tell the agent: the test sees
	// every committed change the same way.
	h.reg.OnTargetStateChange(func(c registry.TargetStateChange) {
		h.mu.Lock()
		h.changes = append(h.changes, c)
		h.mu.Unlock()
	})
	h.snaps = NewSnapshots(h.d, NewMetrics(nil))
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), Deps{
		DB:         h.d,
		Registry:   h.reg,
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Audit: func(c *gin.Context, e accounts.Event) {
			if err := h.acc.Record(c.Request.Context(), e); err != nil {
				t.Errorf("audit: %v", err)
			}
		},
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	return h
}

func forEngines(t *testing.T, fn func(t *testing.T, h *harness)) {
	apitest.ForEngines(t, func(t *testing.T, engine string) { fn(t, newHarness(t, engine)) })
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// setTarget writes agent's target state as PUT /agents/:uuid/target-state
// does and returns the version.
func (h *harness) setTarget(agent, doc string) int64 {
	h.t.Helper()
	ts, err := h.reg.SetTargetState(h.t.Context(), apitest.TenantOf(agent), agent, json.RawMessage(doc), "tester", false)
	if err != nil {
		h.t.Fatalf("set target state %s: %v", doc, err)
	}
	return ts.Version
}

// report hands Snapshots a state report of agent as the report handler
// does.
func (h *harness) report(agent string, doc map[string]any, at time.Time) {
	h.t.Helper()
	h.reportIn(apitest.TenantOf(agent), agent, doc, at)
}

// reportIn is report for an agent the seeded registry may not hold.
func (h *harness) reportIn(tenant, agent string, doc map[string]any, at time.Time) {
	h.t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	tu, _ := codec.ParseUUID(tenant)
	if err := h.snaps.Record(h.t.Context(), codec.EncodeID(tu), agent, b, at); err != nil {
		h.t.Fatalf("record state report: %v", err)
	}
}

func (h *harness) audit(e accounts.Event) {
	h.t.Helper()
	if err := h.acc.Record(h.t.Context(), e); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) count(q string, args ...any) int {
	h.t.Helper()
	var n int
	if err := h.d.SQL().QueryRowContext(h.t.Context(), q, args...).Scan(&n); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return n
}

// events lists the events of a list answer as kind@agent strings.
func kinds(r apitest.Reply) []string {
	var out []string
	for _, e := range r.List("events") {
		m := e.(map[string]any)
		out = append(out, fmt.Sprint(m["kind"]))
	}
	return out
}

func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return "?" + v.Encode()
}
