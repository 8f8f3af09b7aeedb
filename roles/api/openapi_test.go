package api

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/console"
	"github.com/edgeplat/edgeplat/roles/api/openapi"
)

// ginParam matches a gin path parameter (:name) or catch-all (*name).
var ginParam = regexp.MustCompile(`[:*]([A-Za-z0-9_]+)`)

// openAPIPath turns a gin route path into an OpenAPI path template.
func openAPIPath(p string) string { return ginParam.ReplaceAllString(p, "{$1}") }

// idpExchange is the one documented route the router may lack: it exists
// only with IDP_ENABLED, and this test builds the engine with it off. It
// must still be documented.
const idpExchange = "POST /api/v1/auth/idp-exchange"

// documentedAs names the operation documented for a catch-all route that
// takes a value with slashes followed by a fixed suffix, which gin cannot
// route as a parameter: the handler takes the suffix off.
var documentedAs = map[string]string{
	"GET /api/v1/broker/topics/{topic}": "GET /api/v1/broker/topics/{topic}/schema",
}

// TestOpenAPIMatchesRouter: the OpenAPI document describes exactly the
// routes New mounts. A route added without documenting it fails here, and
// so does an operation documented for a route that does not exist.
func TestOpenAPIMatchesRouter(t *testing.T) {
	t.Setenv("IDP_ENABLED", "false")
	h, _ := fullEngine(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0))
	engine, ok := h.(*gin.Engine)
	if !ok {
		t.Fatalf("New's handler is a %T, want *gin.Engine", h)
	}
	routed := map[string]bool{}
	for _, r := range engine.Routes() {
		// The console's pages and files are not API routes
		// (docs/web-consoles.md).
		if r.Path == console.Prefix || strings.HasPrefix(r.Path, console.Prefix+"/") {
			continue
		}
		route := r.Method + " " + openAPIPath(r.Path)
		if documentedAs[route] != "" {
			route = documentedAs[route]
		}
		routed[route] = true
	}

	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Document(), &doc); err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for p, item := range doc.Paths {
		for m := range item {
			switch m {
			case "get", "put", "post", "delete", "options", "head", "patch", "trace":
				documented[strings.ToUpper(m)+" "+p] = true
			}
		}
	}

	var undocumented []string
	for r := range routed {
		if !documented[r] {
			undocumented = append(undocumented, r)
		}
	}
	sort.Strings(undocumented)
	for _, r := range undocumented {
		t.Errorf("route %s is not in roles/api/openapi/openapi.json: document it", r)
	}

	excused := map[string]bool{idpExchange: true}
	for r := range excused {
		if !documented[r] {
			t.Errorf("%s is excused from the router check but not documented", r)
		}
	}

	var phantom []string
	for r := range documented {
		if !routed[r] && !excused[r] {
			phantom = append(phantom, r)
		}
	}
	sort.Strings(phantom)
	for _, r := range phantom {
		t.Errorf("openapi.json documents %s, which the router does not have", r)
	}
	t.Logf("%d operations documented, %d routes mounted", len(documented), len(routed))
}
