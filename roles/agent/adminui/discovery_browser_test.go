package adminui_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/config"
)

// clickSel clicks the element sel names.
func (u ui) clickSel(what, sel string) {
	u.t.Helper()
	u.Run(what, chromedp.Click(sel, chromedp.ByQuery))
}

// value is the value of the input sel names.
func (u ui) value(sel string) string {
	u.t.Helper()
	var s string
	u.Eval("value of "+sel, fmt.Sprintf("(document.querySelector(%q) || {}).value ?? ''", sel), &s)
	return s
}

// exists is a WaitFor expression: sel matches an element.
func exists(sel string) string {
	return fmt.Sprintf("document.querySelector(%q) !== null", sel)
}

// TestAdminUIDiscoveryIntegration scans for a real pymodbus server from
// the Discovery page: a port out of range shows by its field and scans
// nothing, a good scan lists the device, a second scan within 30 s shows
// the agent's 409 by the forceRun toggle, and "Add as endpoint" opens
// the new-endpoint form prefilled, which saves the endpoint. Then a rule:
// bad options show by their field and create nothing; a good rule is
// created, run (its run listing the device), disabled, edited and
// deleted with its runs. Last, with features.discovery off, the page
// says so and turns it on.
func TestAdminUIDiscoveryIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser, an agent and a Modbus server")
	}
	mbPort := startPymodbus(t)
	port := strconv.Itoa(mbPort)
	base := startAgent(t, false)
	u := newUI(t, base)
	u.setupAdmin()

	// A scan with a port out of range: the error by the ports field.
	u.goTo("#/discovery", "#discover-form")
	u.clickSel("tick modbus", "#scan-modbus")
	u.set("#discover-form", "overrides.modbus.hosts", "127.0.0.1")
	u.set("#discover-form", "overrides.modbus.ports", "70000")
	u.set("#discover-form", "overrides.modbus.unitIds", "1")
	u.submit("scan with a bad port", "#discover-form")
	portsErr := `#discover-form [data-field="overrides.modbus.ports"]`
	u.WaitFor("ports error", exists(portsErr+".invalid"))
	if msg := u.text(portsErr + " .field-error"); !strings.Contains(msg, "65535") {
		t.Errorf("error by the ports field = %q", msg)
	}
	var listed bool
	u.Eval("devices listed", `document.querySelector('#discovery-devices [data-device]') !== null`, &listed)
	if listed {
		t.Errorf("a refused scan listed devices: %q", u.text("#discovery-devices"))
	}

	// A good scan lists the server's unit 1.
	dev := "modbus-127.0.0.1-" + port + "-unit1"
	u.set("#discover-form", "overrides.modbus.ports", port)
	u.submit("scan", "#discover-form")
	u.WaitFor("device found", exists(fmt.Sprintf("#discovery-devices [data-device=%q]", dev)))
	if s := u.text("#scan-status"); !strings.Contains(s, "Scan finished") || !strings.Contains(s, "1 devices") {
		t.Errorf("scan status = %q", s)
	}
	if d := u.text("#discovery-devices"); !strings.Contains(d, "holding 0 = 1000") {
		t.Errorf("the device's details do not show holding register 0 (1000): %q", d)
	}
	u.Screenshot("discovery-scan")

	// The same scan again at once: the agent's 409 shows by forceRun.
	u.submit("scan again", "#discover-form")
	u.WaitFor("forceRun error", exists(`#discover-form [data-field="forceRun"].invalid`))
	if msg := u.text(`#discover-form [data-field="forceRun"] .field-error`); !strings.Contains(msg, "forceRun") {
		t.Errorf("error by forceRun = %q", msg)
	}

	// Add as endpoint: the form is prefilled; a data point saves it.
	u.clickSel("add as endpoint", fmt.Sprintf("[data-add=%q]", dev))
	u.WaitFor("prefilled form", fmt.Sprintf(`location.hash.startsWith('#/endpoints/new?') &&
		(document.querySelector('#endpoint-form [data-input="connection.port"]') || {}).value === %q`, port))
	for sel, want := range map[string]string{
		`#endpoint-form [data-input="protocol"]`:          "modbus",
		`#endpoint-form [data-input="name"]`:              dev,
		`#endpoint-form [data-input="connection.host"]`:   "127.0.0.1",
		`#endpoint-form [data-input="connection.unitId"]`: "1",
	} {
		if got := u.value(sel); got != want {
			t.Errorf("%s = %q, want %q", sel, got, want)
		}
	}
	u.set("#endpoint-form", "data_points[0].name", "r0")
	u.set("#endpoint-form", "data_points[0].register", "holding:0")
	u.clickSel("save endpoint", "#save-endpoint")
	u.WaitFor("device page", fmt.Sprintf(`location.hash === %q`, "#/devices/modbus/"+dev))
	if _, body := call(t, "GET", base+"/v1/endpoints", "", nil); !strings.Contains(body, `"name":"`+dev+`"`) || !strings.Contains(body, `"port":`+port) {
		t.Fatalf("the endpoint added from the scan is not stored as found: %s", body)
	}

	// A rule with a port out of range: by the options box, nothing created.
	u.goTo("#/discovery", "#rule-form")
	u.set("#rule-form", "name", "lab")
	u.set("#rule-form", "params_json", `{"hosts": ["127.0.0.1"], "ports": [70000]}`)
	u.submit("bad rule", "#rule-form")
	u.WaitFor("rule options error", exists(`#rule-form [data-field="params_json"].invalid`))
	if msg := u.text(`#rule-form [data-field="params_json"] .field-error`); !strings.Contains(msg, "65535") {
		t.Errorf("error by the options box = %q", msg)
	}
	if _, body := call(t, "GET", base+"/v1/discovery-rules", "", nil); strings.Contains(body, `"lab"`) {
		t.Fatalf("a refused rule was stored: %s", body)
	}

	// A good rule, run now: its run lists the device.
	u.set("#rule-form", "params_json", fmt.Sprintf(`{"hosts": ["127.0.0.1"], "ports": [%s], "unitIds": [1]}`, port))
	u.submit("create rule", "#rule-form")
	u.WaitFor("rule listed", exists(`[data-rule="lab"]`))
	u.clickSel("run rule", `[data-rule-actions="lab"] [data-action="run"]`)
	u.WaitFor("run succeeded", exists(`#rule-runs [data-runs-of="lab"] [data-run-status="succeeded"]`))
	if !strings.Contains(u.text("#rule-runs"), dev) {
		t.Errorf("the rule's run does not list %s: %q", dev, u.text("#rule-runs"))
	}
	u.WaitFor("recent runs", exists(`#discovery-runs [data-run-status="succeeded"]`))
	if _, body := call(t, "GET", base+"/v1/discovery-runs", "", nil); !strings.Contains(body, `"devices_found":1`) {
		t.Errorf("runs after run now: %s", body)
	}
	u.Screenshot("discovery-rules")

	// Disable, then edit the interval.
	u.clickSel("disable rule", `[data-rule-actions="lab"] [data-action="toggle"]`)
	u.WaitFor("rule disabled", `(document.querySelector('[data-rule-actions="lab"] [data-action="toggle"]') || {}).textContent === 'Enable'`)
	u.clickSel("edit rule", `[data-rule-actions="lab"] [data-action="edit"]`)
	u.WaitFor("edit form", `document.querySelector('#rule-form').dataset.editing !== ''`)
	u.set("#rule-form", "interval_seconds", "7200")
	u.submit("save rule", "#rule-form")
	u.WaitFor("rule saved", `document.querySelector('#rule-form').dataset.editing === '' && document.querySelector('#discovery-rules').textContent.includes('2 h')`)
	if _, body := call(t, "GET", base+"/v1/discovery-rules", "", nil); !strings.Contains(body, `"interval_seconds":7200`) || !strings.Contains(body, `"enabled":false`) {
		t.Errorf("rule after disable and edit: %s", body)
	}

	// Delete (a second click confirms): the rule and its runs are gone.
	del := `[data-rule-actions="lab"] button.danger`
	u.clickSel("delete rule", del)
	u.clickSel("confirm delete", del)
	u.WaitFor("rule deleted", `document.querySelector('[data-rule="lab"]') === null`)
	if _, body := call(t, "GET", base+"/v1/discovery-rules", "", nil); strings.Contains(body, `"lab"`) {
		t.Errorf("rules after delete: %s", body)
	}
	if _, body := call(t, "GET", base+"/v1/discovery-runs", "", nil); strings.Contains(body, `"uuid"`) {
		t.Errorf("runs after the rule's delete: %s", body)
	}

	// With features.discovery off the page says so, and its button turns
	// it back on.
	if code, body := call(t, "PATCH", base+"/v1/settings", `{"features":{"discovery":false}}`, nil); code != 200 {
		t.Fatalf("turn discovery off: %d %s", code, body)
	}
	u.goTo("#/simulation", "#simulation-off")
	u.goTo("#/discovery", "#discovery-on")
	u.clickSel("turn discovery on", "#discovery-on")
	u.WaitFor("discovery on", `(document.querySelector('#discovery-feature .alert.ok') || {}).textContent === 'Discovery is on.'`)
	if _, body := call(t, "GET", base+"/v1/settings", "", nil); !strings.Contains(body, `"discovery":true`) {
		t.Errorf("settings after the page turned discovery on: %s", body)
	}
	if p := u.Problems(); len(p) > 0 {
		t.Errorf("page errors and CSP violations: %v", p)
	}
}

