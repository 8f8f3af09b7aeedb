// Package browsertest drives a headless Chromium through the DevTools
// protocol (chromedp) for the web consoles' tests. A test gets a browser
// of its own (own profile, own cookies); a missing Chromium skips the
// test locally and fails it under CI=true, like every other service.
// Screenshots go to $EDGEPLAT_SCREENSHOTS when set, else under the test's
// temporary directory.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// Step bounds one Run: a console answers in milliseconds, and a step
// that waits for a live value waits a few polls at most.
const Step = 30 * time.Second

// Browser is one headless Chromium with one tab.
type Browser struct {
	t     testing.TB
	ctx   context.Context
	shots string

	mu       sync.Mutex
	problems []string // console errors, exceptions, CSP violations
	net      netTrace
}

// netTrace is what the page's network and log did, for the message of a
// step that failed: which requests were still open and what failed.
// Failed loads are not problems: a page that is left or an event stream
// that is closed cancels its requests.
type netTrace struct {
	start  time.Time
	open   map[network.RequestID]openRequest
	events []string // the latest maxTraceEvents
}

type openRequest struct {
	url  string
	sent time.Time
}

const maxTraceEvents = 30

// Find returns the Chromium executable: $EDGEPLAT_CHROMIUM, else the
// first of Debian's and other distributions' names on PATH.
func Find() (string, error) {
	if p := os.Getenv("EDGEPLAT_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, n := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(n); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("no chromium on PATH (apt-get install chromium, or set EDGEPLAT_CHROMIUM)")
}

// New starts a browser for t and closes it when t ends.
func New(t testing.TB) *Browser {
	t.Helper()
	exe, err := Find()
	if err != nil {
		coretest.Unavailable(t, "chromium", "PATH", err)
	}
	// Not t.TempDir: Chromium's helper processes may still write to the
	// profile for a moment after the browser exits, and TempDir's cleanup
	// fails the test on a directory that is not empty.
	profile, err := os.MkdirTemp("", "edgeplat-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	b := &Browser{t: t, ctx: ctx, net: netTrace{start: time.Now(), open: map[network.RequestID]openRequest{}}}
	b.shots = os.Getenv("EDGEPLAT_SCREENSHOTS")
	if b.shots == "" {
		b.shots = filepath.Join(t.TempDir(), "screenshots")
	}
	chromedp.ListenTarget(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.problem("exception: " + e.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.APITypeError {
				var parts []string
				for _, a := range e.Args {
					parts = append(parts, strings.Trim(string(a.Value), `"`)+a.Description)
				}
				b.problem("console.error: " + strings.Join(parts, " "))
			}
		default:
			b.trace(ev)
		}
	})
	// The first Run starts the browser, which lives as long as the
	// context given to it: ctx, not a shorter one.
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		_ = os.RemoveAll(profile)
		coretest.Unavailable(t, "chromium", exe, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	return b
}

func (b *Browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// trace records the network and log events a failed step reports.
func (b *Browser) trace(ev any) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := &b.net
	note := func(format string, args ...any) {
		n.events = append(n.events, fmt.Sprintf("%.1fs ", time.Since(n.start).Seconds())+fmt.Sprintf(format, args...))
		if len(n.events) > maxTraceEvents {
			n.events = n.events[len(n.events)-maxTraceEvents:]
		}
	}
	switch e := ev.(type) {
	case *network.EventRequestWillBeSent:
		if e.Request != nil {
			n.open[e.RequestID] = openRequest{url: e.Request.URL, sent: time.Now()}
		}
	case *network.EventResponseReceived:
		if e.Response != nil && e.Response.Status >= 400 {
			note("HTTP %d %s", e.Response.Status, e.Response.URL)
		}
	case *network.EventLoadingFinished:
		delete(n.open, e.RequestID)
	case *network.EventLoadingFailed:
		note("failed %s: %s (canceled %v)", n.open[e.RequestID].url, e.ErrorText, e.Canceled)
		delete(n.open, e.RequestID)
	case *cdplog.EventEntryAdded:
		if e.Entry != nil && (e.Entry.Level == cdplog.LevelError || e.Entry.Level == cdplog.LevelWarning) {
			note("log %s %s: %s %s", e.Entry.Level, e.Entry.Source, e.Entry.Text, e.Entry.URL)
		}
	}
}

// Diagnosis describes the page for a step that failed: its load state
// and the start of its body, the requests still open and the latest
// failed loads and log errors.
func (b *Browser) Diagnosis() string {
	var page struct {
		Ready string `json:"ready"`
		URL   string `json:"url"`
		Body  string `json:"body"`
	}
	var out strings.Builder
	if err := b.Try(3*time.Second, chromedp.Evaluate(`({ready: document.readyState, url: location.href,
		body: document.body ? document.body.innerHTML.slice(0, 300) : ''})`, &page)); err != nil {
		fmt.Fprintf(&out, "page state: %v", err)
	} else {
		fmt.Fprintf(&out, "page %s %s, body %q", page.URL, page.Ready, page.Body)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.net.open {
		fmt.Fprintf(&out, "; open for %.1fs: %s", time.Since(r.sent).Seconds(), r.url)
	}
	for _, e := range b.net.events {
		fmt.Fprintf(&out, "; %s", e)
	}
	return out.String()
}

// Problems returns the page errors seen so far: uncaught exceptions,
// console errors (which is where Chromium reports CSP violations).
func (b *Browser) Problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.problems...)
}

// Context is the tab's context, for chromedp calls of the test's own.
func (b *Browser) Context() context.Context { return b.ctx }

// Run runs actions within Step, failing the test with what was being done.
func (b *Browser) Run(what string, actions ...chromedp.Action) {
	b.t.Helper()
	if err := b.Try(Step, actions...); err != nil {
		b.Screenshot("failed-" + what)
		b.t.Fatalf("browser: %s: %v (page errors: %v; %s)", what, err, b.Problems(), b.Diagnosis())
	}
}

// Try runs actions within d and returns their error.
func (b *Browser) Try(d time.Duration, actions ...chromedp.Action) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Run(ctx, actions...)
}

