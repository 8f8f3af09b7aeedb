package agent

import (
	"testing"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// TestSecurityHeaders: the agent's local API sends the security headers
// every role's server sends, on success and on errors alike.
func TestSecurityHeaders(t *testing.T) {
	run := startAgent(t, t.TempDir(), false, nil)
	for _, path := range []string{"/ping", "/v1/no-such-route"} {
		resp := run.raw("GET", path, "", nil)
		resp.Body.Close()
		for k, v := range httpx.SecurityHeaders {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("GET %s (%d): %s = %q, want %q", path, resp.StatusCode, k, got, v)
			}
		}
	}
}
