package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// TestDevelopmentSetting: POST /v1/test/anomaly answers 404 with a clear
// error unless agent.development is on; on, it injects points, and a
// step off a constant series raises a critical alert at once.
func TestDevelopmentSetting(t *testing.T) {
	prod := startAgent(t, t.TempDir(), true, nil)
	code, body := prod.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":1,"count":1}`, nil)
	if code != 404 || !strings.Contains(errorOf(t, body), "development mode") {
		t.Fatalf("POST /v1/test/anomaly in production = %d %s", code, body)
	}
	dev := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.Development = true })
	for _, bad := range []struct{ body, field string }{
		{`{"value":1}`, "metric"},
		{`{"metric":"probe"}`, "value"},
		{`{"metric":"probe","value":1,"count":1001}`, "count"},
		{`{"metric":"probe","value":"high"}`, "value"},
		{`{"metric":"probe","value":1,"extra":1}`, "extra"},
	} {
		code, body := dev.do("POST", "/v1/test/anomaly", bad.body, nil)
		if code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Errorf("POST /v1/test/anomaly %s = %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	code, body = dev.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":5,"count":25}`, nil)
	var out struct {
		Message        string `json:"message"`
		InjectedPoints int    `json:"injectedPoints"`
		CurrentStats   struct {
			Stats struct {
				TotalDataPoints int64 `json:"totalDataPoints"`
			} `json:"stats"`
		} `json:"currentStats"`
		RecentAlerts []struct {
			Metric   string `json:"metric"`
			Severity string `json:"severity"`
		} `json:"recentAlerts"`
	}
	if err := json.Unmarshal([]byte(body), &out); code != 200 || err != nil || out.InjectedPoints != 25 ||
		out.CurrentStats.Stats.TotalDataPoints < 25 || len(out.RecentAlerts) != 0 || out.Message == "" {
		t.Fatalf("inject a steady series = %d %s", code, body)
	}
	code, body = dev.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":500}`, nil)
	if err := json.Unmarshal([]byte(body), &out); code != 200 || err != nil || out.InjectedPoints != 1 ||
		len(out.RecentAlerts) != 1 || out.RecentAlerts[0].Severity != "critical" || out.RecentAlerts[0].Metric != "probe" {
		t.Fatalf("inject a step = %d %s", code, body)
	}
	// Off, nothing is injected.
	if code, body := dev.do("PATCH", "/v1/anomaly/config", `{"enabled":false}`, nil); code != 200 {
		t.Fatalf("switch off = %d %s", code, body)
	}
	if code, body := dev.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":5}`, nil); code != 409 {
		t.Fatalf("inject while off = %d %s", code, body)
	}
}