// TestAdminUISimulationIntegration starts and stops scenarios from the
// Simulation page of an agent in simulation mode. (With the mode off the
// page says so: TestAdminUIPagesIntegration opens it there.)
func TestAdminUISimulationIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a browser and an agent")
	}
	base := startAgentWith(t, false, func(c *config.Config) { c.Agent.SimulationMode = true })
	u := newUI(t, base)
	u.setupAdmin()
	u.goTo("#/simulation", `[data-start="steady"]`)
	if u.text("#simulation-off") != "" {
		t.Fatal("the page says simulation mode is off while it is on")
	}

	u.clickSel("start steady", `[data-start="steady"]`)
	u.WaitFor("steady running", exists(`[data-running="steady"] .badge-online`))
	u.WaitFor("steady readings", `Number(document.querySelector('[data-readings="steady"]').textContent) > 0`)
	if !strings.Contains(u.text(`[data-sim-device="sim-steady-1"]`), "running") {
		t.Errorf("device sim-steady-1 = %q", u.text(`[data-sim-device="sim-steady-1"]`))
	}
	if _, body := call(t, "GET", base+"/v1/simulation/status", "", nil); !strings.Contains(body, `"name":"steady","description"`) ||
		!strings.Contains(body, `"running":true`) {
		t.Fatalf("status after start: %s", body)
	}
	u.Screenshot("simulation")
	u.clickSel("stop steady", `[data-stop="steady"]`)
	u.WaitFor("steady stopped", exists(`[data-start="steady"]`))
	if _, body := call(t, "GET", base+"/v1/simulation/status", "", nil); strings.Contains(body, `"running":true`) {
		t.Errorf("status after stop: %s", body)
	}

	// Stop all stops what runs.
	u.clickSel("start fault", `[data-start="fault"]`)
	u.WaitFor("fault running", exists(`[data-stop="fault"]`))
	u.clickSel("stop all", "#stop-all")
	u.WaitFor("fault stopped", exists(`[data-start="fault"]`))
	if s := u.text("#simulation-status"); !strings.Contains(s, "fault") {
		t.Errorf("stop-all said %q", s)
	}
	if _, body := call(t, "GET", base+"/v1/simulation/status", "", nil); strings.Contains(body, `"running":true`) {
		t.Errorf("status after stop-all: %s", body)
	}
	if p := u.Problems(); len(p) > 0 {
		t.Errorf("page errors and CSP violations: %v", p)
	}
}
