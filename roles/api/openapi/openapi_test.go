package openapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// methods are the operation keys of an OpenAPI path item.
var methods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// load parses the embedded document as generic JSON, the way a client
// would, so the tests see exactly what is served.
func load(t *testing.T) map[string]any {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(Document(), &doc); err != nil {
		t.Fatalf("openapi.json is not valid JSON: %v", err)
	}
	return doc
}

type operation struct {
	method, path string
	item, op     map[string]any
}

func operations(t *testing.T, doc map[string]any) []operation {
	t.Helper()
	paths, ok := doc["paths"].(map[string]any)
	if !ok || len(paths) == 0 {
		t.Fatal("the document has no paths")
	}
	var out []operation
	for p, v := range paths {
		item, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("paths[%q] is not an object", p)
		}
		for _, m := range methods {
			if o, ok := item[m].(map[string]any); ok {
				out = append(out, operation{method: m, path: p, item: item, op: o})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].path+" "+out[i].method < out[j].path+" "+out[j].method
	})
	return out
}

// resolve follows a local $ref ("#/a/b") through doc.
func resolve(doc map[string]any, ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	var cur any = doc
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// deref returns v, or what its $ref points at.
func deref(t *testing.T, doc map[string]any, v any) map[string]any {
	t.Helper()
	m, _ := v.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		r, ok := resolve(doc, ref)
		if !ok {
			t.Fatalf("unresolvable $ref %q", ref)
		}
		m, _ = r.(map[string]any)
	}
	return m
}

func TestDocumentIsOpenAPI31(t *testing.T) {
	if !json.Valid(Document()) {
		t.Fatal("openapi.json is not valid JSON")
	}
	doc := load(t)
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.1.") {
		t.Errorf("openapi = %q, want 3.1.x", v)
	}
	info, _ := doc["info"].(map[string]any)
	if info["title"] != "edgeplat Cloud API" || info["version"] == "" || info["version"] == nil {
		t.Errorf("info = %v, want the title and a version", info)
	}
}

func TestDocumentReturnsACopy(t *testing.T) {
	d := Document()
	d[0] = 'x'
	if Document()[0] == 'x' {
		t.Error("changing Document's answer changed the embedded document")
	}
}

func TestOperationsAreComplete(t *testing.T) {
	doc := load(t)
	seen := map[string]string{}
	for _, o := range operations(t, doc) {
		name := strings.ToUpper(o.method) + " " + o.path
		id, _ := o.op["operationId"].(string)
		switch {
		case id == "":
			t.Errorf("%s has no operationId", name)
		case seen[id] != "":
			t.Errorf("operationId %q is used by %s and %s", id, seen[id], name)
		default:
			seen[id] = name
		}
		if s, _ := o.op["summary"].(string); s == "" {
			t.Errorf("%s has no summary", name)
		}
		if tags, _ := o.op["tags"].([]any); len(tags) == 0 {
			t.Errorf("%s has no tags", name)
		}
		rs, _ := o.op["responses"].(map[string]any)
		success := false
		for code := range rs {
			if n, err := strconv.Atoi(code); err == nil && n >= 200 && n < 300 {
				success = true
			}
		}
		if !success {
			t.Errorf("%s documents no success response", name)
		}
	}
}

func TestRefsResolve(t *testing.T) {
	doc := load(t)
	n := 0
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				n++
				if _, ok := resolve(doc, ref); !ok {
					t.Errorf("%s: $ref %q does not resolve", path, ref)
				}
			}
			for k, c := range v {
				walk(path+"/"+k, c)
			}
		case []any:
			for i, c := range v {
				walk(path+"/"+strconv.Itoa(i), c)
			}
		}
	}
	walk("#", doc)
	if n == 0 {
		t.Error("no $ref found: the walk is broken")
	}
}

var templateParam = regexp.MustCompile(`\{([^{}]+)\}`)

// TestPathParametersDeclared: every {name} of a path template is a
// required path parameter of each of its operations, and no operation
// declares a path parameter its template lacks.
func TestPathParametersDeclared(t *testing.T) {
	doc := load(t)
	for _, o := range operations(t, doc) {
		name := strings.ToUpper(o.method) + " " + o.path
		var want []string
		for _, m := range templateParam.FindAllStringSubmatch(o.path, -1) {
			want = append(want, m[1])
		}
		declared := map[string]bool{}
		for _, list := range []any{o.item["parameters"], o.op["parameters"]} {
			ps, _ := list.([]any)
			for _, p := range ps {
				pm := deref(t, doc, p)
				if pm["in"] != "path" {
					continue
				}
				pn, _ := pm["name"].(string)
				declared[pn] = true
				if pm["required"] != true {
					t.Errorf("%s: path parameter %q is not required: true", name, pn)
				}
				if !slices.Contains(want, pn) {
					t.Errorf("%s: path parameter %q is not in the template", name, pn)
				}
			}
		}
		for _, w := range want {
			if !declared[w] {
				t.Errorf("%s: {%s} is not declared in parameters", name, w)
			}
		}
	}
}