// TestAnomalyRoutes drives the anomaly routes over HTTP: their shapes,
// their limits, 400 naming the parameter or field for bad input, and a
// config change that is applied, stored and still in force after a
// restart.
func TestAnomalyRoutes(t *testing.T) {
	dir := t.TempDir()
	r := startAgent(t, dir, true, func(a *config.Agent) { a.Development = true })
	for _, bad := range []struct{ path, param string }{
		{"/v1/anomaly/alerts?limit=0", "limit"},
		{"/v1/anomaly/alerts?limit=501", "limit"},
		{"/v1/anomaly/alerts?limit=abc", "limit"},
		{"/v1/anomaly/alerts?severity=fatal", "severity"},
		{"/v1/anomaly/alerts?since=yesterday", "since"},
		{"/v1/anomaly/baselines?limit=0", "limit"},
		{"/v1/anomaly/baselines?limit=501", "limit"},
		{"/v1/anomaly/baselines?limit=abc", "limit"},
	} {
		code, body := r.do("GET", bad.path, "", nil)
		if code != 400 || !strings.Contains(errorOf(t, body), bad.param) {
			t.Errorf("GET %s = %d %s, want 400 naming %s", bad.path, code, body, bad.param)
		}
	}
	for _, bad := range []struct{ body, field string }{
		{`{"metrics":[{"name":"temp","threshold":100}]}`, "metrics[0].threshold"},
		{`{"metrics":[{"name":"temp","sensitivity":"extreme"}]}`, "metrics[0].sensitivity"},
		{`{"metrics":[{"name":"temp","windowSize":2}]}`, "metrics[0].windowSize"},
		{`{"metrics":[{"threshold":3}]}`, "metrics[0].name"},
		{`{"enabled":"yes"}`, "enabled"},
		{`{"treshold":3}`, "treshold"},
	} {
		code, body := r.do("PATCH", "/v1/anomaly/config", bad.body, nil)
		if code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Errorf("PATCH /v1/anomaly/config %s = %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	if _, body := r.do("GET", "/v1/anomaly/config", "", nil); body != `{"config":{"enabled":true,"metrics":[]}}` {
		t.Fatalf("default config, or a refused PATCH changed it: %s", body)
	}
	want := `{"config":{"enabled":true,"metrics":[{"name":"temp","threshold":6,"sensitivity":"high","windowSize":60}]}}`
	if code, body := r.do("PATCH", "/v1/anomaly/config", `{"metrics":[{"name":"temp","threshold":6,"sensitivity":"high","windowSize":60}]}`, nil); code != 200 || body != want {
		t.Fatalf("PATCH /v1/anomaly/config = %d %s", code, body)
	}
	if _, body := r.do("GET", "/v1/settings", "", nil); !strings.Contains(body, `"anomalyDetection":{"enabled":true,"metrics":[{"name":"temp"`) {
		t.Fatalf("the config is not part of the settings: %s", body)
	}

	// Some points, so that every answer has content.
	if code, body := r.do("POST", "/v1/test/anomaly", `{"metric":"temp","value":20,"count":30}`, nil); code != 200 {
		t.Fatalf("inject = %d %s", code, body)
	}
	r.do("POST", "/v1/test/anomaly", `{"metric":"temp","value":90}`, nil)
	code, body := r.do("GET", "/v1/anomaly/metrics", "", nil)
	var ms struct {
		Metrics []struct {
			Name       string   `json:"name"`
			Source     string   `json:"source"`
			Score      *float64 `json:"score"`
			Configured bool     `json:"configured"`
		} `json:"metrics"`
	}
	if err := json.Unmarshal([]byte(body), &ms); code != 200 || err != nil {
		t.Fatalf("GET /v1/anomaly/metrics = %d %s", code, body)
	}
	seen := map[string]bool{}
	for _, m := range ms.Metrics {
		seen[m.Name+"/"+m.Source] = true
		if m.Name == "temp" && (!m.Configured || m.Score == nil) {
			t.Errorf("temp in the metric list: %+v", m)
		}
	}
	for _, k := range []string{"cpu_usage/system", "memory_percent/system", "cpu_temp/system", "disk_usage/system", "temp/live"} {
		if !seen[k] {
			t.Errorf("GET /v1/anomaly/metrics lacks %s: %s", k, body)
		}
	}
	code, body = r.do("GET", "/v1/anomaly/alerts?severity=critical&metric=temp&limit=1&since=1", "", nil)
	if m := decode(t, body); code != 200 || m["total"] != 1.0 || len(m["alerts"].([]any)) != 1 {
		t.Fatalf("GET /v1/anomaly/alerts = %d %s", code, body)
	}
	if _, body := r.do("GET", "/v1/anomaly/alerts?severity=info", "", nil); body != `{"alerts":[],"total":0}` {
		t.Fatalf("no info alerts: %s", body)
	}
	code, body = r.do("GET", "/v1/anomaly/stats", "", nil)
	if m := decode(t, body); code != 200 || m["stats"] == nil || m["scores"] == nil || m["predictions"] == nil {
		t.Fatalf("GET /v1/anomaly/stats = %d %s", code, body)
	}
	code, body = r.do("POST", "/v1/anomaly/save-baselines", "", nil)
	if m := decode(t, body); code != 200 || m["message"] == nil || m["stats"] == nil {
		t.Fatalf("POST /v1/anomaly/save-baselines = %d %s", code, body)
	}
	code, body = r.do("GET", "/v1/anomaly/baselines?metric=temp&limit=500", "", nil)
	if m := decode(t, body); code != 200 || m["total"] == 0.0 {
		t.Fatalf("GET /v1/anomaly/baselines = %d %s", code, body)
	}
	if code, body := r.do("DELETE", "/v1/anomaly/alerts", "", nil); code != 200 || body != `{"cleared":true}` {
		t.Fatalf("DELETE /v1/anomaly/alerts = %d %s", code, body)
	}
	if _, body := r.do("GET", "/v1/anomaly/alerts", "", nil); body != `{"alerts":[],"total":0}` {
		t.Fatalf("alerts after DELETE: %s", body)
	}

	// The config is kept across a restart; the alerts are not.
	r.stop()
	r = startAgent(t, dir, true, nil)
	if _, body := r.do("GET", "/v1/anomaly/config", "", nil); body != want {
		t.Fatalf("config after a restart: %s", body)
	}
}

// TestAnomalyConfigFromTargetState: the cloud's document sets the
// anomaly settings; they apply at once, and while the agent is
// provisioned a local change of what the document sets answers 409,
// while a key it does not set stays local.
func TestAnomalyConfigFromTargetState(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	doc := `{"schemaVersion":1,"settings":{"anomalyDetection":{"metrics":[{"name":"temp","sensitivity":"low"}]}}}`
	if err := r.apply(3, doc); err != nil {
		t.Fatal(err)
	}
	want := `{"config":{"enabled":true,"metrics":[{"name":"temp","threshold":0,"sensitivity":"low","windowSize":0}]}}`
	if _, body := r.do("GET", "/v1/anomaly/config", "", nil); body != want {
		t.Fatalf("config after the document: %s", body)
	}
	if err := r.apply(4, `{"schemaVersion":1,"settings":{"anomalyDetection":{"metrics":[{"name":"temp","threshold":0.1}]}}}`); err == nil ||
		!strings.Contains(err.Error(), "anomalyDetection.metrics[0].threshold") {
		t.Fatalf("an invalid document: %v", err)
	}
	st := r.agent.p.st.Load()
	if err := st.SetMeta(t.Context(), metaProvisioned, "true"); err != nil {
		t.Fatal(err)
	}
	code, body := r.do("PATCH", "/v1/anomaly/config", `{"metrics":[]}`, nil)
	if code != 409 || !strings.Contains(errorOf(t, body), `setting "anomalyDetection.metrics" is managed`) {
		t.Fatalf("PATCH of a managed anomaly setting = %d %s", code, body)
	}
	if code, body := r.do("PATCH", "/v1/anomaly/config", `{"enabled":false}`, nil); code != 200 || !strings.Contains(body, `"enabled":false`) {
		t.Fatalf("PATCH of an unmanaged anomaly setting = %d %s", code, body)
	}
}

// TestFactoryResetDeletesBaselines: after a factory reset the saved
// baselines are gone, and the detector of the run that was reset wrote
// none back when it stopped.
func TestFactoryResetDeletesBaselines(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.Development = true })
	if code, body := r.do("POST", "/v1/test/anomaly", `{"metric":"probe","value":5,"count":30}`, nil); code != 200 {
		t.Fatalf("inject = %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/anomaly/save-baselines", "", nil); code != 200 {
		t.Fatalf("save = %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/factory-reset", "", nil); code != 200 {
		t.Fatalf("factory reset = %d %s", code, body)
	}
	// The reboot runs the group again; its detector starts from the
	// emptied table.
	eventually(t, 30*time.Second, "the agent back after the reset", func() bool {
		code, body := r.do("GET", "/v1/anomaly/baselines?metric=probe", "", nil)
		return code == 200 && body == `{"baselines":[],"total":0}`
	})
	bs, err := r.agent.p.st.Load().Baselines().AnomalyBaselines(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Metric == "probe" {
			t.Fatalf("a baseline survived the factory reset: %+v", b)
		}
	}
}
