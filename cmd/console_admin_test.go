package cmd

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
)

// TestConsoleAdminPagesIntegration drives the console's administration
// pages in Chromium against all-in-one: the agents list with its map, a
// job dispatched and followed live, a fleet stopped and started, keys
// shown once, and the Content-Security-Policy on everything the pages
// load. A second tenant's user then sees none of it.
func TestConsoleAdminPagesIntegration(t *testing.T) {
	r := startConsoleRig(t)
	api := func(method, path, body string, want int) map[string]any {
		t.Helper()
		code, out := jsonDo(t, method, r.apiURL+path, r.access, body)
		if code != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, code, out, want)
		}
		return out
	}
	// Tags and a location, so the list has something to filter and the
	// map a point to draw.
	api("POST", "/agents/"+r.agent+"/tags", `{"tags":{"site":"north","line":"3"}}`, http.StatusOK)
	api("PATCH", "/agents/"+r.agent, `{"location":{"latitude":48.14,"longitude":11.58,"label":"Munich plant"}}`, http.StatusOK)
	agentName, _ := api("GET", "/agents/"+r.agent, "", http.StatusOK)["name"].(string)

	b := browsertest.New(t)
	r.login(b)
	// Hash navigation never reloads the page; the marker proves it.
	b.Eval("set the reload marker", `window.__marker = 1`, nil)

	// 1. The agents list: the rig's agent online, on the map, filterable.
	row := fmt.Sprintf(`document.querySelector('table a[data-agent=%q]')`, r.agent)
	b.WaitFor("the agent online in the list", row+`?.closest('tr')?.querySelector('.badge')?.textContent === 'online'`)
	b.WaitFor("the agent's point on the map", fmt.Sprintf(`document.querySelector('svg.agent-map a.point[data-agent=%q][data-status=online]') !== null`, r.agent))
	var counts []string
	b.Eval("filter by tag and text", `(() => {
		const set = (id, v) => { const el = document.getElementById(id); el.value = v; el.dispatchEvent(new Event('input')); };
		const out = [];
		set('agent-tag', 'line=3'); out.push(document.getElementById('agent-count').textContent);
		set('agent-filter', 'no-such-agent'); out.push(document.getElementById('agent-count').textContent);
		set('agent-filter', ''); set('agent-tag', ''); out.push(document.getElementById('agent-count').textContent);
		return out;
	})()`, &counts)
	if strings.Join(counts, "|") != "1 of 1|0 of 1|1 of 1" {
		t.Errorf("agent counts while filtering = %q", counts)
	}
	b.Screenshot("admin-agents-map")

	// 2. A collect-diagnostics job dispatched through the page, followed
	// live to succeeded.
	goTo(b, "/jobs")
	b.WaitFor("the dispatch form", fmt.Sprintf(`document.querySelector('#job-dispatch input[name=agent][value=%q]') !== null`, r.agent))
	b.Run("dispatch collect-diagnostics",
		chromedp.SetValue(`#job-dispatch select[name=handler]`, "collect-diagnostics", chromedp.ByQuery),
		chromedp.Click(fmt.Sprintf(`#job-dispatch input[name=agent][value=%q]`, r.agent), chromedp.ByQuery),
		chromedp.Click(`#job-dispatch-submit`, chromedp.ByQuery))
	b.WaitFor("the job page", `location.hash.startsWith('#/jobs/') && document.querySelector('#job-executions') !== null`)
	b.WaitFor("the execution succeeded", fmt.Sprintf(`document.querySelector('.exec-status[data-agent=%q]')?.dataset.status === 'succeeded'`, r.agent))
	b.WaitFor("the job completed", `document.querySelector('#job-status .badge')?.textContent === 'completed'`)
	var state struct {
		Marker int    `json:"marker"`
		Live   string `json:"live"`
		Job    string `json:"job"`
	}
	b.Eval("the page state", `({marker: window.__marker, live: document.querySelector('.live').dataset.state,
		job: decodeURIComponent(location.hash.slice('#/jobs/'.length))})`, &state)
	if state.Marker != 1 {
		t.Errorf("the page reloaded while following the job (marker %d)", state.Marker)
	}
	if state.Live != "open" {
		t.Errorf("the job page's event stream is %q, want open", state.Live)
	}
	job := api("GET", "/jobs/executions/"+state.Job, "", http.StatusOK)
	if job["handler"] != "collect-diagnostics" || job["status"] != "completed" {
		t.Errorf("the dispatched job = %v", job)
	}
	b.Screenshot("admin-job-live")
	goTo(b, "/jobs")
	b.WaitFor("the job in the executions list", fmt.Sprintf(`document.querySelector('#executions a[data-job=%q]') !== null`, state.Job))
	b.Screenshot("admin-jobs")

	// A template made through the page, then dispatched from it.
	b.Run("open the template form", chromedp.Click(`#templates details.panel > summary`, chromedp.ByQuery))
	b.Run("create a template",
		chromedp.SendKeys(`#templates .template-form input[name=name]`, "nightly sync", chromedp.ByQuery),
		chromedp.SetValue(`#templates .template-form select[name=handler]`, "sync", chromedp.ByQuery),
		chromedp.Click(`#templates .template-form button[type=submit]`, chromedp.ByQuery))
	b.WaitFor("the template listed and offered", `[...document.querySelectorAll('#templates td')].some(td => td.textContent === 'nightly sync')
		&& !document.querySelector('#job-dispatch input[name=source][value=template]').disabled`)
	b.Run("dispatch from the template",
		chromedp.Click(`#job-dispatch input[name=source][value=template]`, chromedp.ByQuery),
		chromedp.Click(fmt.Sprintf(`#job-dispatch input[name=agent][value=%q]`, r.agent), chromedp.ByQuery),
		chromedp.Click(`#job-dispatch-submit`, chromedp.ByQuery))
	b.WaitFor("the template's job succeeded", fmt.Sprintf(`location.hash !== '#/jobs/%s' && document.querySelector('#job-status') !== null
		&& document.querySelector('.exec-status[data-agent=%q]')?.dataset.status === 'succeeded'`, state.Job, r.agent))
	var tplJobID string
	b.Eval("the template job's id", `decodeURIComponent(location.hash.slice('#/jobs/'.length))`, &tplJobID)
	if j := api("GET", "/jobs/executions/"+tplJobID, "", http.StatusOK); j["handler"] != "sync" || j["templateId"] == nil {
		t.Errorf("the job dispatched from the template = %v", j)
	}

	// 3. A fleet created, the agent added, stopped and started; the
	// usage timeline shows each step.
	const fleetName = "line-3-presses"
	goTo(b, "/fleets?new")
	b.WaitFor("the fleet form", `document.querySelector('#fleet-create input[name=name]') !== null`)
	b.Run("create a fleet",
		chromedp.SendKeys(`#fleet-create input[name=name]`, fleetName, chromedp.ByQuery),
		chromedp.SendKeys(`#fleet-create textarea[name=description]`, "Presses of line 3", chromedp.ByQuery),
		chromedp.SendKeys(`#fleet-create textarea[name=template]`, `{"schemaVersion": 1, "settings": {"logging": {"level": "info"}}}`, chromedp.ByQuery),
		chromedp.Click(`#fleet-create button[type=submit]`, chromedp.ByQuery))
	b.WaitFor("the fleet page", `location.hash.startsWith('#/fleets/') && document.querySelector('#fleet-add') !== null`)
	b.Run("add the agent",
		chromedp.SetValue(`#fleet-add-agent`, r.agent, chromedp.ByQuery),
		chromedp.Click(`#fleet-add button[type=submit]`, chromedp.ByQuery))
	b.WaitFor("the agent is a member", fmt.Sprintf(`document.querySelector('#remove-%s') !== null`, r.agent))
	b.Run("stop the fleet", chromedp.Click(`#fleet-stop`, chromedp.ByQuery))
	b.WaitFor("the fleet stopped", `document.querySelector('#fleet-run .badge')?.textContent === 'stopped' && document.querySelector('#fleet-events li[data-kind=stopped]') !== null`)
	b.Run("start the fleet", chromedp.Click(`#fleet-start`, chromedp.ByQuery))
	b.WaitFor("the fleet running", `document.querySelector('#fleet-run .badge')?.textContent === 'running' && document.querySelector('#fleet-events li[data-kind=started]') !== null`)
	var kinds []string
	b.Eval("the timeline", `[...document.querySelectorAll('#fleet-events li')].map(li => li.dataset.kind)`, &kinds)
	if strings.Join(kinds, ",") != "started,stopped,agent_added,created" {
		t.Errorf("usage timeline = %v, want started, stopped, agent_added, created (newest first)", kinds)
	}
	b.Screenshot("admin-fleet")
	var fleetHash string
	b.Eval("the fleet's route", `location.hash`, &fleetHash)
	goTo(b, "/fleets")
	b.WaitFor("the fleet in the list", fmt.Sprintf(`[...document.querySelectorAll('main table a')].some(a => a.textContent === %q)`, fleetName))
	b.Screenshot("admin-fleets")

	// 4. Keys: the secret shows once, with a copy button, and never again.
	apiKey := createdOnce(b, "/api-keys", "#api-key-create", "ci-export-key", "ek_", "#api-keys")
	b.Screenshot("admin-api-keys")
	provKey := createdOnce(b, "/provisioning", "#provisioning-create", "line-3-gateways", "pk_", "#provisioning-keys")
	b.Screenshot("admin-provisioning")
	for _, hash := range []string{"/api-keys", "/provisioning"} {
		goTo(b, hash)
		b.WaitFor("the key list again on "+hash, `document.querySelector('main table') !== null`)
		var body string
		b.Eval("the page text", `document.querySelector('main').innerText`, &body)
		if strings.Contains(body, apiKey) || strings.Contains(body, provKey) {
			t.Errorf("%s shows a key's secret on a second visit", hash)
		}
	}

	// The remaining pages render for the admin.
	goTo(b, "/users")
	b.WaitFor("the users table", fmt.Sprintf(`[...document.querySelectorAll('#users td')].some(td => td.textContent === %q)`, r.email))
	b.Screenshot("admin-users")
	goTo(b, "/audit")
	b.WaitFor("the audit log", `[...document.querySelectorAll('#audit-events td button')].some(x => x.textContent === 'fleet.created')`)
	b.Screenshot("admin-audit")
	goTo(b, "/licence")
	b.WaitFor("the licence", `document.querySelector('#licence-state .value')?.textContent === 'valid'`)
	b.Screenshot("admin-licence")
	// The anomalies page: no incident yet; the example rule created
	// through its form shows in the rules table and in the API.
	goTo(b, "/anomalies")
	b.WaitFor("the anomalies page", `document.querySelector('#anomaly-incidents .empty') !== null && document.querySelector('#anomaly-rules .empty') !== null`)
	b.Eval("create the example rule", `document.getElementById('anomaly-rule-submit').click()`, nil)
	b.WaitFor("the rule in the table", `[...document.querySelectorAll('#anomaly-rules td')].some(td => td.textContent === 'temperature spikes')`)
	if rules, _ := api("GET", "/anomaly/rules", "", http.StatusOK)["rules"].([]any); len(rules) != 1 || rules[0].(map[string]any)["type"] != "zscore" {
		t.Errorf("rules after the page's create: %v", rules)
	}
	b.Screenshot("admin-anomalies")

	// 6. The CSP header on the page and on every file the pages loaded.
	checkConsoleCSP(t, b, r.consoleURL)
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}

	// 5. Tenant isolation: tenant B's user sees nothing of tenant A.
	const emailB, passwordB = "other@example.org", "another horse battery"
	reg := postJSON(t, r.apiURL+"/auth/register", "", fmt.Sprintf(`{"email":%q,"password":%q,"tenantName":"Other Co"}`, emailB, passwordB), http.StatusCreated)
	tokenB, _ := reg["accessToken"].(string)
	if code, body, err := getWithToken(r.apiURL+"/agents/"+r.agent, tokenB); err != nil || code != http.StatusNotFound {
		t.Errorf("tenant B GET /agents/<A's agent> = %d %s %v, want 404", code, body, err)
	}
	b2 := browsertest.New(t)
	loginConsole(b2, r.consoleURL, emailB, passwordB)
	secretsOfA := []string{r.agent, agentName, fleetName, state.Job, state.Job[:8], "ci-export-key", "line-3-gateways", "nightly sync", r.email, "Munich plant",
		"temperature spikes"}
	for _, p := range []struct{ hash, ready string }{
		{"/agents", `document.querySelector('main .empty') !== null`},
		{"/fleets", `document.querySelector('main .empty') !== null`},
		{"/jobs", `document.querySelector('#executions .empty') !== null && document.querySelector('#templates .empty') !== null`},
		{"/audit", `document.querySelector('#audit-events table, #audit-events .empty') !== null`},
		{"/api-keys", `document.querySelector('#api-keys .empty') !== null`},
		{"/provisioning", `document.querySelector('#provisioning-keys .empty') !== null`},
		{"/anomalies", `document.querySelector('#anomaly-incidents .empty') !== null && document.querySelector('#anomaly-rules .empty') !== null`},
	} {
		goTo(b2, p.hash)
		b2.WaitFor("tenant B's "+p.hash, p.ready)
		var body string
		b2.Eval("tenant B's page text", `document.querySelector('main').innerText`, &body)
		for _, s := range secretsOfA {
			if s != "" && strings.Contains(body, s) {
				t.Errorf("tenant B's %s shows %q of tenant A", p.hash, s)
			}
		}
	}
	// A's agent, opened by its UUID, is not found for B.
	goTo(b2, "/agents/"+r.agent)
	b2.WaitFor("A's agent not found for B", `/not found|not_found|no such agent/i.test(document.querySelector('main .alert')?.textContent || '')`)

	// A member of tenant A gets the API's own 403 message on the
	// admin-only pages.
	const memberEmail, memberPassword = "reader@example.com", "reader horse battery"
	api("POST", "/users", fmt.Sprintf(`{"email":%q,"password":%q,"role":"member"}`, memberEmail, memberPassword), http.StatusCreated)
	member := postJSON(t, r.apiURL+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":%q}`, memberEmail, memberPassword), http.StatusOK)
	memberToken, _ := member["accessToken"].(string)
	b2.Run("log tenant B out", chromedp.Click(`#logout`, chromedp.ByQuery))
	b2.WaitFor("the login form again", `document.querySelector('#login-submit') !== null`)
	loginConsole(b2, r.consoleURL, memberEmail, memberPassword)
	for _, p := range []struct{ route, api string }{{"/users", "/users"}, {"/audit", "/audit/events"}, {"/provisioning", "/provisioning/keys"}} {
		code, out := jsonDo(t, "GET", r.apiURL+p.api, memberToken, "")
		e, _ := out["error"].(map[string]any)
		want, _ := e["message"].(string)
		if code != http.StatusForbidden || want == "" {
			t.Fatalf("member GET %s = %d %v, want a 403 with a message", p.api, code, out)
		}
		goTo(b2, p.route)
		b2.WaitFor("the 403 message on "+p.route, fmt.Sprintf(`document.querySelector('main .alert.error')?.textContent === %q`, want))
	}
	if p := b2.Problems(); len(p) > 0 {
		t.Errorf("the second browser's page problems: %v", p)
	}

	// Deleting a fleet with members is refused with the API's 409
	// message; the page then offers the forced delete.
	goTo(b, strings.TrimPrefix(fleetHash, "#"))
	b.WaitFor("the fleet page again", `document.querySelector('#fleet-delete') !== null`)
	b.Run("delete the fleet", chromedp.Click(`#fleet-delete`, chromedp.ByQuery), chromedp.Click(`#fleet-delete-confirm`, chromedp.ByQuery))
	b.WaitFor("the 409 and the forced delete", `document.querySelector('#fleet-force-delete') !== null && /member/i.test(document.querySelector('main .alert.error').textContent)`)
	b.Run("force the delete", chromedp.Click(`#fleet-force-delete`, chromedp.ByQuery), chromedp.Click(`#fleet-force-delete-confirm`, chromedp.ByQuery))
	b.WaitFor("back on an empty fleets list", `location.hash === '#/fleets' && document.querySelector('main .empty') !== null`)
	if a := api("GET", "/agents/"+r.agent, "", http.StatusOK); a["fleetId"] != "" && a["fleetId"] != nil {
		t.Errorf("the agent is still in a fleet after the forced delete: %v", a["fleetId"])
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}

// goTo moves the console to a hash route, as a link would (no reload).
func goTo(b *browsertest.Browser, route string) {
	b.Run("go to "+route, chromedp.Evaluate(fmt.Sprintf(`location.hash = %q`, "#"+route), nil))
}

// createdOnce creates a key named name through the form on route and
// returns the secret the page shows once; the list must then name the
// key.
func createdOnce(b *browsertest.Browser, route, form, name, scheme, list string) string {
	goTo(b, route)
	b.WaitFor("the form on "+route, fmt.Sprintf(`document.querySelector('%s input[name=name]') !== null`, form))
	b.Run("create "+name,
		chromedp.SendKeys(form+` input[name=name]`, name, chromedp.ByQuery),
		chromedp.Click(form+` button[type=submit]`, chromedp.ByQuery))
	b.WaitFor("the once-shown secret", fmt.Sprintf(`document.querySelector('#new-secret code.secret')?.textContent.startsWith(%q)
		&& [...document.querySelectorAll('#new-secret button')].some(x => x.textContent === 'Copy')`, scheme))
	b.WaitFor(name+" in the list", fmt.Sprintf(`[...document.querySelectorAll('%s td')].some(td => td.textContent === %q)`, list, name))
	var secret string
	b.Eval("the secret", `document.querySelector('#new-secret code.secret').textContent`, &secret)
	return secret
}

// checkConsoleCSP fetches the console's page and every console file the
// browser loaded, with Go's client, and checks each answer's policy.
func checkConsoleCSP(t *testing.T, b *browsertest.Browser, consoleURL string) {
	t.Helper()
	var loaded []string
	b.Eval("the files loaded", `performance.getEntriesByType('resource').map(e => e.name)`, &loaded)
	base, err := url.Parse(consoleURL)
	if err != nil {
		t.Fatal(err)
	}
	urls := []string{consoleURL}
	for _, u := range loaded {
		if p, err := url.Parse(u); err == nil && p.Host == base.Host && strings.HasPrefix(p.Path, base.Path) {
			urls = append(urls, u)
		}
	}
	seen := map[string]bool{}
	for _, u := range urls {
		if seen[u] {
			continue
		}
		seen[u] = true
		resp, err := http.Get(u)
		if err != nil {
			t.Errorf("GET %s: %v", u, err)
			continue
		}
		_ = resp.Body.Close()
		csp := resp.Header.Get("Content-Security-Policy")
		if resp.StatusCode != http.StatusOK || !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "script-src 'self'") ||
			strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
			t.Errorf("GET %s: %d, Content-Security-Policy %q", u, resp.StatusCode, csp)
		}
	}
	// Each administration page's module is among them: the check covered
	// the pages themselves, not only the shell.
	for _, m := range []string{"pages/fleets.js", "pages/fleet.js", "pages/jobs.js", "pages/job.js", "pages/anomaly.js", "pages/users.js", "pages/apikeys.js",
		"pages/provisioning.js", "pages/audit.js", "pages/licence.js", "pages/map.js", "admin.css"} {
		found := false
		for u := range seen {
			found = found || strings.HasSuffix(u, "/app/"+m)
		}
		if !found {
			t.Errorf("%s was not among the files checked (%d)", m, len(seen))
		}
	}
}
