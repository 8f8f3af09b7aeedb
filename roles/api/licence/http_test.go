package licence

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/config"
)

func writeTestError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

type errBody struct {
	Error struct{ Code, Message string }
}

func TestRoutes(t *testing.T) {
	gin.SetMode(gin.TestMode)
	ed := edKeyPair(t)
	dir := t.TempDir()
	licFile := filepath.Join(dir, "licence.jwt")
	c := goodClaims()
	c.MaxAgents = 10
	raw, err := Issue(ed.privPEM, c)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(licFile, []byte(raw), 0o600); err != nil {
		t.Fatal(err)
	}
	m, _ := loadAt(t, config.Licence{Key: licFile, PublicKey: ed.pubPEM}, testNow)

	agents, usageErr := 4, error(nil)
	usage := func(context.Context) (Usage, error) { return Usage{Agents: agents}, usageErr }
	adminOnly := func(c *gin.Context) {
		if c.GetHeader("X-Admin") != "yes" {
			writeTestError(c, http.StatusForbidden, "forbidden", "admin only")
		}
	}
	e := gin.New()
	v1 := e.Group("/api/v1")
	m.Routes(v1, usage, adminOnly, writeTestError)
	v1.GET("/export", m.RequireFeature(FeatureExport, writeTestError), func(c *gin.Context) { c.String(http.StatusOK, "csv") })
	v1.GET("/rules", m.RequireFeature(FeatureCorrelationRules, writeTestError), func(c *gin.Context) { c.String(http.StatusOK, "rules") })

	do := func(method, path string, admin bool) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, nil)
		if admin {
			req.Header.Set("X-Admin", "yes")
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	decode := func(rec *httptest.ResponseRecorder, v any) {
		t.Helper()
		if err := json.Unmarshal(rec.Body.Bytes(), v); err != nil {
			t.Fatalf("body %s: %v", rec.Body, err)
		}
	}

	rec := do("GET", "/api/v1/license", false)
	var lic struct {
		State, Customer string
		MaxAgents       int
		Features        []string
		ExpiresAt       string
		Usage           *UsageReport
	}
	decode(rec, &lic)
	if rec.Code != 200 || lic.State != StateValid || lic.Customer != "Acme Plant 3" || lic.MaxAgents != 10 || len(lic.Features) != 2 ||
		lic.ExpiresAt == "" || lic.Usage == nil || lic.Usage.Agents != 4 || *lic.Usage.AgentsRemaining != 6 {
		t.Errorf("GET /license = %d %s", rec.Code, rec.Body)
	}

	rec = do("GET", "/api/v1/billing/usage", false)
	var u UsageReport
	decode(rec, &u)
	if rec.Code != 200 || u.Agents != 4 || u.MaxAgents != 10 || u.AgentsRemaining == nil || *u.AgentsRemaining != 6 || len(u.Features) != 2 {
		t.Errorf("GET /billing/usage = %d %s", rec.Code, rec.Body)
	}

	if rec := do("GET", "/api/v1/export", false); rec.Code != 200 {
		t.Errorf("granted feature: %d %s", rec.Code, rec.Body)
	}
	rec = do("GET", "/api/v1/rules", false)
	var eb errBody
	decode(rec, &eb)
	if rec.Code != 403 || eb.Error.Code != CodeFeatureMissing {
		t.Errorf("missing feature: %d %s", rec.Code, rec.Body)
	}

	usageErr = errors.New("database down")
	rec = do("GET", "/api/v1/billing/usage", false)
	decode(rec, &eb)
	if rec.Code != 503 || eb.Error.Code != "usage_unavailable" {
		t.Errorf("usage failure: %d %s", rec.Code, rec.Body)
	}
	rec = do("GET", "/api/v1/license", false)
	lic.Usage = nil
	decode(rec, &lic)
	if rec.Code != 200 || lic.State != StateValid || lic.Usage != nil {
		t.Errorf("GET /license with usage failing = %d %s", rec.Code, rec.Body)
	}
	usageErr = nil

	// The licence file goes away: only an admin's refresh notices.
	if err := os.Remove(licFile); err != nil {
		t.Fatal(err)
	}
	if rec := do("POST", "/api/v1/billing/refresh-license", false); rec.Code != 403 {
		t.Errorf("refresh without admin: %d", rec.Code)
	}
	if !m.Status().Valid() {
		t.Fatal("a refused refresh reloaded the licence")
	}
	rec = do("POST", "/api/v1/billing/refresh-license", true)
	var st Status
	decode(rec, &st)
	if rec.Code != 200 || st.State != StateRestricted || st.Reason != ReasonInvalid {
		t.Errorf("refresh = %d %s", rec.Code, rec.Body)
	}

	rec = do("GET", "/api/v1/billing/usage", false)
	u = UsageReport{}
	decode(rec, &u)
	if u.State != StateRestricted || u.AgentsRemaining == nil || *u.AgentsRemaining != 0 || len(u.Features) != 0 {
		t.Errorf("restricted usage = %s", rec.Body)
	}
	rec = do("GET", "/api/v1/export", false)
	decode(rec, &eb)
	if rec.Code != 403 || eb.Error.Code != CodeRestricted {
		t.Errorf("feature while restricted: %d %s", rec.Code, rec.Body)
	}
}

func TestUsageReportUnlimited(t *testing.T) {
	r := report(Status{State: StateValid, MaxAgents: 0, Features: []string{FeatureAI}}, Usage{Agents: 12})
	b, _ := json.Marshal(r)
	if string(b) != `{"state":"valid","agents":12,"maxAgents":0,"agentsRemaining":null,"features":["ai"]}` {
		t.Errorf("unlimited usage %s", b)
	}
	r = report(Status{State: StateValid, MaxAgents: 5}, Usage{Agents: 9})
	if *r.AgentsRemaining != 0 {
		t.Errorf("remaining over the limit %d, want 0", *r.AgentsRemaining)
	}
}

func TestWriteErrorUnknown(t *testing.T) {
	rec := httptest.NewRecorder()
	c, _ := gin.CreateTestContext(rec)
	WriteError(c, writeTestError, errors.New("boom"))
	if rec.Code != 500 || !c.IsAborted() {
		t.Errorf("WriteError(other) = %d, aborted %v", rec.Code, c.IsAborted())
	}
}
