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
}

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
	// profile for a moment after the browser is closed, which fails the
	// test in TempDir's cleanup. Registered before the browser's cleanup,
	// this one runs after it.
	profile, err := os.MkdirTemp("", "edgeplat-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeProfile(t, profile) })
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
	b := &Browser{t: t, ctx: ctx}
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
		}
	})
	// The first Run starts the browser, which lives as long as the
	// context given to it: ctx, not a shorter one.
	if err := chromedp.Run(ctx); err != nil {
		cancel()
		cancelAlloc()
		coretest.Unavailable(t, "chromium", exe, err)
	}
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	return b
}

// removeProfile removes a closed browser's profile, retrying while its
// last helper processes finish writing.
func removeProfile(t testing.TB, dir string) {
	var err error
	for range 50 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("browser profile %s not removed: %v", dir, err)
}

func (b *Browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
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
		b.t.Fatalf("browser: %s: %v (page errors: %v)", what, err, b.Problems())
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
	b.Run(what, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(100*time.Millisecond), chromedp.WithPollingTimeout(Step-time.Second)))
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
