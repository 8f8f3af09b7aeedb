package agent

import (
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
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
			// The bind, on a server of its own: the running agent's is
			// bound by another goroutine.
			cfg := &config.Config{}
			cfg.Agent = config.Agent{Port: coretest.FreePort(t), SecurityMode: "LOCALHOST_ONLY", DataDir: t.TempDir()} // DEVICE_API_PORT
			if tt.mutate != nil {
				tt.mutate(&cfg.Agent)
			}
			r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
			svcs, err := New(cfg, r, Options{})
			if err != nil {
				t.Fatal(err)
			}
			addr := coretest.Listen(t, svcs)
			host, p, err := net.SplitHostPort(addr)
			if err != nil {
				t.Fatal(err)
			}
			// Go reports a listener on 0.0.0.0 as [::]: compare the kind.
			if ip := net.ParseIP(host); p != strconv.Itoa(cfg.Agent.Port) || ip.IsLoopback() != (tt.bind == "127.0.0.1") || ip.IsUnspecified() != (tt.bind == "0.0.0.0") {
				t.Errorf("listening on %s, want %s", addr, net.JoinHostPort(tt.bind, strconv.Itoa(cfg.Agent.Port)))
			}

			run := startAgent(t, t.TempDir(), false, tt.mutate)
			run.key = ""
			code, _ := run.do("GET", "/metrics", "", nil)
			if got := code == 401; got != tt.needsKey {
				t.Errorf("GET /metrics without a key = %d; key required: %v", code, tt.needsKey)
			}
			if tt.needsKey {
				if code, _ := run.do("GET", "/metrics", "", map[string]string{"X-Api-Key": key}); code != 200 {
					t.Errorf("GET /metrics with API_KEY = %d", code)
				}
				if code, _ := run.do("GET", "/metrics", "", map[string]string{"X-Api-Key": key + "x"}); code != 401 {
					t.Errorf("GET /metrics with another key = %d", code)
				}
			}
		})
	}
}
