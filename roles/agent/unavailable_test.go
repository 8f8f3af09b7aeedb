package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestUnavailableSettingsRefused: settings of features this build lacks are
// neither shown nor accepted; a PATCH naming one answers 400 naming it and
// changes nothing. Anomaly detection is available: its switch and its
// config are shown and accepted.
func TestUnavailableSettingsRefused(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	_, body := r.do("GET", "/v1/settings", "", nil)
	if !strings.Contains(body, `"features":{"anomalyDetection":true,"discovery":true}`) || !strings.Contains(body, `"anomalyDetection":{"enabled":true,"metrics":[]}`) {
		t.Errorf("GET /v1/settings without anomaly detection on by default: %s", body)
	}
	for _, bad := range []struct{ body, field string }{
		{`{"features":{"discovery":"yes"}}`, "discovery"},
		{`{"anomalyDetection":{"metrics":[{"name":"t","sensitivity":"extreme"}]}}`, "anomalyDetection.metrics[0].sensitivity"},
		{`{"features":{"anomalyDetection":false},"anomalyDetection":{"enabled":true}}`, "features.anomalyDetection"},
	} {
		code, body := r.do("PATCH", "/v1/settings", bad.body, nil)
		if code != 400 || !strings.Contains(errorOf(t, body), bad.field) {
			t.Errorf("PATCH %s = %d %s, want 400 naming %s", bad.body, code, body, bad.field)
		}
	}
	if _, body := r.do("GET", "/v1/settings", "", nil); !strings.Contains(body, `"level":"info"`) || !strings.Contains(body, `"features":{"anomalyDetection":true,"discovery":true}`) {
		t.Fatalf("a refused PATCH changed the settings: %s", body)
	}
	// The settings still in force are those of statePollMs and the rest.
	if code, body := r.do("PATCH", "/v1/settings", `{"intervals":{"statePollMs":5000}}`, nil); code != 200 || !strings.Contains(body, `"statePollMs":5000`) {
		t.Fatalf("PATCH statePollMs = %d %s", code, body)
	}
	// features.anomalyDetection and anomalyDetection.enabled are one switch.
	if code, body := r.do("PATCH", "/v1/settings", `{"features":{"anomalyDetection":false}}`, nil); code != 200 ||
		!strings.Contains(body, `"anomalyDetection":{"enabled":false,"metrics":[]}`) {
		t.Fatalf("PATCH features.anomalyDetection = %d %s", code, body)
	}
	if _, body := r.do("GET", "/v1/anomaly/config", "", nil); body != `{"config":{"enabled":false,"metrics":[]}}` {
		t.Fatalf("GET /v1/anomaly/config after switching the feature off: %s", body)
	}
}

// TestStoredUnavailableSettingsDropped: a settings document an older build
// stored with settings this build lacks still loads; only those go.
func TestStoredUnavailableSettingsDropped(t *testing.T) {
	cur := defaultSettings()
	got, _, err := mergeSettings(cur, []byte(`{"logging":{"level":"warn","cloudEnabled":true},"features":{"discovery":true},
		"intervals":{"stateReportMs":1000,"statePollMs":2000}}`), true)
	if err != nil || got.Logging.Level != "warn" || !got.Logging.CloudEnabled || got.Intervals.StatePollMS != 2000 || got.Intervals.StateReportMS != 1000 {
		t.Fatalf("stored settings = %+v, %v", got, err)
	}
}

// TestBufferFieldsAbsent: the buffer figures that are always zero are
// not offered; the agent log buffer's are, off by default.
func TestBufferFieldsAbsent(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	code, body := r.do("GET", "/v1/buffer/status", "", nil)
	if code != 200 || !strings.Contains(body, `"mode":"standalone"`) {
		t.Fatalf("buffer status = %d %s", code, body)
	}
	for _, gone := range []string{"cloudReportQueueCount", "cloudReportOldestAge"} {
		if strings.Contains(body, gone) {
			t.Errorf("buffer status reports %s, which is always zero: %s", gone, body)
		}
	}
	if !strings.Contains(body, `"agentLogBufferEnabled":false`) || !strings.Contains(body, `"agentLogDroppedTotal":0`) {
		t.Errorf("buffer status without the agent log buffer: %s", body)
	}
}

// TestProvisionKeepsNameAndShowsCloud: the device name given to POST
// /v1/provision is the device's name afterwards, and GET /v1/settings
// reports the cloud the agent is provisioned with.
func TestProvisionKeepsNameAndShowsCloud(t *testing.T) {
	broker := "tcp://" + coretest.MQTTAddr(t)
	var registered string
	cloudSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case req.Method == "POST" && req.URL.Path == "/api/v1/provision/agent":
			var in map[string]string
			_ = json.NewDecoder(req.Body).Decode(&in)
			registered = in["agentName"]
			fmt.Fprintf(w, `{"agentUuid":%q,"tenantId":"t1","apiKey":"k1","mqtt":{"brokerUrl":%q,"clientId":"prov-test-%s","topicPrefix":"test/prov/%s"}}`,
				in["agentUuid"], broker, in["agentUuid"], in["agentUuid"])
		case req.Method == "GET" && strings.HasPrefix(req.URL.Path, "/api/v1/device/"):
			w.Header().Set("ETag", `"v1"`)
			_, _ = w.Write([]byte(`{"version":1,"state":{}}`))
		default:
			http.NotFound(w, req)
		}
	}))
	defer cloudSrv.Close()
	r := startAgent(t, t.TempDir(), true, nil)
	_, body := r.do("GET", "/v1/settings", "", nil)
	if !strings.Contains(body, `"provisioned":false`) {
		t.Fatalf("settings before provisioning: %s", body)
	}
	code, body := r.do("POST", "/v1/provision", fmt.Sprintf(`{"provisioningApiKey":"pk","apiEndpoint":%q,"deviceName":"line-7"}`, cloudSrv.URL), nil)
	if code != 200 {
		t.Fatalf("provision = %d %s", code, body)
	}
	if registered != "line-7" {
		t.Fatalf("registered as %q", registered)
	}
	for _, path := range []string{"/v1/device", "/v1/provision/status"} {
		_, body := r.do("GET", path, "", nil)
		m := decode(t, body)
		name := m["name"]
		if name == nil {
			name = m["deviceName"]
		}
		if name != "line-7" {
			t.Errorf("GET %s name = %v, want the name registered in the cloud: %s", path, name, body)
		}
	}
	_, body = r.do("GET", "/v1/settings", "", nil)
	var s struct {
		Settings struct {
			Agent struct {
				Name          string `json:"name"`
				Provisioned   bool   `json:"provisioned"`
				APIEndpoint   string `json:"apiEndpoint"`
				MQTTBrokerURL string `json:"mqttBrokerUrl"`
			} `json:"agent"`
		} `json:"settings"`
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if a := s.Settings.Agent; !a.Provisioned || a.APIEndpoint != cloudSrv.URL || a.MQTTBrokerURL != broker || a.Name != "line-7" {
		t.Fatalf("settings' agent group after provisioning: %+v", a)
	}
}
