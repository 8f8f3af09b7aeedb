package api

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// TestSecurityHeaders: serve-api's server, as New builds it, sends the
// security headers every role's server sends, on success and on errors.
func TestSecurityHeaders(t *testing.T) {
	h, _ := fullEngine(t, nil, config.Licence{})
	for _, path := range []string{"/", "/api/v1/agents", "/nope"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		for k, v := range httpx.SecurityHeaders {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("GET %s (%d): %s = %q, want %q", path, rec.Code, k, got, v)
			}
		}
	}
}