// Eval evaluates a JavaScript expression (awaiting a promise) into out.
func (b *Browser) Eval(what, expr string, out any) {
	b.t.Helper()
	b.Run(what, chromedp.Evaluate(expr, out, func(p *runtime.EvaluateParams) *runtime.EvaluateParams {
		return p.WithAwaitPromise(true)
	}))
}

// WaitFor polls the JavaScript condition expr (every 100 ms, within
// Step) until it is true.
func (b *Browser) WaitFor(what, expr string) {
	b.t.Helper()
	b.Run(what, Poll(expr, Step-time.Second))
}

// Poll is chromedp.Poll of expr every 100 ms within timeout, with an
// expr that throws counting as false. chromedp's poll loop dies silently
// on the first throw after its first try (an unhandled rejection in a
// timer), which left a test waiting out its step whenever a page happened
// to be re-rendering (querySelector(...) null) at that tick.
func Poll(expr string, timeout time.Duration) chromedp.Action {
	guarded := "(() => { try { return (" + expr + "); } catch (e) { return false; } })()"
	return chromedp.Poll(guarded, nil, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(timeout))
}

// WaitForPage is WaitFor for the first state of a page just opened. A
// page that is not there within half a Step is logged with its
// diagnosis and reloaded once: a first load on a machine loaded by
// other tests has been seen to stall, and what the test is about comes
// after it. A page that fails twice fails the test.
func (b *Browser) WaitForPage(what, expr string) {
	b.t.Helper()
	if err := b.Try(Step/2, Poll(expr, Step/2-time.Second)); err == nil {
		return
	}
	b.Screenshot("stalled-" + what)
	b.t.Logf("browser: %s: not there in %s, reloading once (%s)", what, Step/2, b.Diagnosis())
	b.Run("reload for "+what, chromedp.Reload())
	b.Run(what, Poll(expr, Step-time.Second))
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Screenshot saves the whole page as <name>.png and logs where.
func (b *Browser) Screenshot(name string) string {
	b.t.Helper()
	if err := os.MkdirAll(b.shots, 0o755); err != nil {
		b.t.Errorf("screenshot dir: %v", err)
		return ""
	}
	var png []byte
	if err := b.Try(Step, chromedp.FullScreenshot(&png, 100)); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(b.shots, unsafeName.ReplaceAllString(name, "_")+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return ""
	}
	b.t.Logf("screenshot %s", p)
	return p
}
