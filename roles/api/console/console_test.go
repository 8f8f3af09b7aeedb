package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/webui"
)

// maxWeight is the console's budget (docs/web-consoles.md): everything a
// browser downloads for it, compressed.
const maxWeight = 1 << 20

func TestConsoleWeight(t *testing.T) {
	site, err := New()
	if err != nil {
		t.Fatal(err)
	}
	compressed, raw := site.Weight()
	t.Logf("console weight: %d bytes compressed (%d raw)", compressed, raw)
	if compressed >= maxWeight {
		t.Errorf("the console is %d bytes compressed, over its budget of %d", compressed, maxWeight)
	}
}

func get(h http.Handler, p string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, p, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	return w
}

// TestConsoleServing: the page, its redirect and an asset each carry the
// Content-Security-Policy, and the page names the versioned entry module.
func TestConsoleServing(t *testing.T) {
	site, err := New()
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	site.Mount(e)
	for _, tt := range []struct {
		name, path string
		status     int
		location   string
		body       string
	}{
		{"the bare prefix", Prefix, http.StatusMovedPermanently, Prefix + "/", ""},
		{"the page", Prefix + "/", http.StatusOK, "", site.Base() + "app/main.js"},
		{"the entry module", site.Base() + "app/main.js", http.StatusOK, "", "import"},
		{"a page module", site.Base() + "app/pages/agent.js", http.StatusOK, "", "export default"},
		{"the stylesheet", site.Base() + "app/console.css", http.StatusOK, "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := get(e, tt.path, "Accept", "text/html")
			if w.Code != tt.status {
				t.Fatalf("GET %s: %d, want %d", tt.path, w.Code, tt.status)
			}
			if got := w.Header().Get("Content-Security-Policy"); got != webui.ContentSecurityPolicy {
				t.Errorf("GET %s: CSP %q", tt.path, got)
			}
			if tt.location != "" && w.Header().Get("Location") != tt.location {
				t.Errorf("GET %s: Location %q, want %q", tt.path, w.Header().Get("Location"), tt.location)
			}
			if !strings.Contains(w.Body.String(), tt.body) {
				t.Errorf("GET %s: body lacks %q", tt.path, tt.body)
			}
		})
	}
}

// importRe finds the static imports of a module: import ... from '...',
// export ... from '...' and import '...'.