func TestSecurityNamesSchemes(t *testing.T) {
	doc := load(t)
	comps, _ := doc["components"].(map[string]any)
	schemes, _ := comps["securitySchemes"].(map[string]any)
	check := func(where string, v any) {
		reqs, _ := v.([]any)
		for _, r := range reqs {
			for name := range r.(map[string]any) {
				if _, ok := schemes[name]; !ok {
					t.Errorf("%s: security scheme %q is not defined", where, name)
				}
			}
		}
	}
	check("document", doc["security"])
	for _, o := range operations(t, doc) {
		check(strings.ToUpper(o.method)+" "+o.path, o.op["security"])
	}
}

// TestRequestBodiesAreStrict: every JSON body under /api/v1 is decoded
// with unknown fields refused, so each object schema with properties in
// it must say additionalProperties: false. The broker callbacks, outside
// /api/v1, read only the fields they know and ignore the rest.
func TestRequestBodiesAreStrict(t *testing.T) {
	doc := load(t)
	var walk func(where string, v any, seen map[string]bool)
	walk = func(where string, v any, seen map[string]bool) {
		m, _ := v.(map[string]any)
		if m == nil {
			return
		}
		if ref, ok := m["$ref"].(string); ok {
			if seen[ref] {
				return
			}
			seen[ref] = true
			r, _ := resolve(doc, ref)
			walk(where+"→"+ref, r, seen)
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			if m["additionalProperties"] != false {
				t.Errorf("%s: an object with properties lacks additionalProperties: false", where)
			}
			for k, p := range props {
				walk(where+"."+k, p, seen)
			}
		}
		walk(where+"[]", m["items"], seen)
		for _, k := range []string{"oneOf", "anyOf", "allOf"} {
			list, _ := m[k].([]any)
			for i, s := range list {
				walk(where+"."+k+strconv.Itoa(i), s, seen)
			}
		}
	}
	bodies := 0
	for _, o := range operations(t, doc) {
		if !strings.HasPrefix(o.path, "/api/v1/") {
			continue
		}
		rb := deref(t, doc, o.op["requestBody"])
		content, _ := rb["content"].(map[string]any)
		js, _ := content["application/json"].(map[string]any)
		if js == nil {
			continue
		}
		bodies++
		walk(strings.ToUpper(o.method)+" "+o.path, js["schema"], map[string]bool{})
	}
	if bodies == 0 {
		t.Error("no JSON request body found: the walk is broken")
	}
}

func TestReusableResponses(t *testing.T) {
	doc := load(t)
	for _, name := range []string{"BadRequest", "Unauthorized", "Forbidden", "NotFound", "Conflict", "PayloadTooLarge",
		"UnprocessableEntity", "TooManyRequests", "ServiceUnavailable"} {
		r, ok := resolve(doc, "#/components/responses/"+name)
		if !ok {
			t.Errorf("components.responses.%s is missing", name)
			continue
		}
		schema, _ := resolve(r.(map[string]any), "#/content/application~1json/schema/$ref")
		if schema != "#/components/schemas/Error" {
			t.Errorf("components.responses.%s is not the Error schema", name)
		}
	}
	if _, ok := resolve(doc, "#/components/responses/TooManyRequests/headers/Retry-After"); !ok {
		t.Error("the 429 response does not document Retry-After")
	}
}

func TestServe(t *testing.T) {
	// Debug mode would print every registered route.
	gin.SetMode(gin.TestMode)
	e := gin.New()
	Register(e)
	get := func(inm string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, Path, nil)
		if inm != "" {
			req.Header.Set("If-None-Match", inm)
		}
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		return w
	}
	w := get("")
	if w.Code != http.StatusOK {
		t.Fatalf("GET %s: %d", Path, w.Code)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	if w.Body.String() != string(Document()) {
		t.Error("the body is not the embedded document")
	}
	tag := w.Header().Get("ETag")
	if !strings.HasPrefix(tag, `"`) || len(tag) < 3 {
		t.Fatalf("ETag = %q, want a strong tag", tag)
	}
	for _, inm := range []string{tag, "W/" + tag, `"other", ` + tag, "*"} {
		if w := get(inm); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
			t.Errorf("If-None-Match %s: %d with %d bytes, want 304 and no body", inm, w.Code, w.Body.Len())
		}
	}
	if w := get(`"other"`); w.Code != http.StatusOK {
		t.Errorf("If-None-Match with another tag: %d, want 200", w.Code)
	}
}
