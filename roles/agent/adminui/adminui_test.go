package adminui

import (
	"io/fs"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/webui"
)

// TestSiteWeight keeps the whole UI, as a browser downloads it, under
// the consoles' budget of 1 MB compressed (docs/web-consoles.md).
func TestSiteWeight(t *testing.T) {
	site, err := New()
	if err != nil {
		t.Fatal(err)
	}
	compressed, raw := site.Weight()
	t.Logf("admin UI weight: %d bytes compressed, %d raw", compressed, raw)
	if compressed >= 1<<20 {
		t.Fatalf("admin UI is %d bytes compressed, over the 1 MB budget", compressed)
	}
	if compressed == 0 || compressed >= raw {
		t.Fatalf("weight %d compressed of %d raw: the files were not compressed", compressed, raw)
	}
}

var importRe = regexp.MustCompile(`(?m)^(?:import|export)\s[^;]*?from\s+'([^']+)'`)

// TestModulesResolve checks, without a browser, that every import of
// every module names a file the site serves (a wrong relative path only
// shows as a blank page otherwise), and that every page module is listed
// in pages.js.
func TestModulesResolve(t *testing.T) {
	// The site's paths: the files/ folder under app/, the library under
	// lib/ (core/webui's New).
	served := map[string][]byte{}
	add := func(root string, fsys fs.FS) {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			served[path.Join(root, p)] = b
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	app, err := fs.Sub(files, "files")
	if err != nil {
		t.Fatal(err)
	}
	add("app", app)
	add("lib", webui.Lib())
	pagesJS := string(served["app/pages.js"])
	if pagesJS == "" {
		t.Fatal("no app/pages.js")
	}
	imports := 0
	for name, body := range served {
		if !strings.HasPrefix(name, "app/") || !strings.HasSuffix(name, ".js") {
			continue
		}
		for _, m := range importRe.FindAllStringSubmatch(string(body), -1) {
			imports++
			if target := path.Join(path.Dir(name), m[1]); served[target] == nil {
				t.Errorf("%s imports %q, which resolves to %s: not served", name, m[1], target)
			}
		}
		if strings.HasPrefix(name, "app/pages/") && !strings.Contains(pagesJS, "'./pages/"+path.Base(name)+"'") {
			t.Errorf("page %s is not listed in pages.js", name)
		}
	}
	if imports < 40 {
		t.Fatalf("found %d imports only; is the walk broken?", imports)
	}
	index := string(served["app/index.html"])
	for _, m := range regexp.MustCompile(`%BASE%([^"]+)`).FindAllStringSubmatch(index, -1) {
		if served[m[1]] == nil {
			t.Errorf("index.html names %s: not served", m[1])
		}
	}
}
