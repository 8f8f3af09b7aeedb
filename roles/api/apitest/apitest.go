// Package apitest is what the tests of the Cloud API's route packages
// share: requests to a handler and the reading of its answers, errors in
// the API's {"error": {"code", "message"}} shape included; a migrated
// database of either engine with two tenants and their agents and fleets;
// a fake clock. The test users, which need accounts' types, are in
// accounts/accountstest: accounts' own tests use this package.
package apitest

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
)

// WriteError writes the API's error shape as roles/api.WriteError does;
// the route packages cannot import roles/api, which imports them.
func WriteError(c *gin.Context, status int, code, message string) {
	c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": message}})
}

// Reply is an answer: its status, its raw body and the body as a JSON
// object (nil when empty).
type Reply struct {
	Status int
	Body   map[string]any
	Raw    string
}

// Call sends a request to h with Authorization: Bearer bearer (unless
// empty) and body: nothing for nil, a string as it is, anything else as
// JSON. An answer whose body is not a JSON object fails the test.
func Call(t testing.TB, h http.Handler, method, path, bearer string, body any) Reply {
	t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			t.Fatal(err)
		}
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(raw))
	req.Header.Set("Content-Type", "application/json")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	return Do(t, h, req)
}

// Do sends req to h as it is, for the requests Call cannot make (another
// credential header). An answer whose body is not a JSON object fails the
// test.
func Do(t testing.TB, h http.Handler, req *http.Request) Reply {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := Reply{Status: rec.Code, Raw: rec.Body.String()}
	if rec.Body.Len() > 0 {
		if err := json.Unmarshal(rec.Body.Bytes(), &r.Body); err != nil {
			t.Fatalf("%s %s: body %q is not a JSON object: %v", req.Method, req.URL, r.Raw, err)
		}
	}
	return r
}

// Expect fails the test unless r has status want; what names the request.
func (r Reply) Expect(t testing.TB, what string, want int) Reply {
	t.Helper()
	if r.Status != want {
		t.Fatalf("%s: %d %s, want %d", what, r.Status, r.Raw, want)
	}
	return r
}

// Str returns the string at path in the body, "" when there is none.
func (r Reply) Str(path ...string) string {
	var v any = r.Body
	for _, p := range path {
		m, _ := v.(map[string]any)
		v = m[p]
	}
	s, _ := v.(string)
	return s
}

// List returns the array under key in the body.
func (r Reply) List(key string) []any {
	l, _ := r.Body[key].([]any)
	return l
}

// ExpectError fails the test unless r is an error answer of status and
// code in the API's error shape.
func (r Reply) ExpectError(t testing.TB, status int, code string) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Raw)
	}
	if got := r.ErrorCode(t); got != code {
		t.Errorf("code %q, want %q", got, code)
	}
}

// ErrorCode returns the code of an error answer, failing the test unless
// the body is the API's error shape with a message.
func (r Reply) ErrorCode(t testing.TB) string {
	t.Helper()
	e, ok := r.Body["error"].(map[string]any)
	if !ok || len(r.Body) != 1 {
		t.Fatalf("error body %s is not {\"error\": {...}}", r.Raw)
	}
	if msg, _ := e["message"].(string); msg == "" {
		t.Errorf("error body %s has no message", r.Raw)
	}
	code, _ := e["code"].(string)
	return code
}
