package webui

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
)

func testSite(t *testing.T) (*Site, *gin.Engine) {
	t.Helper()
	s, err := New("/test", os.DirFS("testdata/app"))
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	e := gin.New()
	s.Mount(e)
	return s, e
}

func get(e http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	e.ServeHTTP(w, req)
	return w
}

func TestSiteServesPageAndAssets(t *testing.T) {
	s, e := testSite(t)
	base := s.Base()
	if !strings.HasPrefix(base, "/test/v/") || !strings.HasSuffix(base, "/") {
		t.Fatalf("base = %q", base)
	}
	tests := []struct {
		name, path    string
		hdr           []string
		status        int
		ctype, cache  string
		encoding      string
		bodyContains  string
		bodyLacks     string
		locationEqual string
	}{
		{name: "page", path: "/test/", status: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", bodyContains: `src="` + base + `app/main.js"`, bodyLacks: "%BASE%"},
		{name: "bare prefix redirects", path: "/test", status: 301, locationEqual: "/test/"},
		{name: "module", path: base + "app/main.js", status: 200, ctype: "text/javascript; charset=utf-8", cache: "public, max-age=31536000, immutable", bodyContains: "self-test"},
		{name: "library", path: base + "lib/dom.js", status: 200, ctype: "text/javascript; charset=utf-8", bodyContains: "export function h("},
		{name: "gzip", path: base + "lib/vendor/uplot/uPlot.esm.js", hdr: []string{"Accept-Encoding", "gzip, deflate, br"}, status: 200, encoding: "gzip"},
		{name: "gzip refused", path: base + "lib/vendor/uplot/uPlot.esm.js", hdr: []string{"Accept-Encoding", "gzip;q=0"}, status: 200, bodyContains: "uPlot"},
		{name: "css", path: base + "lib/base.css", status: 200, ctype: "text/css; charset=utf-8"},
		{name: "old version", path: "/test/v/000000000000/lib/dom.js", status: 200, cache: "no-cache"},
		{name: "missing", path: base + "app/nope.js", status: 404, cache: "no-store"},
		{name: "no traversal", path: base + "../../webui.go", status: 404},
		{name: "index only at the page", path: base + "app/index.html", status: 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := get(e, tt.path, tt.hdr...)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if got := w.Header().Get("Content-Security-Policy"); got != ContentSecurityPolicy && tt.status != 404 {
				t.Errorf("CSP = %q", got)
			}
			if tt.ctype != "" && w.Header().Get("Content-Type") != tt.ctype {
				t.Errorf("Content-Type = %q, want %q", w.Header().Get("Content-Type"), tt.ctype)
			}
			if tt.cache != "" && w.Header().Get("Cache-Control") != tt.cache {
				t.Errorf("Cache-Control = %q, want %q", w.Header().Get("Cache-Control"), tt.cache)
			}
			if w.Header().Get("Content-Encoding") != tt.encoding {
				t.Errorf("Content-Encoding = %q, want %q", w.Header().Get("Content-Encoding"), tt.encoding)
			}
			body := w.Body.Bytes()
			if tt.encoding == "gzip" {
				zr, err := gzip.NewReader(bytes.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				if body, err = io.ReadAll(zr); err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(body, []byte("uPlot")) {
					t.Error("gzip body does not decode to uPlot")
				}
			}
			if tt.bodyContains != "" && !bytes.Contains(body, []byte(tt.bodyContains)) {
				t.Errorf("body lacks %q", tt.bodyContains)
			}
			if tt.bodyLacks != "" && bytes.Contains(body, []byte(tt.bodyLacks)) {
				t.Errorf("body has %q", tt.bodyLacks)
			}
			if tt.locationEqual != "" && w.Header().Get("Location") != tt.locationEqual {
				t.Errorf("Location = %q", w.Header().Get("Location"))
			}
		})
	}
	// The page revalidates by its ETag.
	etag := get(e, "/test/").Header().Get("ETag")
	if w := get(e, "/test/", "If-None-Match", etag); w.Code != http.StatusNotModified {
		t.Errorf("revalidation: %d", w.Code)
	}
}

func TestVersionFollowsContent(t *testing.T) {
	a, _ := testSite(t)
	b, _ := testSite(t)
	if a.Base() != b.Base() {
		t.Errorf("same files, bases %q and %q", a.Base(), b.Base())
	}
	dir := t.TempDir()
	for _, f := range []string{"index.html", "main.js"} {
		data, err := os.ReadFile("testdata/app/" + f)
		if err != nil {
			t.Fatal(err)
		}
		if f == "main.js" {
			data = append(data, "\n// changed\n"...)
		}
		if err := os.WriteFile(dir+"/"+f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c, err := New("/test", os.DirFS(dir))
	if err != nil {
		t.Fatal(err)
	}
	if c.Base() == a.Base() {
		t.Error("a changed file kept the digest")
	}
}

func TestNewRefusesBadInput(t *testing.T) {
	if _, err := New("/x", os.DirFS(t.TempDir())); err == nil || !strings.Contains(err.Error(), "index.html") {
		t.Errorf("no index: %v", err)
	}
	for _, p := range []string{"x", "/x/", ""} {
		if _, err := New(p, os.DirFS("testdata/app")); err == nil {
			t.Errorf("prefix %q accepted", p)
		}
	}
}

func TestWeightIsLibraryAndApp(t *testing.T) {
	s, _ := testSite(t)
	gz, raw := s.Weight()
	// uPlot alone is 145 kB as stored and about 42 kB compressed.
	if raw < 145_000 || gz >= raw || gz < 40_000 {
		t.Errorf("weight %d compressed, %d raw", gz, raw)
	}
	if gz > 1<<20 {
		t.Errorf("the library alone is over the consoles' 1 MB budget: %d", gz)
	}
}

func TestAcceptsGzipAndWantsHTML(t *testing.T) {
	for h, want := range map[string]bool{"gzip": true, "br, gzip;q=0.5": true, "gzip;q=0": false, "identity": false, "": false, "GZIP": true} {
		if got := acceptsGzip(h); got != want {
			t.Errorf("acceptsGzip(%q) = %v", h, got)
		}
	}
	for h, want := range map[string]bool{
		"text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8": true,
		"application/json": false, "*/*": false, "": false,
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("Accept", h)
		if got := WantsHTML(r); got != want {
			t.Errorf("WantsHTML(%q) = %v", h, got)
		}
	}
}

func TestNewRefusesBrokenLinks(t *testing.T) {
	tests := map[string]struct {
		files map[string]string
		want  string
	}{
		"missing module": {map[string]string{"main.js": "import {x} from './nope.js';\n"}, `app/main.js imports "./nope.js", which resolves to app/nope.js: not served`},
		"bare import":    {map[string]string{"main.js": "import uPlot from 'uplot';\n"}, `imports must be relative`},
		"dynamic import": {map[string]string{"main.js": "const m = await import('./gone.js');\n"}, `resolves to app/gone.js`},
		"library path":   {map[string]string{"pages/p.js": "import {h} from '../lib/dom.js';\n"}, `resolves to app/lib/dom.js`},
		"page asset":     {map[string]string{"index.html": `<script type="module" src="%BASE%app/missing.js"></script>`}, "index.html names app/missing.js"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"index.html": `<script type="module" src="%BASE%app/main.js"></script>`, "main.js": "import {h} from '../lib/dom.js';\n"}
			for k, v := range tt.files {
				files[k] = v
			}
			for k, v := range files {
				if err := os.MkdirAll(dir+"/"+path.Dir(k), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(dir+"/"+k, []byte(v), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := New("/x", os.DirFS(dir))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want an error with %q", err, tt.want)
			}
		})
	}
}
