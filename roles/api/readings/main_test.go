package readings

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

// TestMain fails the run if a test leaves a goroutine behind, such as a
// database pool that was never closed.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

// tenantHeader stands in for the authentication middleware: the test
// router takes the caller's tenant from it.
const tenantHeader = "X-Test-Tenant"

// writeError is the API's error shape, as roles/api renders it.
func writeError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

// newRouter serves the endpoints under /api/v1 for d, with the tenant
// taken from tenantHeader.
func newRouter(t testing.TB, d *db.DB, lim query.Limits, now time.Time) *gin.Engine {
	e := gin.New()
	v1 := e.Group("/api/v1", func(c *gin.Context) {
		if t := c.GetHeader(tenantHeader); t != "" {
			c.Set("tenant", t)
		}
		c.Next()
	})
	Register(v1, Deps{
		DB: d,
		Tenant: func(c *gin.Context) (string, bool) {
			t, ok := c.Get("tenant")
			s, _ := t.(string)
			return s, ok
		},
		WriteError:      writeError,
		AgentRegistered: testRegistry.registered,
		Limits:          lim,
		Now:             func() time.Time { return now },
		Log:             slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	return e
}

// registry stands in for the agent registry: agents by tenant.
type registry map[string][]string

// testRegistry registers the fixture's agents: A1, A2 and A3 to tenant A,
// B1 to tenant B. agentC is nobody's.
var testRegistry = registry{tenantA: {agentA1, agentA2, agentA3}, tenantB: {agentB1}}

func (r registry) registered(c *gin.Context, agents []string) (map[string]bool, error) {
	t, _ := c.Get("tenant")
	tenant, _ := t.(string)
	owned := map[string]bool{}
	for _, a := range agents {
		if slices.Contains(r[tenant], a) {
			owned[a] = true
		}
	}
	return owned, nil
}

// integrationDB opens and migrates a fresh database of the given engine.
func integrationDB(t *testing.T, engine string) *db.DB { return dbtest.Migrated(t, engine) }

// apiCase is one request and what it must answer: the exact JSON body for
// a success, the error code and a part of the message for a failure.
type apiCase struct {
	name         string
	method, path string
	tenant       string // "" sends no tenant
	body         string
	status       int
	want         string // success: the whole body, JSON-equal
	code, msg    string // failure: error code, and a substring of the message
}

// agent ids in expectations, replaced before comparing.
var ids = strings.NewReplacer("$A1", agentA1, "$A2", agentA2, "$A3", agentA3, "$B1", agentB1)

func (tc apiCase) run(t *testing.T, h http.Handler) {
	t.Helper()
	method := tc.method
	if method == "" {
		method = http.MethodGet
	}
	var body *bytes.Reader
	if tc.body != "" {
		body = bytes.NewReader([]byte(ids.Replace(tc.body)))
	} else {
		body = bytes.NewReader(nil)
	}
	req := httptest.NewRequest(method, ids.Replace(tc.path), body)
	if tc.tenant != "" {
		req.Header.Set(tenantHeader, tc.tenant)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != tc.status {
		t.Fatalf("%s %s = %d %s, want %d", method, req.URL, rec.Code, rec.Body, tc.status)
	}
	var got any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, rec.Body)
	}
	if tc.status >= 400 {
		var e struct {
			Error struct{ Code, Message string }
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &e)
		if e.Error.Code != tc.code || !strings.Contains(e.Error.Message, ids.Replace(tc.msg)) {
			t.Errorf("error = %s, want code %q and a message containing %q", rec.Body, tc.code, tc.msg)
		}
		return
	}
	var want any
	if err := json.Unmarshal([]byte(ids.Replace(tc.want)), &want); err != nil {
		t.Fatalf("bad expectation: %v: %s", err, tc.want)
	}
	if !reflect.DeepEqual(got, want) {
		g, _ := json.MarshalIndent(got, "", "  ")
		w, _ := json.MarshalIndent(want, "", "  ")
		t.Errorf("%s %s:\ngot  %s\nwant %s", method, req.URL, g, w)
	}
}
