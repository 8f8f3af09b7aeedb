package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

func keyMode(a *config.Agent) {
	a.SecurityMode = "API_KEY"
	a.APIKey = "s3cret-key-for-tests"
}

func TestSecurityAPIKeyMode(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, keyMode)
	tests := []struct {
		name   string
		path   string
		header map[string]string
		want   int
	}{
		{"ping needs no key", "/ping", map[string]string{"X-Api-Key": ""}, 200},
		{"healthy needs no key", "/v1/healthy", map[string]string{"X-Api-Key": ""}, 200},
		{"readiness needs no key", "/v1/readiness", map[string]string{"X-Api-Key": ""}, 200},
		{"health alias needs no key", "/health", map[string]string{"X-Api-Key": ""}, 200},
		{"endpoints without key", "/v1/endpoints", map[string]string{"X-Api-Key": ""}, 401},
		{"endpoints with a wrong key", "/v1/endpoints", map[string]string{"X-Api-Key": "nope"}, 401},
		{"endpoints with the key", "/v1/endpoints", nil, 200},
		{"endpoints with the key as query", "/v1/endpoints?apiKey=s3cret-key-for-tests", map[string]string{"X-Api-Key": ""}, 200},
		{"metrics without key", "/metrics", map[string]string{"X-Api-Key": ""}, 401},
		{"admin users without a session, with the key", "/v1/admin/users", nil, 401},
		{"admin users without a session or key", "/v1/admin/users", map[string]string{"X-Api-Key": ""}, 401},
		{"a foreign Host is fine in key mode", "/v1/endpoints", map[string]string{"Host": "gateway.example:48484"}, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do("GET", tt.path, "", tt.header)
			if code != tt.want {
				t.Fatalf("GET %s = %d, want %d (%s)", tt.path, code, tt.want, body)
			}
			if code == 401 {
				errorOf(t, body)
			}
			if tt.path == "/ping" && body != "OK" {
				t.Fatalf("/ping body %q, want OK", body)
			}
		})
	}
}

func TestSecurityLocalhostOnly(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	if !strings.HasPrefix(r.base, "http://127.0.0.1:") {
		t.Fatalf("LOCALHOST_ONLY bound %s", r.base)
	}
	port := r.base[strings.LastIndex(r.base, ":")+1:]
	tests := []struct {
		name   string
		path   string
		header map[string]string
		want   int
	}{
		{"loopback address", "/v1/endpoints", nil, 200},
		{"localhost name", "/v1/endpoints", map[string]string{"Host": "localhost:" + port}, 200},
		{"ipv6 loopback", "/v1/endpoints", map[string]string{"Host": "[::1]:" + port}, 200},
		{"rebinding host", "/v1/endpoints", map[string]string{"Host": "evil.example"}, 403},
		{"rebinding host with port", "/v1/endpoints", map[string]string{"Host": "evil.example:" + port}, 403},
		{"rebinding host on ping too", "/ping", map[string]string{"Host": "evil.example"}, 403},
		{"forwarded by a proxy", "/v1/endpoints", map[string]string{"X-Forwarded-For": "203.0.113.9"}, 403},
		{"Forwarded header", "/v1/endpoints", map[string]string{"Forwarded": "for=203.0.113.9"}, 403},
		{"cross-origin page", "/v1/endpoints", map[string]string{"Origin": "http://evil.example"}, 403},
		{"local origin", "/v1/endpoints", map[string]string{"Origin": "http://localhost:" + port}, 200},
		{"admin still needs a session", "/v1/admin/users", nil, 401},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do("GET", tt.path, "", tt.header)
			if code != tt.want {
				t.Fatalf("GET %s = %d, want %d (%s)", tt.path, code, tt.want, body)
			}
			if code >= 400 {
				errorOf(t, body)
			}
		})
	}
}

