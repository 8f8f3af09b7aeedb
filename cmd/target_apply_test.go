package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// startModbusSimulator runs the Modbus adapter's test server (Debian's
// python3-pymodbus): holding register i of unit u holds u*1000+i.
func startModbusSimulator(t *testing.T) int {
	t.Helper()
	port := coretest.FreePort(t)
	coretest.Pymodbus(t, "../roles/agent/adapters/modbus/testdata/server.py", port, "--units", "2", "--registers", "20")
	return port
}

// modbusDoc is a target-state document with one Modbus endpoint on the
// simulator.
func modbusDoc(port, poll int) string {
	return fmt.Sprintf(`{"state":{"schemaVersion":1,"endpoints":[{"name":"press-1","protocol":"modbus","poll_interval":%d,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":2},
		"data_points":[{"name":"r3","register":"holding:3","type":"uint16"}]}]}}`, poll, port)
}

// TestTargetStateAppliedFromTheCloud runs all-in-one and a Modbus
// simulator: a PUT of a target state adding a Modbus endpoint, pulled by
// the agent, makes it poll the simulator; the same document again
// restarts nothing; an invalid one is refused while the endpoint keeps
// polling; the managed endpoint answers 409 locally; another tenant gets
// 404 on the devices routes.
func TestTargetStateAppliedFromTheCloud(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one and a Modbus server")
	}
	clearEnv(t)
	t.Setenv("ALLOW_REGISTRATION", "true")
	modbusPort := startModbusSimulator(t)
	p := freeAIOPorts(t)
	runAllInOne(t, p, filepath.Join(t.TempDir(), "data"))
	c := provisionAgent(t, p.api, fmt.Sprintf("http://127.0.0.1:%d", p.agent))
	agentURL, apiURL, access, uuid := c.agentURL, c.apiURL, c.access, c.agent

	pull := func() map[string]any {
		t.Helper()
		return postJSON(t, agentURL+"/v1/sync/pull", "", ``, http.StatusOK)
	}
	type metrics struct {
		Since string `json:"since"`
		Polls int    `json:"polls"`
	}
	deviceMetrics := func() (metrics, bool) {
		code, body, err := get(agentURL + "/v1/adapters/modbus/devices/press-1/metrics")
		var m metrics
		if err != nil || code != http.StatusOK || json.Unmarshal([]byte(body), &m) != nil {
			return m, false
		}
		return m, true
	}
	goodValue := func() bool {
		_, body, err := get(agentURL + "/v1/adapters/modbus/devices/press-1")
		return err == nil && strings.Contains(body, `"value":2003`) && strings.Contains(body, `"quality":"GOOD"`)
	}

	// A target state adding the endpoint reaches the agent without a
	// pull: the cloud's notice on its command subtree makes it fetch and
	// apply the document (its own poll is a minute away), and the
	// simulator is polled. The budget is wide for loaded CI machines; the
	// time it took is logged.
	cloudSide{agentURL: agentURL}.waitPlatformConnected(t)
	start := time.Now()
	putJSON(t, apiURL+"/agents/"+uuid+"/target-state", access, modbusDoc(modbusPort, 200))
	coretest.Eventually(t, 10*time.Second, "press-1 polling the simulator with no pull", goodValue)
	t.Logf("the simulator's value read %v after the PUT, with no pull", time.Since(start).Round(time.Millisecond))
	res := pull()
	ts, _ := res["targetState"].(map[string]any)
	// The cloud's notice may have made the agent pull first, so the
	// pull's own "changed" says nothing; the applied version does.
	if ts["version"] != res["version"] || ts["error"] != nil || res["version"] == float64(0) {
		t.Fatalf("pull of the first document: %v", res)
	}
	firstVersion := res["version"]
	first, _ := deviceMetrics()

	// The same document again: a new version, nothing restarted.
	putJSON(t, apiURL+"/agents/"+uuid+"/target-state", access, modbusDoc(modbusPort, 200))
	if res := pull(); res["version"] == firstVersion {
		t.Fatalf("pull of the identical document: %v", res)
	}
	m, ok := deviceMetrics()
	if !ok || m.Since != first.Since {
		t.Fatalf("press-1 restarted by an identical document: since %q, was %q", m.Since, first.Since)
	}

	// An invalid document (the cloud checks its shape; the poll interval
	// is the agent's to refuse): refused, the previous one keeps polling.
	putJSON(t, apiURL+"/agents/"+uuid+"/target-state", access, modbusDoc(modbusPort, 5))
	res = pull()
	ts, _ = res["targetState"].(map[string]any)
	if msg, _ := ts["error"].(string); ts["refused"] != res["version"] || !strings.Contains(msg, "endpoints[0].poll_interval") {
		t.Fatalf("pull of the invalid document: %v", res)
	}
	before, _ := deviceMetrics()
	coretest.Eventually(t, 10*time.Second, "press-1 still polling after the refusal", func() bool {
		m, ok := deviceMetrics()
		return ok && m.Since == first.Since && m.Polls > before.Polls+2 && goodValue()
	})

	// The managed endpoint is the cloud's: the local API answers 409.
	code, body := jsonDo(t, http.MethodPatch, agentURL+"/v1/endpoints/press-1", "", `{"poll_interval":1000}`)
	if msg, _ := body["error"].(string); code != http.StatusConflict || !strings.Contains(msg, `endpoint "press-1" is managed by the cloud's target state`) {
		t.Fatalf("local change of a managed endpoint: %d %v", code, body)
	}

	// The devices routes edit the same document: a fixed poll interval
	// through PUT /devices/press-1 applies, and the refusal is over.
	code, body = jsonDo(t, http.MethodPut, apiURL+"/agents/"+uuid+"/devices/press-1", access, fmt.Sprintf(
		`{"name":"press-1","protocol":"modbus","poll_interval":300,"connection":{"host":"127.0.0.1","port":%d,"unitId":2},
		"data_points":[{"name":"r3","register":"holding:3","type":"uint16"}]}`, modbusPort))
	if code != http.StatusOK {
		t.Fatalf("PUT device: %d %v", code, body)
	}
	res = pull()
	ts, _ = res["targetState"].(map[string]any)
	if ts["version"] != body["version"] || ts["error"] != nil {
		t.Fatalf("pull after the device edit: %v", res)
	}
	coretest.Eventually(t, 15*time.Second, "press-1 polling with the edited definition", goodValue)

	// Another tenant's admin does not find the agent.
	reg := postJSON(t, apiURL+"/auth/register", "", `{"email":"b@example.com","password":"correct horse battery"}`, http.StatusCreated)
	tokB, _ := reg["accessToken"].(string)
	for _, c := range []struct{ method, path, body string }{
		{http.MethodGet, "/devices", ""},
		{http.MethodPost, "/devices", `{"name":"x","protocol":"modbus"}`},
		{http.MethodPut, "/devices/press-1", `{"name":"press-1","protocol":"modbus"}`},
		{http.MethodDelete, "/devices/press-1", ""},
	} {
		if code, body := jsonDo(t, c.method, apiURL+"/agents/"+uuid+c.path, tokB, c.body); code != http.StatusNotFound {
			t.Errorf("%s %s as tenant B: %d %v, want 404", c.method, c.path, code, body)
		}
	}

	// Deleting the device through the cloud stops the endpoint.
	if code, body := jsonDo(t, http.MethodDelete, apiURL+"/agents/"+uuid+"/devices/press-1", access, ""); code != http.StatusOK {
		t.Fatalf("DELETE device: %d %v", code, body)
	}
	pull()
	if _, ok := deviceMetrics(); ok {
		t.Fatal("press-1 still runs after the cloud deleted it")
	}

	// Secrets by reference: refused while the cloud has no value, applied
	// once it has one (same version, new ETag), never shown back.
	putJSON(t, apiURL+"/agents/"+uuid+"/target-state", access, `{"state":{"schemaVersion":1,
		"destinations":[{"name":"historian","type":"mqtt","config_json":{"url":"tcp://127.0.0.1:1","username":"u","password":{"secretRef":"historian-pw"}}}]}}`)
	res = pull()
	ts, _ = res["targetState"].(map[string]any)
	if msg, _ := ts["error"].(string); !strings.Contains(msg, `secret "historian-pw" is not set on the cloud`) {
		t.Fatalf("pull with an unset secret: %v", res)
	}
	if code, body := jsonDo(t, http.MethodPut, apiURL+"/agents/"+uuid+"/secrets/historian-pw", access, `{"value":"s3cret-pw"}`); code != http.StatusCreated {
		t.Fatalf("PUT secret: %d %v", code, body)
	}
	res = pull()
	ts, _ = res["targetState"].(map[string]any)
	if ts["error"] != nil || ts["version"] != res["version"] {
		t.Fatalf("pull after the secret was set: %v", res)
	}
	_, dests, _ := get(agentURL + "/v1/publish/destinations")
	_, cloudDoc, _ := getWithToken(apiURL+"/agents/"+uuid+"/target-state", access)
	_, secrets, _ := getWithToken(apiURL+"/agents/"+uuid+"/secrets", access)
	if !strings.Contains(dests, `"historian"`) || strings.Contains(dests+cloudDoc+secrets, "s3cret-pw") || !strings.Contains(secrets, "historian-pw") {
		t.Fatalf("secret shown back or not applied:\nagent %s\ncloud %s\nsecrets %s", dests, cloudDoc, secrets)
	}
}
