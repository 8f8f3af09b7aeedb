package browsertest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDiagnosisNamesOpenAndFailedRequests: a failed step's message says
// which requests were still open and which failed, which is what tells
// a stalled asset from a page that broke.
func TestDiagnosisNamesOpenAndFailedRequests(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser")
	}
	hang := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("/{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><p id="ready">ready</p>
<script>fetch('/missing'); fetch('/hangs');</script>`))
	})
	mux.HandleFunc("/hangs", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })

	b := New(t)
	b.Run("open the page", chromedp.Navigate(srv.URL+"/"))
	b.WaitForPage("the page", `document.getElementById('ready') !== null`)
	b.WaitFor("both requests sent", `performance.getEntriesByName(location.origin + '/missing').length === 1`)
	var d string
	for range 50 {
		if d = b.Diagnosis(); strings.Contains(d, "/hangs") && strings.Contains(d, "HTTP 404") {
			break
		}
		_ = b.Try(Step, chromedp.Sleep(100*time.Millisecond))
	}
	for _, want := range []string{"open for", srv.URL + "/hangs", "HTTP 404 " + srv.URL + "/missing", "complete", `body "<p id=\"ready\">`} {
		if !strings.Contains(d, want) {
			t.Errorf("diagnosis %q lacks %q", d, want)
		}
	}
}

// TestWaitForOutlivesAThrowingCondition: a condition that throws while
// the page is not there yet (querySelector(...) is null) is false, not
// the end of the wait.
func TestWaitForOutlivesAThrowingCondition(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte(`<!doctype html><title>t</title><main></main>
<script>setTimeout(() => { document.querySelector('main').innerHTML = '<h1>late</h1>'; }, 700);</script>`))
	}))
	t.Cleanup(srv.Close)
	b := New(t)
	b.Run("open the page", chromedp.Navigate(srv.URL+"/"))
	// Throws on the first tries (no h1), true once the h1 is drawn.
	b.WaitFor("the late heading", `document.querySelector('h1').textContent === 'late'`)
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}
