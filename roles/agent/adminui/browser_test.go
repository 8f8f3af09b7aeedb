package adminui_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/goburrow/modbus"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/webui"
	"github.com/edgeplat/edgeplat/roles/agent"
)

const apiKey = "admin-ui-test-key-0123456789"

// startAgent runs the agent role in-process, as cmd does, on a free
// port, and waits until it is ready: in API_KEY mode with apiKey, or
// LOCALHOST_ONLY when keyMode is false.
func startAgent(t *testing.T, keyMode bool) string {
	t.Helper()
	return startAgentWith(t, keyMode, nil)
}

// startAgentWith is startAgent with tweak applied to the configuration
// first (simulation mode, say).
func startAgentWith(t *testing.T, keyMode bool, tweak func(*config.Config)) string {
	t.Helper()
	cfg := &config.Config{}
	cfg.Agent = config.Agent{Port: coretest.FreePort(t), SecurityMode: "LOCALHOST_ONLY", DataDir: t.TempDir()}
	if keyMode {
		cfg.Agent.SecurityMode, cfg.Agent.APIKey = "API_KEY", apiKey
	}
	if tweak != nil {
		tweak(cfg)
	}
	r := &rt.Runtime{Logger: slog.New(slog.DiscardHandler), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	svcs, err := agent.New(cfg, r, agent.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, lifecycle.Options{GracePeriod: 5 * time.Second}, svcs...) }()
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("agent stopped with %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("agent did not stop")
		}
	})
	base := "http://127.0.0.1:" + strconv.Itoa(cfg.Agent.Port)
	coretest.Eventually(t, 15*time.Second, "agent ready", func() bool {
		code, _ := call(t, "GET", base+"/v1/readiness", "", nil)
		return code == 200
	})
	return base
}

