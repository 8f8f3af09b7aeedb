// Package webui serves the web consoles (the agent's /admin, the cloud's
// /console) from files embedded in the binary, with the shared front-end
// library under lib/ (plain ES modules and the vendored chart library, so
// building needs no Node toolchain). See docs/web-consoles.md.
//
// Every asset is served under a path that carries a digest of all the
// files (prefix/v/<digest>/...), so browsers may keep it for a year and an
// upgrade still loads the new files at once: only the page itself, whose
// links name the digest, is revalidated on each load. Assets are
// compressed once at start-up and sent gzip-encoded to the browsers that
// take it.
package webui

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"
)

//go:embed lib
var lib embed.FS

// Lib is the shared front-end library that every console imports as
// <base>lib/... (docs/web-consoles.md lists its modules).
func Lib() fs.FS {
	sub, err := fs.Sub(lib, "lib")
	if err != nil {
		panic("BUG: embedded lib: " + err.Error())
	}
	return sub
}

// ContentSecurityPolicy is sent with every console answer: scripts,
// styles and connections from the console's own origin only, no inline
// script, no eval, no framing, forms posting only back to the origin.
const ContentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// basePlaceholder in index.html becomes the versioned asset path.
const basePlaceholder = "%BASE%"

// asset is one served file. Only its compressed form is kept in memory:
// every browser takes gzip, and the rare client that does not gets the
// file read from the embedded files, which live in the binary, not on
// the heap (a device's memory is tight: docs/benchmarks.md).
type asset struct {
	fsys  fs.FS
	name  string // in fsys
	size  int
	gz    []byte // nil when gzip does not make it smaller
	raw   []byte // the file, kept only when gz is nil
	ctype string
}

// contentTypes are the types of the files a console serves. A fixed
// table, not the host's mime.types: hosts differ (a module served as
// anything but JavaScript does not run), and reading it costs the
// process a few hundred kB.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".html":  "text/html; charset=utf-8",
	".json":  "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".woff2": "font/woff2",
	".txt":   "text/plain; charset=utf-8",
}

// Site is one console: its index page and its assets.
type Site struct {
	prefix  string
	version string
	index   []byte
	assets  map[string]*asset // by path under the version: app/..., lib/...
}

// New builds the console mounted at prefix (for example "/admin") from
// app, whose root holds index.html and the console's own modules. In
// index.html, %BASE% stands for the versioned asset path ending in "/":
// %BASE%app/main.js is the console's entry, %BASE%lib/... the library.
func New(prefix string, app fs.FS) (*Site, error) {
	if !strings.HasPrefix(prefix, "/") || strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("webui: prefix %q must start with / and not end with it", prefix)
	}
	s := &Site{prefix: prefix, assets: map[string]*asset{}}
	var index []byte
	// The files' contents are needed only here, for the digest and the
	// link check; the site keeps their compressed form.
	bodies := map[string][]byte{}
	// One compressor for every file: each gzip writer at the best level
	// allocates about a megabyte.
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	add := func(root string, fsys fs.FS) error {
		return fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			if root == "app" && p == "index.html" {
				index = body
				return nil
			}
			ctype := contentTypes[path.Ext(p)]
			if ctype == "" {
				ctype = "application/octet-stream"
			}
			buf.Reset()
			zw.Reset(&buf)
			_, _ = zw.Write(body)
			_ = zw.Close()
			a := &asset{fsys: fsys, name: p, size: len(body), ctype: ctype}
			if buf.Len() < len(body) {
				a.gz = bytes.Clone(buf.Bytes())
			} else {
				a.raw = body
			}
			s.assets[root+"/"+p] = a
			bodies[root+"/"+p] = body
			return nil
		})
	}
	if err := add("app", app); err != nil {
		return nil, fmt.Errorf("webui: read the console's files: %w", err)
	}
	if err := add("lib", Lib()); err != nil {
		return nil, fmt.Errorf("webui: read the library: %w", err)
	}
	if index == nil {
		return nil, errors.New("webui: the console has no index.html")
	}
	// The digest covers every file, the page included, in a fixed order.
	h := sha256.New()
	for _, n := range slices.Sorted(maps.Keys(bodies)) {
		h.Write([]byte(n))
		h.Write(bodies[n])
	}
	h.Write(index)
	s.version = hex.EncodeToString(h.Sum(nil))[:12]
	if err := s.checkLinks(index, bodies); err != nil {
		return nil, err
	}
	s.index = bytes.ReplaceAll(index, []byte(basePlaceholder), []byte(s.Base()))
	return s, nil
}

var (
	// importRe finds the module specifier of static import and export-from
	// statements and of dynamic import() calls with a literal.
	importRe  = regexp.MustCompile(`(?m)(?:^\s*(?:import|export)\s+(?:[\w*{}\s,$]+\s+from\s+)?|\bimport\()['"]([^'"\n]+)['"]`)
	baseRefRe = regexp.MustCompile(basePlaceholder + `([^"'\s>]+)`)
)

