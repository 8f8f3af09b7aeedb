package cmd

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
	"github.com/edgeplat/edgeplat/roles/api/console"
)

// setValue sets a form control's value as typing would, so the page's
// change and input handlers run.
func setValue(selector, value string) string {
	return fmt.Sprintf(`(() => { const el = document.querySelector(%q); if (!el) return false;
		el.value = %q; el.dispatchEvent(new Event('input', {bubbles: true})); el.dispatchEvent(new Event('change', {bubbles: true}));
		return el.value === %q; })()`, selector, value, value)
}

// chartHolds is true when the chart under selector has drawn a point of
// value want in any series.
func chartHolds(selector string, want float64) string {
	return fmt.Sprintf(`(() => { const c = document.querySelector(%q);
		return !!(c && c.chartData && c.chartData.series.some(s => s.includes(%v))); })()`, selector, want)
}

// TestConsoleAgentPagesIntegration walks the console's agent pages on
// all-in-one with an agent polling the Modbus simulator (r3 = 2003): the
// agent online on its page, the device chart drawing 2003, the readings
// explorer drawing r3 and showing a bad query's error next to the box,
// and a target-state edit made on the page listed in its history.
func TestConsoleAgentPagesIntegration(t *testing.T) {
	r := startConsoleRig(t)
	b := browsertest.New(t)
	r.login(b)

	// The first page's load, as the browser timed it.
	var nav struct {
		DOMContentLoaded float64 `json:"domContentLoadedEventEnd"`
		Load             float64 `json:"loadEventEnd"`
		Transfer         float64 `json:"transferSize"`
	}
	b.Eval("navigation timing", `(() => { const n = performance.getEntriesByType('navigation')[0].toJSON();
		return {domContentLoadedEventEnd: n.domContentLoadedEventEnd, loadEventEnd: n.loadEventEnd, transferSize: n.transferSize}; })()`, &nav)
	if nav.Load <= 0 || nav.DOMContentLoaded <= 0 {
		t.Errorf("navigation timing not recorded: %+v", nav)
	}
	t.Logf("first page load: domContentLoadedEventEnd %.0f ms, loadEventEnd %.0f ms", nav.DOMContentLoaded, nav.Load)
	site, err := console.New()
	if err != nil {
		t.Fatal(err)
	}
	compressed, raw := site.Weight()
	t.Logf("console weight: %d bytes compressed, %d raw", compressed, raw)

	// The agent list (someone else's page) and the agent's own page both
	// show it online; the page's status follows the live stream.
	b.WaitFor("the agent online in the list", `[...document.querySelectorAll('.badge-online')].length > 0`)
	b.Run("open the agent", chromedp.Navigate(r.consoleURL+"#/agents/"+r.agent))
	b.WaitFor("the agent online on its page", `document.querySelector('#agent-status .badge-online') !== null`)
	b.WaitFor("its devices", `[...document.querySelectorAll('#agent-tab-panel a')].some(a => a.textContent === 'press-1')`)
	b.Run("latest readings tab", chromedp.Click("#tab-readings"))
	b.WaitFor("r3 in the latest readings", `(() => { const v = document.querySelector('[data-metric="press-1.r3"]');
		return !!v && v.textContent.startsWith('2003'); })()`)
	b.Screenshot("console-agent-detail")

	// The device page charts the device's readings.
	b.Run("open the device page", chromedp.Navigate(r.consoleURL+"#/agents/"+r.agent+"/devices/press-1"))
	b.WaitFor("the chart draws 2003", chartHolds("#device-chart [data-chart]", 2003))
	var points int
	b.Eval("chart points", `Number(document.querySelector('#device-chart [data-chart]').dataset.points)`, &points)
	if points < 1 {
		t.Errorf("device chart has %d points", points)
	}
	b.WaitFor("the latest value with its quality", `(() => { const v = document.querySelector('[data-metric="press-1.r3"]');
		return !!v && v.textContent.startsWith('2003') && document.querySelector('.badge-good') !== null; })()`)
	b.Screenshot("console-device")

	// The readings explorer draws r3; a bad query's error shows by the box.
	b.Run("open the readings explorer", chromedp.Navigate(r.consoleURL+"#/readings"))
	b.WaitFor("the metric list", `[...document.querySelectorAll('#explore-form select[name=metric] option')].some(o => o.value === 'press-1.r3')`)
	b.WaitFor("pick r3", setValue("#explore-form select[name=metric]", "press-1.r3"))
	b.Run("show it", chromedp.Click("#explore-form button[type=submit]"))
	b.WaitFor("the explorer draws 2003", chartHolds("#explore-chart [data-chart]", 2003))
	b.WaitFor("a bad query", setValue("#query-form textarea[name=query]", `readings{metric_name="press-1.r3"`))
	b.Run("run it", chromedp.Click("#query-run"))
	b.WaitFor("the error next to the box", `(() => { const e = document.querySelector('#query-error');
		return !!e && !e.hidden && e.textContent.includes('line 1, column') && e.dataset.column !== undefined &&
			document.querySelector('#query-form textarea').getAttribute('aria-invalid') === 'true'; })()`)
	b.Screenshot("console-readings-query-error")
	b.WaitFor("a good query", setValue("#query-form textarea[name=query]", `readings{metric_name="press-1.r3"}`))
	b.Run("run it", chromedp.Click("#query-run"))
	b.WaitFor("the query's chart draws 2003", chartHolds("#query-chart[data-chart]", 2003)+
		` && document.querySelector('#query-error').hidden`)
	b.Screenshot("console-readings")

	// A target-state edit on the page is a new version in the history.
	b.Run("open the target state", chromedp.Navigate(r.consoleURL+"#/agents/"+r.agent+"?tab=target"))
	b.WaitFor("the document", `(() => { const t = document.querySelector('#ts-form textarea[name=state]');
		return !!t && t.value.includes('press-1'); })()`)
	var before int
	b.Eval("the version shown", `Number(document.querySelector('#ts-version-line').dataset.version)`, &before)
	var doc string
	b.Eval("the document", `document.querySelector('#ts-form textarea[name=state]').value`, &doc)
	var state map[string]any
	if err := json.Unmarshal([]byte(doc), &state); err != nil {
		t.Fatalf("the editor's document is not JSON: %v\n%s", err, doc)
	}
	edited := strings.Replace(doc, `"poll_interval": 500`, `"poll_interval": 600`, 1)
	if edited == doc {
		t.Fatalf("no poll_interval 500 in the document:\n%s", doc)
	}
	b.WaitFor("edit it", setValue("#ts-form textarea[name=state]", edited))
	b.Run("save", chromedp.Click("#ts-save"))
	want := before + 1
	b.WaitFor("the new version in the history", fmt.Sprintf(`(() => {
		const row = document.querySelector('#ts-history [data-version="%d"]');
		return !!row && row.closest('tr').textContent.includes('you') &&
			document.querySelector('#ts-version-line').dataset.version === '%d'; })()`, want, want))
	b.Run("view the new version", chromedp.Click(fmt.Sprintf(`//button[text()="View version %d"]`, want), chromedp.BySearch))
	b.WaitFor("its document", `(() => { const p = document.querySelector('#ts-version pre');
		return !!p && p.textContent.includes('"poll_interval": 600'); })()`)
	b.Screenshot("console-target-state-history")

	// A bad document's error is shown on the form, and nothing is saved.
	b.WaitFor("a bad edit", setValue("#ts-form textarea[name=state]", `{"schemaVersion": 1, "endpoints": [{"name": "x"}]}`))
	b.Run("save it", chromedp.Click("#ts-save"))
	b.WaitFor("the API's error", `(() => { const a = document.querySelector('#ts-form .form-error, #ts-form .field-error:not([hidden])');
		return !!a && a.textContent.length > 0; })()`)
	var after int
	b.Eval("the version after the refusal", `Number(document.querySelector('#ts-version-line').dataset.version)`, &after)
	if after != want {
		t.Errorf("version after a refused save = %d, want %d", after, want)
	}

	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}
