package webui

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/edgeplat/edgeplat/core/coretest/browsertest"
)

// TestLibraryInBrowser runs the library's self-test page in Chromium
// under the consoles' Content-Security-Policy: every module loads, none
// trips the policy, and each helper does what the consoles rely on.
func TestLibraryInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser test; -short given")
	}
	_, e := testSite(t)
	srv := httptest.NewServer(e)
	defer srv.Close()
	b := browsertest.New(t)
	b.Run("open the self-test", chromedp.Navigate(srv.URL+"/test/"))
	b.WaitFor("self-test finished", "window.results !== undefined")
	var raw json.RawMessage
	b.Eval("read results", "JSON.stringify(window.results)", &raw)
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	var got struct {
		FieldErrors  []map[string]string `json:"fieldErrors"`
		CloudDetails []map[string]string `json:"cloudDetails"`
		Route        []map[string]string `json:"route"`
		QS           string              `json:"qs"`
		Form         struct {
			Values  map[string]any `json:"values"`
			Shown   string         `json:"shown"`
			Focused string         `json:"focused"`
			Alert   string         `json:"alert"`
		} `json:"form"`
		XSS   string `json:"xss"`
		Chart struct {
			Points string `json:"points"`
			Data   struct {
				X      []float64   `json:"x"`
				Series [][]float64 `json:"series"`
			} `json:"data"`
		} `json:"chart"`
		Client struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
		} `json:"client"`
	}
	if err := json.Unmarshal([]byte(s), &got); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	wantFields := []map[string]string{
		{"field": "data_points[0].address", "message": "must be 0..65535"},
		{"field": "connection.host", "message": "is required"},
		{"field": "", "message": "something else"},
	}
	if !reflect.DeepEqual(got.FieldErrors, wantFields) {
		t.Errorf("fieldErrors = %v", got.FieldErrors)
	}
	if len(got.CloudDetails) != 1 || got.CloudDetails[0]["field"] != "layout.widgets[1].w" {
		t.Errorf("cloud details = %v", got.CloudDetails)
	}
	if len(got.Route) != 2 || got.Route[0]["name"] != "plc 01" || got.Route[0]["protocol"] != "modbus" || got.Route[1] != nil {
		t.Errorf("route = %v", got.Route)
	}
	if got.QS != "?a=1&c=x+y" {
		t.Errorf("qs = %q", got.QS)
	}
	wantValues := map[string]any{"name": "ep1", "connection": map[string]any{"port": 502.0},
		"data_points": []any{map[string]any{"address": 7.0}}, "enabled": true}
	if !reflect.DeepEqual(got.Form.Values, wantValues) {
		t.Errorf("form values = %v", got.Form.Values)
	}
	if got.Form.Shown != "must be 0..65535" || got.Form.Focused != "data_points[0].address" || got.Form.Alert != "nope: odd" {
		t.Errorf("form errors = %+v", got.Form)
	}
	if got.XSS != "&lt;img src=x onerror=alert(1)&gt;" {
		t.Errorf("text became markup: %q", got.XSS)
	}
	// The 60 s window dropped the point at 100 when 200 came, kept 150.
	if got.Chart.Points != "2" || !reflect.DeepEqual(got.Chart.Data.X, []float64{150, 200}) || !reflect.DeepEqual(got.Chart.Data.Series, [][]float64{{2.5, 3.5}}) {
		t.Errorf("chart = %+v", got.Chart)
	}
	if got.Client.Status != 404 {
		t.Errorf("client error = %+v", got.Client)
	}
	var problems []string
	for _, p := range b.Problems() {
		// The client's deliberate 404 is logged by Chromium as a failed
		// resource load; everything else is a real problem.
		if !strings.Contains(p, "404") {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		t.Errorf("page errors (CSP violations show here): %v", problems)
	}
	b.Screenshot("webui-selftest")
}