// call sends a request with the headers given and returns status and body.
func call(t *testing.T, method, url, body string, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startPymodbus runs the Modbus adapter's test server (Debian's
// python3-pymodbus): holding register i of unit u holds u*1000+i.
func startPymodbus(t *testing.T) int {
	t.Helper()
	port := coretest.FreePort(t)
	coretest.Pymodbus(t, "../adapters/modbus/testdata/server.py", port, "--units", "1", "--registers", "100")
	return port
}

// writeRegister changes a holding register on the simulator, as another
// Modbus master on the line would.
func writeRegister(t *testing.T, port int, reg, value uint16) {
	t.Helper()
	h := modbus.NewTCPClientHandler("127.0.0.1:" + strconv.Itoa(port))
	h.SlaveId = 1
	h.Timeout = 2 * time.Second
	if err := h.Connect(); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := modbus.NewClient(h).WriteSingleRegister(reg, value); err != nil {
		t.Fatalf("write holding %d: %v", reg, err)
	}
}

// ui wraps the browser with the admin UI's usual steps.
type ui struct {
	*browsertest.Browser
	t    *testing.T
	base string
}

// WaitFor polls expr until it is true, across the page reloads that
// login and logout cause (a reload ends a running poll with an error).
func (u ui) WaitFor(what, expr string) {
	u.t.Helper()
	deadline := time.Now().Add(browsertest.Step)
	for {
		err := u.Try(5*time.Second, browsertest.Poll(expr, 5*time.Second))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			u.Screenshot("failed-" + what)
			u.t.Fatalf("browser: %s: %v (page errors: %v; %s)", what, err, u.Problems(), u.Diagnosis())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (u ui) goTo(hash, ready string) {
	u.t.Helper()
	u.Run("open "+hash, chromedp.Evaluate(fmt.Sprintf("location.hash = %q", hash), nil))
	u.WaitFor(hash+" shows "+ready, fmt.Sprintf("document.querySelector(%q) !== null", ready))
}

func (u ui) text(sel string) string {
	u.t.Helper()
	var s string
	u.Eval("text of "+sel, fmt.Sprintf("(document.querySelector(%q) || {}).textContent || ''", sel), &s)
	return s
}

// submit submits a form as the Enter key or its button would, running
// its submit handler (chromedp.Submit's form.submit() skips it).
func (u ui) submit(what, form string) {
	u.t.Helper()
	u.Run(what, chromedp.Evaluate(fmt.Sprintf("document.querySelector(%q).requestSubmit()", form), nil))
}

func (u ui) set(form, name, value string) {
	u.t.Helper()
	sel := fmt.Sprintf(`%s [data-input=%q]`, form, name)
	u.Run("set "+name, chromedp.SetValue(sel, value, chromedp.ByQuery))
}

// setupAdmin creates the first admin through the setup form of an agent
// in LOCALHOST_ONLY mode (which asks no key), which logs in.
func (u ui) setupAdmin() {
	u.t.Helper()
	u.Run("open the UI", chromedp.Navigate(u.base+"/admin/"))
	u.WaitForPage("setup form", `document.querySelector('#setup') !== null`)
	var asksKey bool
	u.Eval("key field", `document.querySelector('#setup [data-input="apiKey"]') !== null`, &asksKey)
	if asksKey {
		u.t.Error("setup asks for an API key in LOCALHOST_ONLY mode")
	}
	u.Run("fill setup",
		chromedp.SendKeys(`#setup [data-input="username"]`, "root", chromedp.ByQuery),
		chromedp.SendKeys(`#setup [data-input="password"]`, "correct horse"+kb.Enter, chromedp.ByQuery))
	u.WaitFor("logged in", `document.querySelector('#logout') !== null`)
}

func newUI(t *testing.T, base string) ui {
	t.Helper()
	u := ui{Browser: browsertest.New(t), t: t, base: base}
	u.Run("watch CSP", chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(cspWatch).Do(ctx)
		return err
	}))
	return u
}

// cspWatch reports every Content-Security-Policy violation as a console
// error, where browsertest's Problems() sees it; it runs in each page
// before the page's own scripts.
const cspWatch = `document.addEventListener('securitypolicyviolation', e =>
  console.error('CSP violation: ' + e.violatedDirective + ' blocked ' + e.blockedURI));`

// TestAdminUIIntegration walks the admin UI in Chromium against a real
// agent in API_KEY mode reading a real Modbus simulator: first-run setup,
// logout and login, an endpoint created through the form with a field
// error first, live values and the chart growing, every main page, the
// cookie's flags, the CSP on every answer, cross-site forms refused, and
// the old cookie worthless after logout.
func TestAdminUIIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser, an agent and a Modbus server")
	}
	mbPort := startPymodbus(t)
	base := startAgent(t, true)
	key := map[string]string{"X-Api-Key": apiKey}
	u := newUI(t, base)
	b := u.Browser

	// 1. First-run setup through the page (the key asked once), which
	// logs in; then log out and log in through the form.
	u.Run("open the UI", chromedp.Navigate(base+"/admin"))
	u.WaitForPage("setup form", `document.querySelector('#setup [data-input="apiKey"]') !== null`)
	u.WaitFor("load event", `performance.getEntriesByType('navigation')[0].loadEventEnd > 0`)
	var nav struct {
		DOMContentLoaded float64 `json:"dcl"`
		Load             float64 `json:"load"`
		Transfer         float64 `json:"transfer"`
	}
	u.Eval("navigation timing", `(() => { const n = performance.getEntriesByType('navigation')[0];
		return {dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd, transfer: n.transferSize}; })()`, &nav)
	t.Logf("first page load: domContentLoaded %.1f ms, loadEventEnd %.1f ms (page %v bytes)", nav.DOMContentLoaded, nav.Load, nav.Transfer)
	u.Run("fill setup",
		chromedp.SendKeys(`#setup [data-input="username"]`, "root", chromedp.ByQuery),
		chromedp.SendKeys(`#setup [data-input="password"]`, "correct horse", chromedp.ByQuery),
		chromedp.SendKeys(`#setup [data-input="apiKey"]`, apiKey+kb.Enter, chromedp.ByQuery))
	u.WaitFor("logged in after setup", `document.querySelector('#logout') !== null`)
	if code, body := call(t, "GET", base+"/v1/auth/setup", "", nil); code != 200 || !strings.Contains(body, `"required":false`) {
		t.Fatalf("setup state after setup = %d %s", code, body)
	}
	u.Run("log out", chromedp.Click("#logout", chromedp.ByQuery))
	u.WaitFor("login form", `document.querySelector('#login') !== null`)
	u.Run("log in",
		chromedp.SendKeys(`#login [data-input="username"]`, "root", chromedp.ByQuery),
		chromedp.SendKeys(`#login [data-input="password"]`, "correct horse"+kb.Enter, chromedp.ByQuery))
	u.WaitFor("logged in", `document.querySelector('#logout') !== null`)
	u.WaitFor("overview cards", `document.querySelectorAll('#overview-cards .card').length >= 6`)
	b.Screenshot("admin-overview")

	// 2 and 4. An endpoint through the form: an out-of-range register
	// first, whose error shows by its field, then a good one.
	u.goTo("#/endpoints/new", "#endpoint-form")
	u.Run("fill endpoint", chromedp.SendKeys(`#endpoint-form [data-input="name"]`, "press-1", chromedp.ByQuery))
	u.set("#endpoint-form", "connection.host", "127.0.0.1")
	u.set("#endpoint-form", "connection.port", strconv.Itoa(mbPort))
	u.set("#endpoint-form", "connection.unitId", "1")
	u.set("#endpoint-form", "data_points[0].name", "level")
	u.set("#endpoint-form", "data_points[0].register", "holding:70000")
	u.set("#endpoint-form", "data_points[0].unit", "mm")
	u.Run("submit endpoint", chromedp.Click("#save-endpoint", chromedp.ByQuery))
	errSel := `[data-field="data_points[0].register"] .field-error`
	u.WaitFor("register error", fmt.Sprintf(`(e => e && !e.hidden && e.textContent !== '')(document.querySelector(%q))`, errSel))
	if msg := u.text(errSel); !strings.Contains(msg, "out of range") {
		t.Fatalf("error by the register field = %q", msg)
	}
	var focused string
	u.Eval("focus", `document.activeElement.dataset.input || ''`, &focused)
	if focused != "data_points[0].register" {
		t.Errorf("focus after the error is on %q, want the register field", focused)
	}
	b.Screenshot("admin-endpoint-form-error")
	if code, body := call(t, "GET", base+"/v1/endpoints", "", key); code != 200 || strings.Contains(body, "press-1") {
		t.Fatalf("a refused endpoint was stored: %d %s", code, body)
	}
	u.set("#endpoint-form", "data_points[0].register", "holding:5")
	u.Run("submit endpoint again", chromedp.Click("#save-endpoint", chromedp.ByQuery))

	// 3. The device page shows the simulator's value, then the new one
	// after the register changes; the chart's points grow.
	u.WaitFor("device page", `location.hash === '#/devices/modbus/press-1'`)
	valSel := `[data-value="level"]`
	u.WaitFor("first value", fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === '1005'`, valSel))
	var before int
	u.Eval("chart points", `Number(document.querySelector('#device-chart').getAttribute('data-points'))`, &before)
	writeRegister(t, mbPort, 5, 4242)
	u.WaitFor("changed value", fmt.Sprintf(`(document.querySelector(%q) || {}).textContent === '4242'`, valSel))
	u.WaitFor("chart grows", fmt.Sprintf(`Number(document.querySelector('#device-chart').getAttribute('data-points')) >= %d`, before+2))
	var inChart bool
	u.Eval("chart data", `document.querySelector('#device-chart').chartData.series[0].includes(4242)`, &inChart)
	if !inChart {
		t.Error("the chart's data does not hold the new value 4242")
	}
	if q := u.text(`[data-point="level"] .badge`); q != "GOOD" {
		t.Errorf("quality badge = %q, want GOOD", q)
	}
	b.Screenshot("admin-device")

	u.goTo("#/endpoints", `[data-endpoint="press-1"]`)
	u.WaitFor("endpoint health", `document.querySelector('[data-health="press-1"]').textContent.includes('connected')`)
	b.Screenshot("admin-endpoints")

	// 7. The other pages, each doing one thing through its form.
	u.goTo("#/publishing/destinations/new", "#destination-form")
	u.set("#destination-form", "name", "plant-broker")
	u.set("#destination-form", "config_json", `{"url": "tcp://127.0.0.1:1"}`)
	u.Run("test destination", chromedp.Click("#test-destination", chromedp.ByQuery))
	u.WaitFor("test result", `document.querySelector('#test-result .alert') !== null`)
	if r := u.text("#test-result"); !strings.Contains(r, "Connection failed") {
		t.Errorf("test of a closed port = %q", r)
	}
	u.submit("save destination", "#destination-form")
	u.WaitFor("publishing page", `document.querySelector('[data-queue="plant-broker"]') !== null`)
	b.Screenshot("admin-publishing")
	u.goTo("#/provisioning", "#provision-form")
	b.Screenshot("admin-provisioning")
	u.goTo("#/logs", "#logs table")
	b.Screenshot("admin-logs")
	u.goTo("#/settings", "#settings-form")
	u.set("#settings-form", "intervals.statePollMs", "5")
	u.submit("save settings", "#settings-form")
	u.WaitFor("settings error", `!document.querySelector('[data-field="intervals.statePollMs"] .field-error').hidden`)
	if msg := u.text(`[data-field="intervals.statePollMs"] .field-error`); !strings.Contains(msg, "1000..86400000") {
		t.Errorf("settings error = %q", msg)
	}
	b.Screenshot("admin-settings")
	u.goTo("#/users", "#user-form")
	u.set("#user-form", "username", "operator")
	u.set("#user-form", "password", "operator pass")
	u.submit("create user", "#user-form")
	u.WaitFor("new user", `document.querySelector('[data-user="operator"]') !== null`)
	b.Screenshot("admin-users")
	u.goTo("#/jobs", "#jobs p, #jobs table")

	// 6. The session cookie's flags, as the browser holds it.
	var cookies []*network.Cookie
	u.Run("cookies", chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		cookies, err = network.GetCookies().WithURLs([]string{base}).Do(ctx)
		return err
	}))
	var session *network.Cookie
	for _, c := range cookies {
		if c.Name == "admin_session" {
			session = c
		}
	}
	if session == nil {
		t.Fatalf("no admin_session cookie in %v", cookies)
	}
	if !session.HTTPOnly || session.SameSite != network.CookieSameSiteStrict {
		t.Errorf("cookie HttpOnly=%v SameSite=%q, want HttpOnly and Strict", session.HTTPOnly, session.SameSite)
	}

	// The CSP is on the page, its redirect and every file it loaded.
	var urls []string
	u.Eval("loaded files", `performance.getEntriesByType('resource').map(e => e.name).filter(n => n.startsWith(location.origin + '/admin'))`, &urls)
	urls = append(urls, base+"/admin", base+"/admin/")
	if len(urls) < 15 {
		t.Errorf("only %d files loaded: %v", len(urls), urls)
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, url := range urls {
		resp, err := noRedirect.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := resp.Header.Get("Content-Security-Policy"); got != webui.ContentSecurityPolicy || resp.StatusCode >= 400 {
			t.Errorf("%s: %d, CSP %q", url, resp.StatusCode, got)
		}
	}

	// Cross-site forms posting to the API while the browser holds a
	// valid session: from another host name and from another port of
	// the same host, urlencoded and text/plain (the JSON-in-a-form trick).
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		enctype := r.URL.Query().Get("enctype")
		fmt.Fprintf(w, `<!doctype html><form id="f" method="POST" action="%s/v1/endpoints" enctype="%s">
<input name='{"name":"csrf-%s","protocol":"modbus","connection":{"host":"127.0.0.1"},"data_points":[{"name":"a","register":"holding:1"}],"x":"' value='"}'>
</form><script>document.getElementById('f').submit()</script>`, base, enctype, strings.ReplaceAll(enctype, "/", "-"))
	}))
	defer evil.Close()
	evilPort := evil.URL[strings.LastIndex(evil.URL, ":")+1:]
	for _, host := range []string{"localhost", "127.0.0.1"} {
		for _, enctype := range []string{"text/plain", "application/x-www-form-urlencoded"} {
			page := fmt.Sprintf("http://%s:%s/?enctype=%s", host, evilPort, enctype)
			u.Run("open "+page, chromedp.Navigate(page))
			u.WaitFor("form posted from "+page, fmt.Sprintf(`location.href.startsWith(%q)`, base+"/v1/endpoints"))
			t.Logf("cross-site form from %s (%s) answered: %s", host, enctype, strings.TrimSpace(u.text("body")))
		}
	}
	if code, body := call(t, "GET", base+"/v1/endpoints", "", key); code != 200 || strings.Contains(body, "csrf") || !strings.Contains(body, "press-1") {
		t.Fatalf("after the cross-site forms the endpoints are %d %s", code, body)
	}

	// 5. Log out; the cookie the browser had no longer opens the API.
	u.Run("back to the UI", chromedp.Navigate(base+"/admin/#/"))
	u.WaitFor("shell", `document.querySelector('#logout') !== null`)
	u.Run("log out", chromedp.Click("#logout", chromedp.ByQuery))
	u.WaitFor("login form after logout", `document.querySelector('#login') !== null`)
	old := map[string]string{"Cookie": "admin_session=" + session.Value}
	for _, p := range []string{"/v1/endpoints", "/v1/auth/me", "/v1/admin/users"} {
		if code, body := call(t, "GET", base+p, "", old); code != 401 {
			t.Errorf("GET %s with the logged-out cookie = %d %s, want 401", p, code, body)
		}
	}

	// No page logged an error or tripped the CSP.
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page errors and CSP violations: %v", p)
	}
}

// TestAdminUIPagesIntegration opens every page and form of the UI, each
// protocol's endpoint form included, on an agent in LOCALHOST_ONLY mode
// (setup asks no key there), and fails on any page error or CSP
// violation.
func TestAdminUIPagesIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser and an agent")
	}
	base := startAgent(t, false)
	u := newUI(t, base)
	u.setupAdmin()
	for _, ep := range []string{
		`{"name":"plc","protocol":"modbus","connection":{"host":"127.0.0.1","port":1},"data_points":[{"name":"a","register":"hr:1"}]}`,
		`{"name":"ua","protocol":"opcua","enabled":false,"connection":{"endpointUrl":"opc.tcp://127.0.0.1:1","password":"pw","username":"u"},"data_points":[{"name":"t","register":"ns=1;s=T"}]}`,
		`{"name":"feed","protocol":"mqtt","enabled":false,"connection":{"brokerUrl":"tcp://127.0.0.1:1","topics":["a/#"]},"data_points":[{"name":"t","register":"temp"}]}`,
	} {
		if code, body := call(t, "POST", base+"/v1/endpoints", ep, nil); code != 201 {
			t.Fatalf("create %s: %d %s", ep, code, body)
		}
	}
	for _, p := range []struct{ hash, ready string }{
		{"#/", "#overview-cards .card"},
		{"#/endpoints", `[data-endpoint="feed"]`},
		{"#/endpoints/new", `[data-input="connection.host"]`},
		{"#/endpoints/new?protocol=opcua", `[data-input="connection.endpointUrl"]`},
		{"#/endpoints/new?protocol=mqtt", `[data-input="connection.topics"]`},
		{"#/endpoints/new?protocol=bacnet", `[data-input="connection.deviceInstance"]`},
		{"#/endpoints/edit/plc", `[data-input="data_points[0].register"]`},
		{"#/endpoints/edit/ua", `[data-input="connection.password"]`},
		{"#/endpoints/edit/feed", `[data-input="connection.brokerUrl"]`},
		{"#/devices/modbus/plc", "#values"},
		{"#/publishing", "#queue p"},
		{"#/publishing/destinations/new", "#destination-form"},
		{"#/publishing/subscriptions/new", "#subscriptions, a[href='#/publishing/destinations/new']"},
		{"#/provisioning", "#provision-form"},
		{"#/logs", "#logs table"},
		{"#/settings", "#settings-form"},
		{"#/users", `[data-user="root"]`},
		{"#/jobs", "#jobs p"},
		{"#/apps", "#apps p, #apps section, #apps .alert"},
		{"#/apps", "#runtime-form, #runtime-config .alert"},
		{"#/apps/new", `[data-input="services[0].config.environment"]`},
		{"#/discovery", "#discover-form"},
		{"#/discovery", "#discovery-rules p, #discovery-runs p"},
		{"#/simulation", "#simulation-off"},
		{"#/anomaly", "#anomaly-metrics table, #anomaly-metrics p"},
		{"#/drift", `#drift-outputs form[data-protocol="modbus"]`}, // last: the drift steps below start on it
	} {
		u.goTo(p.hash, p.ready)
	}
	// Drift: the form turns detection on for one output; a bad window
	// shows by its field and changes nothing.
	form := `#drift-outputs form[data-protocol="modbus"]`
	u.Run("tick drift", chromedp.Click(form+` [data-input="drift_options.enabled"]`, chromedp.ByQuery))
	u.set(form, "drift_options.windowMs", "-5")
	u.submit("bad drift window", form)
	u.WaitFor("window error", fmt.Sprintf("document.querySelector(%q) !== null", form+` [data-field="drift_options.windowMs"].invalid`))
	if _, body := call(t, "GET", base+"/v1/protocol-outputs", "", nil); strings.Contains(body, `"enabled":true`) {
		t.Errorf("a refused drift form changed the outputs: %s", body)
	}
	u.set(form, "drift_options.windowMs", "2000")
	u.submit("drift on", form)
	u.WaitFor("drift state", `document.querySelector('#drift-state [data-state="modbus"]') !== null`)
	if _, body := call(t, "GET", base+"/v1/protocol-outputs", "", nil); !strings.Contains(body, `"enabled":true`) || !strings.Contains(body, `"windowMs":2000`) {
		t.Errorf("the drift form did not turn detection on with a 2 s window: %s", body)
	}
	u.Screenshot("drift")

	// Anomaly: a metric tuned below the lowest threshold is refused by its
	// field and changes nothing; a good one is saved.
	u.goTo("#/anomaly", "#anomaly-config")
	u.Run("add a metric", chromedp.Click(`#anomaly-config button.secondary`, chromedp.ByQuery))
	u.set("#anomaly-config", "metrics[0].name", "a")
	u.set("#anomaly-config", "metrics[0].threshold", "0.5")
	u.submit("bad threshold", "#anomaly-config")
	u.WaitFor("threshold error", `document.querySelector('#anomaly-config [data-field="metrics[0].threshold"].invalid') !== null`)
	if _, body := call(t, "GET", base+"/v1/anomaly/config", "", nil); strings.Contains(body, `"name":"a"`) {
		t.Errorf("a refused anomaly form changed the configuration: %s", body)
	}
	u.set("#anomaly-config", "metrics[0].threshold", "6")
	u.submit("good threshold", "#anomaly-config")
	u.WaitFor("saved", `(document.querySelector('#anomaly-config').previousElementSibling || {}).textContent === 'Configuration saved.'`)
	if _, body := call(t, "GET", base+"/v1/anomaly/config", "", nil); !strings.Contains(body, `"name":"a"`) || !strings.Contains(body, `"threshold":6`) {
		t.Errorf("the anomaly form did not save metric a with threshold 6: %s", body)
	}
	u.Screenshot("anomaly")
	// The edit form keeps what it does not show: a PATCH from it changes
	// nothing it was not asked to.
	u.goTo("#/endpoints/edit/feed", "#endpoint-form")
	u.Run("save unchanged", chromedp.Click("#save-endpoint", chromedp.ByQuery))
	u.WaitFor("back to the list", `location.hash === '#/endpoints'`)
	_, body := call(t, "GET", base+"/v1/endpoints?protocol=mqtt", "", nil)
	if !strings.Contains(body, `"topics":["a/#"]`) || !strings.Contains(body, `"register":"temp"`) {
		t.Errorf("saving the form unchanged altered the endpoint: %s", body)
	}
	if p := u.Problems(); len(p) > 0 {
		t.Errorf("page errors and CSP violations: %v", p)
	}
}
