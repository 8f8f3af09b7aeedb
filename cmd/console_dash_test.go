package cmd

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
)

// input is the selector of the editor's input for a layout JSON path.
func input(path string) string { return fmt.Sprintf(`#dash-editor [data-input="%s"]`, path) }

// TestConsoleDashboardsIntegration builds a layout of a line chart and a
// stat of press-1/r3 in the console's editor, sees a validation error
// land on the field it names, saves, and after a reload sees both
// widgets drawn from the agent's readings (2003); a save over a version
// someone else saved meanwhile is refused with an offer to reload.
func TestConsoleDashboardsIntegration(t *testing.T) {
	r := startConsoleRig(t)
	b := browsertest.New(t)
	r.login(b)

	b.Run("open the agent's dashboard", chromedp.Navigate(r.consoleURL+"#/dashboards/"+r.agent))
	b.WaitFor("the generated layout", `document.querySelector('#dash-new') !== null && document.querySelector('#dash-view') !== null`)
	b.Run("new layout", chromedp.Click("#dash-new"))
	b.WaitFor("the editor", `document.querySelector('#dash-editor input[name=name]') !== null`)
	b.WaitFor("name it", setValue("#dash-editor input[name=name]", "Press overview"))
	b.Run("add a widget", chromedp.Click("#dash-add"))
	b.WaitFor("widget 1 on press-1/r3", fmt.Sprintf(`document.querySelector(%q).value === 'press-1' && document.querySelector(%q).value === 'r3'`,
		input("layout.widgets[0].source.deviceName"), input("layout.widgets[0].source.metric")))
	b.WaitFor("title widget 1", setValue(input("layout.widgets[0].title"), "r3 trend"))
	b.Run("add another", chromedp.Click("#dash-add"))
	b.WaitFor("widget 2", fmt.Sprintf(`document.querySelector(%q) !== null`, input("layout.widgets[1].type")))
	b.WaitFor("make it a stat", setValue(input("layout.widgets[1].type"), "stat"))
	b.WaitFor("the stat's options", fmt.Sprintf(`document.querySelector(%q) !== null`, input("layout.widgets[1].options.decimals")))
	b.WaitFor("title widget 2", setValue(input("layout.widgets[1].title"), "r3 now"))
	// Too wide for 12 columns: the API's error names the field.
	b.WaitFor("a width too large", setValue(input("layout.widgets[1].w"), "13"))
	b.Run("save", chromedp.Click("#dash-save"))
	b.WaitFor("the error on widget 2's width", `(() => {
		const f = document.querySelector('#dash-editor .field[data-field="layout.widgets[1].w"]');
		return !!f && f.classList.contains('invalid') && f.querySelector('.field-error').textContent.length > 0; })()`)
	b.Screenshot("console-dashboard-editor")
	b.WaitFor("a width that fits", setValue(input("layout.widgets[1].w"), "6"))
	b.Run("save again", chromedp.Click("#dash-save"))
	drawn := `(() => {
		const ws = document.querySelectorAll('#dash-grid .widget');
		const line = document.querySelector('#dash-grid .widget-line [data-chart]');
		const stat = document.querySelector('#dash-grid .widget-stat .stat-value');
		return ws.length === 2 && !!line && Number(line.dataset.points) > 0 && line.chartData.series[0].includes(2003) &&
			!!stat && stat.dataset.value === '2003'; })()`
	b.WaitFor("the saved layout drawn", `location.hash.split('/').length === 4 && `+drawn)
	b.Run("reload", chromedp.Reload())
	b.WaitFor("the layout after a reload", drawn)
	var title string
	b.Eval("the page title", `document.querySelector('h1').textContent`, &title)
	if !strings.Contains(title, "Press overview") {
		t.Errorf("page title %q lacks the layout's name", title)
	}
	b.Screenshot("console-dashboard")

	// Someone else saves the layout; this page's save is then refused.
	var id string
	b.Eval("the layout id", `decodeURIComponent(location.hash.split('/')[3])`, &id)
	code, body, err := getWithToken(r.apiURL+"/dashboard-layouts/"+r.agent+"/all", r.access)
	if err != nil || code != http.StatusOK || !strings.Contains(body, id) {
		t.Fatalf("the saved layout through the API: %d %s %v", code, body, err)
	}
	b.Run("edit", chromedp.Click("#dash-edit"))
	b.WaitFor("the editor on the saved layout", fmt.Sprintf(`document.querySelector(%q) !== null`, input("layout.widgets[1].type")))
	putJSON(t, r.apiURL+"/dashboard-layouts/"+id, r.access, `{"name": "Renamed elsewhere"}`)
	b.Run("save over it", chromedp.Click("#dash-save"))
	b.WaitFor("the conflict, with a reload offered", `(() => { const a = document.querySelector('#dash-conflict');
		return !!a && a.textContent.includes('version') && a.querySelector('button') !== null; })()`)
	b.Run("reload their version", chromedp.Click("#dash-conflict button"))
	b.WaitFor("their version drawn", `document.querySelector('h1').textContent.includes('Renamed elsewhere') && `+drawn)

	if p := b.Problems(); len(p) > 0 {
		t.Errorf("page problems: %v", p)
	}
}
