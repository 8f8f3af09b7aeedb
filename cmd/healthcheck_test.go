package cmd

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func TestDefaultHealthURLs(t *testing.T) {
	tests := []struct {
		port string
		want []string
	}{
		{"", []string{"http://127.0.0.1:3002/health", "http://127.0.0.1:3003/health"}},
		{"8080", []string{"http://127.0.0.1:8080/health"}},
		{" 3003 ", []string{"http://127.0.0.1:3003/health"}},
	}
	for _, tt := range tests {
		if got := defaultHealthURLs(tt.port); !slices.Equal(got, tt.want) {
			t.Errorf("defaultHealthURLs(%q) = %v, want %v", tt.port, got, tt.want)
		}
	}
}

// TestHealthcheck: the container's HEALTHCHECK must pass on a healthy role,
// fail on a 503, and skip a port nobody listens on (serve-api's default
// port inside an ingest container) rather than call the container sick.
func TestHealthcheck(t *testing.T) {
	serve := func(code int) string {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/health" {
				http.NotFound(w, r)
				return
			}
			w.WriteHeader(code)
			_, _ = w.Write([]byte(`{"status":"x"}`))
		}))
		t.Cleanup(s.Close)
		return s.URL + "/health"
	}
	healthy, sick := serve(http.StatusOK), serve(http.StatusServiceUnavailable)
	closed := fmt.Sprintf("http://127.0.0.1:%d/health", coretest.FreePort(t))

	tests := []struct {
		name     string
		urls     []string
		wantCode int
		wantOut  string
	}{
		{"healthy", []string{healthy}, 0, "healthy: " + healthy},
		{"refused then healthy", []string{closed, healthy}, 0, "healthy: " + healthy},
		{"unhealthy decides", []string{sick, healthy}, exitFailure, "503 Service Unavailable"},
		{"nothing listening", []string{closed}, exitFailure, "not listening"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"healthcheck"}
			for _, u := range tt.urls {
				args = append(args, "--url", u)
			}
			code, out, errOut := run(t, args...)
			if code != tt.wantCode || !strings.Contains(out+errOut, tt.wantOut) {
				t.Errorf("healthcheck %v = %d, stdout %q, stderr %q; want %d and %q", tt.urls, code, out, errOut, tt.wantCode, tt.wantOut)
			}
		})
	}

	if _, err := probeHealth(context.Background(), http.DefaultClient, nil); err == nil {
		t.Error("probeHealth with no URL succeeded")
	}
}
