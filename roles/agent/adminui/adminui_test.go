package adminui

import (
	"io/fs"
	"strings"
	"testing"
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

// TestEveryPageListed: a page module that pages.js does not list would
// never be reachable. (webui.New itself refuses imports and page links
// that name files the site does not serve.)
func TestEveryPageListed(t *testing.T) {
	pagesJS, err := fs.ReadFile(files, "files/pages.js")
	if err != nil {
		t.Fatal(err)
	}
	pages, err := fs.ReadDir(files, "files/pages")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pages {
		if !strings.Contains(string(pagesJS), "'./pages/"+p.Name()+"'") {
			t.Errorf("page %s is not listed in pages.js", p.Name())
		}
	}
}
