package agent

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
)

func TestSecurityModes(t *testing.T) {
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	localhost := &config.Config{}
	localhost.Agent.SecurityMode = "LOCALHOST_ONLY"
	keyed := &config.Config{}
	keyed.Agent.SecurityMode = "API_KEY"
	keyed.Agent.APIKey = "s3cret-key"
	enableAuth := &config.Config{}
	enableAuth.Agent.SecurityMode = "LOCALHOST_ONLY"
	enableAuth.Agent.EnableAuth = true
	enableAuth.Agent.APIKey = "s3cret-key"

	tests := []struct {
		name   string
		cfg    *config.Config
		path   string
		header string
		want   int
	}{
		{"ping is open in localhost mode", localhost, "/ping", "", 200},
		{"metrics need no key in localhost mode", localhost, "/metrics", "", 200},
		{"ping is open in key mode", keyed, "/ping", "", 200},
		{"metrics without key", keyed, "/metrics", "", 401},
		{"metrics with wrong key", keyed, "/metrics", "nope", 401},
		{"metrics with key header", keyed, "/metrics", "s3cret-key", 200},
		{"metrics with key query", keyed, "/metrics?apiKey=s3cret-key", "", 200},
		{"ENABLE_AUTH with a key selects key mode", enableAuth, "/metrics", "", 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.header != "" {
				req.Header.Set("X-Api-Key", tt.header)
			}
			rec := httptest.NewRecorder()
			newEngine(tt.cfg, r).ServeHTTP(rec, req)
			if rec.Code != tt.want {
				t.Errorf("GET %s = %d, want %d (%s)", tt.path, rec.Code, tt.want, rec.Body)
			}
			if rec.Code == 401 && rec.Body.String() != `{"error":"missing or invalid API key"}` {
				t.Errorf("401 body %s is not the agent error shape", rec.Body)
			}
		})
	}
}
