package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

// TestReadBodyVariants: ReadBody refuses an empty body, ReadBodyAllowEmpty
// returns it; both refuse one over the limit.
func TestReadBodyVariants(t *testing.T) {
	e := NewEngine(EngineOptions{WriteError: writeTestError})
	for path, read := range map[string]func(*gin.Context, int64, ErrorWriter) ([]byte, bool){
		"/strict": ReadBody, "/optional": ReadBodyAllowEmpty,
	} {
		e.POST(path, func(c *gin.Context) {
			if b, ok := read(c, 8, writeTestError); ok {
				c.String(http.StatusOK, "read %q", b)
			}
		})
	}
	for _, tc := range []struct {
		path, body string
		status     int
		want       string
	}{
		{"/strict", "", http.StatusBadRequest, "the request body is empty"},
		{"/strict", "  \n", http.StatusBadRequest, "the request body is empty"},
		{"/strict", "{}", http.StatusOK, `read "{}"`},
		{"/strict", "123456789", http.StatusRequestEntityTooLarge, "body_too_large"},
		{"/optional", "", http.StatusOK, `read ""`},
		{"/optional", "  \n", http.StatusOK, `read "  \n"`},
		{"/optional", "{}", http.StatusOK, `read "{}"`},
		{"/optional", "123456789", http.StatusRequestEntityTooLarge, "body_too_large"},
	} {
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, tc.path, strings.NewReader(tc.body)))
		if rec.Code != tc.status || !strings.Contains(rec.Body.String(), tc.want) {
			t.Errorf("POST %s %q = %d %s, want %d with %s", tc.path, tc.body, rec.Code, rec.Body, tc.status, tc.want)
		}
	}
}