func TestEndpointBadInputStoresNothing(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	valid := `{"name":"plc-1","protocol":"modbus","connection":{"host":"127.0.0.1","port":1502},"poll_interval":1000,
		"data_points":[{"name":"temp","register":"holding:0","type":"int16"}]}`
	if code, body := r.do("POST", "/v1/endpoints", valid, nil); code != 201 {
		t.Fatalf("valid endpoint: %d %s", code, body)
	}
	tests := []struct {
		name, body, field string
	}{
		{"malformed JSON", `{"name": "x", `, "body"},
		{"unknown field", `{"name":"x","protocol":"modbus","pollInterval":5}`, "pollInterval"},
		{"unknown protocol", `{"name":"x","protocol":"profinet","poll_interval":1000}`, "protocol"},
		{"register out of range", `{"name":"x","protocol":"modbus","connection":{"host":"127.0.0.1"},"poll_interval":1000,
			"data_points":[{"name":"t","register":"holding:70000"}]}`, "data_points[0].register"},
		{"poll_interval 0", `{"name":"x","protocol":"modbus","connection":{"host":"127.0.0.1"},"poll_interval":0,
			"data_points":[{"name":"t","register":"holding:1"}]}`, "poll_interval"},
		{"poll_interval negative", `{"name":"x","protocol":"modbus","connection":{"host":"127.0.0.1"},"poll_interval":-5,
			"data_points":[{"name":"t","register":"holding:1"}]}`, "poll_interval"},
		{"duplicate name", valid, "name"},
		{"missing name", `{"protocol":"modbus","connection":{"host":"127.0.0.1"},"poll_interval":1000}`, "name"},
		{"uuid given", `{"uuid":"x","name":"y","protocol":"modbus","poll_interval":1000}`, "uuid"},
		{"wrong type", `{"name":"x","protocol":"modbus","poll_interval":"fast"}`, "poll_interval"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := r.do("POST", "/v1/endpoints", tt.body, nil)
			if code != 400 {
				t.Fatalf("POST = %d, want 400 (%s)", code, body)
			}
			if msg := errorOf(t, body); !strings.Contains(msg, tt.field) {
				t.Fatalf("error %q does not name %s", msg, tt.field)
			}
		})
	}
	code, body := r.do("GET", "/v1/endpoints", "", nil)
	if code != 200 {
		t.Fatal(code, body)
	}
	if eps := decode(t, body)["endpoints"].([]any); len(eps) != 1 {
		t.Fatalf("%d endpoints stored after bad input, want 1: %s", len(eps), body)
	}
	// PATCH refuses the same mistakes and changes nothing.
	if code, body := r.do("PATCH", "/v1/endpoints/plc-1", `{"poll_interval":0}`, nil); code != 400 || !strings.Contains(errorOf(t, body), "poll_interval") {
		t.Fatalf("PATCH poll_interval 0 = %d %s", code, body)
	}
	if code, body := r.do("PATCH", "/v1/endpoints/nope", `{"enabled":false}`, nil); code != 404 {
		t.Fatalf("PATCH unknown = %d %s", code, body)
	}
}

func TestEndpointLifecycle(t *testing.T) {
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	for i := range 3 {
		body := fmt.Sprintf(`{"name":"plc-%d","protocol":"modbus","connection":{"host":"127.0.0.1","port":1},"poll_interval":100,
			"data_points":[{"name":"t","register":"holding:%d"}]}`, i, i)
		if code, resp := r.do("POST", "/v1/endpoints", body, nil); code != 201 {
			t.Fatalf("create: %d %s", code, resp)
		}
	}
	// A refused connection turns into BAD readings and a health that is
	// not connected, without any device present.
	eventually(t, 10*time.Second, "BAD readings with CONNECTION_REFUSED", func() bool {
		_, body := r.do("GET", "/v1/adapters/modbus/devices/plc-0", "", nil)
		return strings.Contains(body, `"qualityCode":"CONNECTION_REFUSED"`)
	})
	_, body := r.do("GET", "/v1/endpoints?protocol=modbus", "", nil)
	eps := decode(t, body)["endpoints"].([]any)
	if len(eps) != 3 {
		t.Fatalf("endpoints = %s", body)
	}
	h := eps[0].(map[string]any)["health"].(map[string]any)
	if h["connected"] != false || h["status"] == "connected" {
		t.Fatalf("health of an unreachable device = %v", h)
	}
	if code, body := r.do("PATCH", "/v1/endpoints/plc-0", `{"enabled":false}`, nil); code != 200 || decode(t, body)["enabled"] != false {
		t.Fatalf("disable: %d %s", code, body)
	}
	if code, _ := r.do("GET", "/v1/adapters/modbus/devices/plc-0", "", nil); code != 404 {
		t.Fatalf("a disabled endpoint still runs: %d", code)
	}
	if code, body := r.do("DELETE", "/v1/endpoints/plc-1", "", nil); code != 200 {
		t.Fatalf("delete: %d %s", code, body)
	}
	if code, _ := r.do("GET", "/v1/adapters/modbus/devices/plc-1", "", nil); code != 404 {
		t.Fatal("a deleted endpoint still runs")
	}
	if code, _ := r.do("GET", "/v1/adapters/profinet/devices", "", nil); code != 404 {
		t.Fatal("unknown protocol adapter answered")
	}
	// Endpoints survive a restart of the agent.
	r.stop()
	r2 := startAgent(t, dir, true, nil)
	_, body = r2.do("GET", "/v1/endpoints", "", nil)
	if n := len(decode(t, body)["endpoints"].([]any)); n != 2 {
		t.Fatalf("%d endpoints after restart, want 2: %s", n, body)
	}
	code, body := r2.do("DELETE", "/v1/endpoints", "", nil)
	if code != 200 || decode(t, body)["removed"] != 2.0 {
		t.Fatalf("delete all: %d %s", code, body)
	}
	if _, body := r2.do("GET", "/v1/devices", "", nil); strings.Contains(body, "plc-2") {
		t.Fatalf("devices after delete all: %s", body)
	}
}

