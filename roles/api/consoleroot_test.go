package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/webui"
	"github.com/edgeplat/edgeplat/roles/api/console"
)

// TestRootSendsBrowsersToConsole: GET / is the console for a browser
// and the service information for an API client, on the role's own
// engine; the console it names is served there with its CSP.
func TestRootSendsBrowsersToConsole(t *testing.T) {
	e, _ := fullEngine(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0))
	for _, tt := range []struct {
		name, accept string
		status       int
		location     string
		body         string
	}{
		{"a browser", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", http.StatusFound, console.Prefix + "/", ""},
		{"an API client", "application/json", http.StatusOK, "", `"apiBase":"/api/v1"`},
		{"no Accept", "", http.StatusOK, "", `"service":"edgeplat-api"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.accept != "" {
				req.Header.Set("Accept", tt.accept)
			}
			w := httptest.NewRecorder()
			e.ServeHTTP(w, req)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if got := w.Header().Get("Location"); got != tt.location {
				t.Errorf("Location %q, want %q", got, tt.location)
			}
			if !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("body %s lacks %s", w.Body, tt.body)
			}
		})
	}
	req := httptest.NewRequest(http.MethodGet, console.Prefix+"/", nil)
	req.Header.Set("Accept", "text/html")
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	if w.Code != http.StatusOK || w.Header().Get("Content-Security-Policy") != webui.ContentSecurityPolicy ||
		!strings.Contains(w.Body.String(), "app/main.js") {
		t.Errorf("GET %s/: %d, CSP %q, body %.200s", console.Prefix, w.Code, w.Header().Get("Content-Security-Policy"), w.Body)
	}
}