// checkLinks refuses a console whose page or modules name a file it does
// not serve: a wrong import fails a page only when a browser opens it,
// and here it fails the build's tests and the start at once. Imports
// must be relative: there is no import map.
func (s *Site) checkLinks(index []byte, bodies map[string][]byte) error {
	var problems []string
	for _, m := range baseRefRe.FindAllSubmatch(index, -1) {
		if s.assets[string(m[1])] == nil {
			problems = append(problems, fmt.Sprintf("index.html names %s, which is not served", m[1]))
		}
	}
	for name, body := range bodies {
		if !strings.HasSuffix(name, ".js") || strings.HasPrefix(name, "lib/vendor/") {
			continue
		}
		for _, m := range importRe.FindAllSubmatch(body, -1) {
			spec := string(m[1])
			if !strings.HasPrefix(spec, "./") && !strings.HasPrefix(spec, "../") {
				problems = append(problems, fmt.Sprintf("%s imports %q: imports must be relative", name, spec))
				continue
			}
			if target := path.Join(path.Dir(name), spec); s.assets[target] == nil {
				problems = append(problems, fmt.Sprintf("%s imports %q, which resolves to %s: not served", name, spec, target))
			}
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		return fmt.Errorf("webui: %s: %s", s.prefix, strings.Join(problems, "; "))
	}
	return nil
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}

// Base is the versioned path the assets are served under, ending in "/".
func (s *Site) Base() string { return s.prefix + "/v/" + s.version + "/" }

// Weight is what a browser downloads for the whole console: every file
// as sent to a browser that takes gzip, and as stored.
func (s *Site) Weight() (compressed, raw int) {
	compressed, raw = len(gzipped(s.index)), len(s.index)
	for _, a := range s.assets {
		raw += a.size
		if a.gz != nil {
			compressed += len(a.gz)
		} else {
			compressed += a.size
		}
	}
	return compressed, raw
}

// Mount adds the console's routes to r: the page at prefix and prefix/,
// the assets under prefix/v/.
func (s *Site) Mount(r gin.IRoutes) {
	r.GET(s.prefix, s.redirect)
	r.HEAD(s.prefix, s.redirect)
	r.GET(s.prefix+"/", s.page)
	r.HEAD(s.prefix+"/", s.page)
	r.GET(s.prefix+"/v/:version/*file", s.asset)
	r.HEAD(s.prefix+"/v/:version/*file", s.asset)
}

func (s *Site) redirect(c *gin.Context) {
	setPageHeaders(c)
	c.Redirect(http.StatusMovedPermanently, s.prefix+"/")
}

func setPageHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// page serves index.html. The console routes inside the page (#/...), so
// the page is the only HTML there is; it is revalidated on every load, so
// an upgrade's new asset digest is seen at once.
func (s *Site) page(c *gin.Context) {
	setPageHeaders(c)
	c.Header("Cache-Control", "no-cache")
	etag := `"` + s.version + `"`
	c.Header("ETag", etag)
	if c.GetHeader("If-None-Match") == etag {
		c.Status(http.StatusNotModified)
		return
	}
	c.Data(http.StatusOK, "text/html; charset=utf-8", s.index)
}

func (s *Site) asset(c *gin.Context) {
	setPageHeaders(c)
	name := strings.TrimPrefix(c.Param("file"), "/")
	a, ok := s.assets[name]
	if !ok {
		c.Header("Cache-Control", "no-store")
		c.Data(http.StatusNotFound, "text/plain; charset=utf-8", []byte("no such file in this console: "+name+"\n"))
		return
	}
	if c.Param("version") == s.version {
		c.Header("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A page loaded before an upgrade asks for the old digest: it
		// gets today's file, which no cache may keep under the old name.
		c.Header("Cache-Control", "no-cache")
	}
	c.Header("Vary", "Accept-Encoding")
	switch {
	case a.gz == nil:
		c.Data(http.StatusOK, a.ctype, a.raw)
	case acceptsGzip(c.GetHeader("Accept-Encoding")):
		c.Header("Content-Encoding", "gzip")
		c.Data(http.StatusOK, a.ctype, a.gz)
	default:
		body, err := fs.ReadFile(a.fsys, a.name)
		if err != nil {
			c.Data(http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("cannot read "+a.name+"\n"))
			return
		}
		c.Data(http.StatusOK, a.ctype, body)
	}
}

// acceptsGzip reads Accept-Encoding well enough for browsers, which all
// send gzip without a q of 0.
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(name), "gzip") {
			return strings.ReplaceAll(strings.TrimSpace(params), " ", "") != "q=0"
		}
	}
	return false
}

// WantsHTML reports whether a request comes from a browser navigating to
// a page rather than from an API client: its Accept names text/html.
func WantsHTML(r *http.Request) bool {
	for part := range strings.SplitSeq(r.Header.Get("Accept"), ",") {
		name, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(name, "text/html") {
			return true
		}
	}
	return false
}
