package readings

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// insertRouter serves POST /api/v1/readings of tenantA on d with the
// hooks of d replaced by those given.
func insertRouter(t *testing.T, d *db.DB, deps Deps) *gin.Engine {
	e := gin.New()
	v1 := e.Group("/api/v1", func(c *gin.Context) { c.Set("tenant", tenantA); c.Next() })
	deps.DB = d
	deps.Tenant = func(c *gin.Context) (string, bool) { return tenantA, true }
	deps.WriteError = writeError
	deps.Now = func() time.Time { return testNow }
	deps.Log = slog.New(slog.NewTextHandler(t.Output(), nil))
	Register(v1, deps)
	return e
}

func post(t *testing.T, h http.Handler, body any) *httptest.ResponseRecorder {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/api/v1/readings", strings.NewReader(string(raw))))
	return rec
}

// TestBatchOwnershipOneLookupIntegration: POST /readings checks every
// agent of a body in one registry lookup, whatever their number, and
// refuses a body naming a foreign agent by the first reading that names
// one. It used to look up each distinct agent in turn, a round trip per
// agent on a body of up to 1000 of them.
func TestBatchOwnershipOneLookupIntegration(t *testing.T) {
	const n = 300
	agents := make([]string, n)
	for i := range agents {
		agents[i] = fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)
	}
	foreign := map[string]bool{agents[120]: true, agents[250]: true}
	batch := func(agents []string) []map[string]any {
		var b []map[string]any
		for i, a := range agents {
			// Each agent twice: the lookup still names it once.
			for j := range 2 {
				b = append(b, map[string]any{"agentUuid": a, "metricName": "boiler.temp", "value": i,
					"time": testNow.Add(-time.Duration(j+1) * time.Minute).Format(time.RFC3339)})
			}
		}
		return b
	}
	owned := slices.DeleteFunc(slices.Clone(agents), func(a string) bool { return foreign[a] })
	for _, tc := range []struct {
		name   string
		body   []map[string]any
		status int
		msg    string
	}{
		{"some foreign", batch(agents), http.StatusNotFound, `readings[240].agentUuid "` + agents[120] + `" is not an agent of this tenant`},
		{"all owned", batch(owned), http.StatusCreated, fmt.Sprintf(`"inserted":%d`, 2*len(owned))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var (
				mu    sync.Mutex
				calls [][]string
			)
			h := insertRouter(t, dbtest.Migrated(t, "sqlite"), Deps{
				AgentRegistered: func(c *gin.Context, agents []string) (map[string]bool, error) {
					mu.Lock()
					defer mu.Unlock()
					calls = append(calls, agents)
					out := map[string]bool{}
					for _, a := range agents {
						out[a] = !foreign[a]
					}
					return out, nil
				},
			})
			rec := post(t, h, tc.body)
			var got struct {
				Error struct{ Message string }
			}
			_ = json.Unmarshal(rec.Body.Bytes(), &got)
			if rec.Code != tc.status || !strings.Contains(rec.Body.String()+got.Error.Message, tc.msg) {
				t.Fatalf("POST %d readings = %d %s, want %d with %s", len(tc.body), rec.Code, rec.Body, tc.status, tc.msg)
			}
			if len(calls) != 1 {
				t.Fatalf("registry looked up %d times, want once", len(calls))
			}
			if got := len(calls[0]); got != len(tc.body)/2 {
				t.Errorf("lookup named %d agents, want each of the %d once", got, len(tc.body)/2)
			}
		})
	}
}

// TestClockSkewCountedOnceStoredIntegration: POST /readings reports past
// readings to Deps.ClockSkew only once they are stored, so a client
// retrying a failed insert does not count them again; a body refused for a
// future reading reports its future readings and not its past ones, which
// were not accepted.
func TestClockSkewCountedOnceStoredIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	var (
		mu     sync.Mutex
		counts envelope.Skew
	)
	h := insertRouter(t, d, Deps{
		AgentRegistered: testRegistry.registered,
		Clock:           envelope.ClockWindow{MaxFuture: 5 * time.Minute, MaxPast: time.Hour},
		ClockSkew: func(tenant, agent string, s envelope.Skew, now time.Time) {
			mu.Lock()
			defer mu.Unlock()
			counts.Future += s.Future
			counts.Past += s.Past
		},
	})
	at := func(d time.Duration) string { return testNow.Add(d).Format(time.RFC3339) }
	past := func(v int) map[string]any {
		return map[string]any{"agentUuid": agentA1, "metricName": "boiler.temp", "value": v, "time": at(-48*time.Hour + time.Duration(v)*time.Second)}
	}
	future := map[string]any{"agentUuid": agentA1, "metricName": "boiler.temp", "value": 9, "time": at(24 * time.Hour)}
	check := func(step string, rec *httptest.ResponseRecorder, status int, want envelope.Skew) {
		t.Helper()
		if rec.Code != status {
			t.Fatalf("%s: %d %s, want %d", step, rec.Code, rec.Body, status)
		}
		mu.Lock()
		defer mu.Unlock()
		if counts.Future != want.Future || counts.Past != want.Past {
			t.Fatalf("%s: counted %d future and %d past, want %d and %d", step, counts.Future, counts.Past, want.Future, want.Past)
		}
	}
	check("a stored past reading", post(t, h, past(1)), http.StatusCreated, envelope.Skew{Past: 1})
	check("a body refused for a future reading", post(t, h, []any{past(2), future}), http.StatusUnprocessableEntity, envelope.Skew{Past: 1, Future: 1})
	if _, err := d.SQL().ExecContext(t.Context(), `DROP TABLE readings`); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		rec := post(t, h, past(3))
		if rec.Code < http.StatusInternalServerError {
			t.Fatalf("insert into a dropped table, attempt %d: %d %s, want a server error", i+1, rec.Code, rec.Body)
		}
		check(fmt.Sprintf("failed insert, attempt %d", i+1), rec, rec.Code, envelope.Skew{Past: 1, Future: 1})
	}
}
