package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
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
var importRe = regexp.MustCompile(`(?m)^\s*(?:import|export)\s+(?:[\w*{}\s,$]+\s+from\s+)?['"]([^'"\n]+)['"]`)

// TestModulesResolve: every relative import of the console's modules
// names a file the site serves. A wrong path fails the page in the
// browser only when that page is opened; here it fails at once.
func TestModulesResolve(t *testing.T) {
	// The served tree: app/ is files/, lib/ the shared library.
	served := map[string]bool{}
	for root, fsys := range map[string]fs.FS{"app": mustSub(t, files, "files"), "lib": webui.Lib()} {
		if err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				served[root+"/"+p] = true
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	checked := 0
	for name := range served {
		if !strings.HasPrefix(name, "app/") || !strings.HasSuffix(name, ".js") {
			continue
		}
		body, err := fs.ReadFile(files, "files/"+strings.TrimPrefix(name, "app/"))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range importRe.FindAllStringSubmatch(string(body), -1) {
			spec := m[1]
			if !strings.HasPrefix(spec, ".") {
				t.Errorf("%s imports %q: only relative imports are served", name, spec)
				continue
			}
			target := path.Join(path.Dir(name), spec)
			if !served[target] {
				t.Errorf("%s imports %q, which resolves to %s: no such file", name, spec, target)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no import found: the pattern is broken")
	}
	t.Logf("%d imports resolve", checked)
}

func mustSub(t *testing.T, fsys fs.FS, dir string) fs.FS {
	t.Helper()
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		t.Fatal(err)
	}
	return sub
}
