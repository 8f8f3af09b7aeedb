package ingest

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
)

// TestSecurityHeaders: the /health and /metrics server, as New builds it,
// sends the security headers every role's server sends.
func TestSecurityHeaders(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleIngest})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	svcs, err := New(cfg, r, rt.Backends{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv, ok := svcs[0].(*httpx.Server)
	if !ok {
		t.Fatalf("first service is %T, want the HTTP server", svcs[0])
	}
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /metrics = %d", rec.Code)
	}
	for k, v := range httpx.SecurityHeaders {
		if got := rec.Header().Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
}
