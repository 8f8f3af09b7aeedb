package agent

import (
	"net"
	"strconv"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

// TestAgentSecuritySettings: API_SECURITY_MODE, API_KEY and ENABLE_AUTH
// decide where the agent API listens (DEVICE_API_PORT on loopback, or on
// every interface in key mode) and whether a request needs X-Api-Key.
func TestAgentSecuritySettings(t *testing.T) {
	const key = "0123456789abcdef0123"
	tests := []struct {
		name     string
		mutate   func(*config.Agent)
		bind     string
		needsKey bool
	}{
		{"defaults", nil, "127.0.0.1", false},
		{"API_SECURITY_MODE=API_KEY", func(a *config.Agent) { a.SecurityMode, a.APIKey = "API_KEY", key }, "0.0.0.0", true},
		{"ENABLE_AUTH with API_KEY", func(a *config.Agent) { a.EnableAuth, a.APIKey = true, key }, "0.0.0.0", true},
		{"API_KEY alone", func(a *config.Agent) { a.APIKey = key }, "127.0.0.1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var port int
			r := startAgent(t, t.TempDir(), false, func(a *config.Agent) {
				if tt.mutate != nil {
					tt.mutate(a)
				}
				port = a.Port // DEVICE_API_PORT, a free one
			})
			host, p, err := net.SplitHostPort(r.agent.server.Addr())
			if err != nil {
				t.Fatal(err)
			}
			// Go reports a listener on 0.0.0.0 as [::]: compare the kind.
			if ip := net.ParseIP(host); p != strconv.Itoa(port) || ip.IsLoopback() != (tt.bind == "127.0.0.1") || ip.IsUnspecified() != (tt.bind == "0.0.0.0") {
				t.Errorf("listening on %s, want %s", r.agent.server.Addr(), net.JoinHostPort(tt.bind, strconv.Itoa(port)))
			}
			r.key = ""
			code, _ := r.do("GET", "/metrics", "", nil)
			if got := code == 401; got != tt.needsKey {
				t.Errorf("GET /metrics without a key = %d; key required: %v", code, tt.needsKey)
			}
			if tt.needsKey {
				if code, _ := r.do("GET", "/metrics", "", map[string]string{"X-Api-Key": key}); code != 200 {
					t.Errorf("GET /metrics with API_KEY = %d", code)
				}
				if code, _ := r.do("GET", "/metrics", "", map[string]string{"X-Api-Key": key + "x"}); code != 401 {
					t.Errorf("GET /metrics with another key = %d", code)
				}
			}
		})
	}
}