func TestLifecycleFailedPhase(t *testing.T) {
	// A directory where the store file should be fails the config
	// phase, and is retried: the agent stays INITIALIZING and says why.
	// (Access errors end the agent instead: TestUnusableDataDirEndsTheAgent.)
	r := startAgent(t, retriedDataDir(t), false, nil)
	eventually(t, 10*time.Second, "a failed config phase", func() bool {
		_, body := r.do("GET", "/v1/readiness", "", nil)
		return strings.Contains(body, "config")
	})
	code, body := r.do("GET", "/v1/readiness", "", nil)
	m := decode(t, body)
	if code != 503 || m["ready"] != false || m["state"] != StateInitializing {
		t.Fatalf("readiness = %d %s", code, body)
	}
	if code, body := r.do("GET", "/v1/healthy", "", nil); code != 500 || decode(t, body)["status"] != "unhealthy" {
		t.Fatalf("healthy = %d %s", code, body)
	}
	code, body = r.do("POST", "/v1/reboot", "", nil)
	m = decode(t, body)
	if code != 409 || m["error"] == "" || m["state"] != StateInitializing || m["hint"] == "" {
		t.Fatalf("reboot outside RUNNING = %d %s", code, body)
	}
	if code, _ := r.do("GET", "/v1/endpoints", "", nil); code != 503 {
		t.Fatalf("endpoints before the store opened = %d, want 503", code)
	}
}

func TestLifecycleReportRebootShutdown(t *testing.T) {
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	code, body := r.do("GET", "/v1/health/report", "", nil)
	m := decode(t, body)
	if code != 200 || m["overall"] != true || m["state"] != StateRunning {
		t.Fatalf("report = %d %s", code, body)
	}
	phases := m["report"].(map[string]any)["phases"].([]any)
	if len(phases) != 6 {
		t.Fatalf("%d phases, want 6", len(phases))
	}
	for i, p := range phases {
		p := p.(map[string]any)
		if p["name"] != phaseOrder[i] || p["healthy"] != true || p["durationMs"] == nil {
			t.Fatalf("phase %d = %v", i, p)
		}
	}
	if code, body := r.do("GET", "/v1/healthy", "", nil); code != 200 || decode(t, body)["status"] != "healthy" {
		t.Fatalf("healthy = %d %s", code, body)
	}
	code, body = r.do("POST", "/v1/reboot", "", nil)
	if code != 202 || decode(t, body)["Data"] == nil {
		t.Fatalf("reboot = %d %s", code, body)
	}
	r.waitReady()
	_, body = r.do("GET", "/v1/health/report", "", nil)
	if !strings.Contains(body, `"attempts":1`) {
		t.Fatalf("phases after reboot: %s", body)
	}
	code, body = r.do("POST", "/v1/shutdown", "", nil)
	if code != 202 {
		t.Fatalf("shutdown = %d %s", code, body)
	}
	select {
	case err := <-r.done:
		if err != nil {
			t.Fatalf("shutdown ended the agent with %v", err)
		}
		r.done <- nil
	case <-timeAfter(10):
		t.Fatal("the agent did not stop after POST /v1/shutdown")
	}
	// The store was closed cleanly: a new agent opens it and it is sound.
	r2 := startAgent(t, dir, true, nil)
	if code, body := r2.do("GET", "/v1/db/stats", "", nil); code != 200 || !strings.Contains(body, `"name":"endpoints"`) {
		t.Fatalf("db stats = %d %s", code, body)
	}
}

// TestSampleConfigsAccepted posts every adapter's sample endpoint through
// the API, so the samples and the READMEs that point at them stay valid.
func TestSampleConfigsAccepted(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	samples, err := filepath.Glob("adapters/*/sample-config.json")
	if err != nil || len(samples) < 3 {
		t.Fatalf("sample configs: %v %v", samples, err)
	}
	for _, s := range samples {
		body, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		if code, resp := r.do("POST", "/v1/endpoints", string(body), nil); code != 201 {
			t.Errorf("%s: %d %s", s, code, resp)
		}
	}
}

// TestHealthAliasAnswersAsHealthy: /health is the other roles' path for
// the same check, with the agent's own shape and status.
func TestHealthAliasAnswersAsHealthy(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	code, body := r.do("GET", "/health", "", nil)
	wantCode, want := r.do("GET", "/v1/healthy", "", nil)
	if code != wantCode || code != 200 {
		t.Fatalf("GET /health = %d, /v1/healthy = %d, want both 200 (%s)", code, wantCode, body)
	}
	got, exp := decode(t, body), decode(t, want)
	if got["status"] != "healthy" || fmt.Sprint(got) != fmt.Sprint(exp) {
		t.Fatalf("GET /health = %v, want the /v1/healthy answer %v", got, exp)
	}
}
