package cmd

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentProvisionsAgainstAllInOne drives the agent's three-phase
// provisioning against a real Cloud API and broker: all-in-one's own API,
// embedded broker and agent, each reached over its port as a device would.
func TestAgentProvisionsAgainstAllInOne(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	runAllInOne(t, p, filepath.Join(t.TempDir(), "data"))
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)

	postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	login := postJSON(t, apiURL+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)
	access, _ := login["accessToken"].(string)

	// A refused key fails the first phase, as the caller's error.
	bad := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":"pk_nope_nope","apiEndpoint":"http://127.0.0.1:%d"}`, p.api), http.StatusBadRequest)
	if bad["phase"] != "register" {
		t.Fatalf("refused key: %v", bad)
	}
	missing := postJSON(t, agentURL+"/v1/provision", "", `{}`, http.StatusBadRequest)
	if msg, _ := missing["error"].(string); !strings.Contains(msg, "provisioningApiKey") || !strings.Contains(msg, "apiEndpoint") {
		t.Fatalf("empty provisioning request: %v", missing)
	}

	if pull := postJSON(t, agentURL+"/v1/sync/pull", "", ``, http.StatusOK); pull["error"] == nil {
		t.Fatalf("a pull before provisioning: %v, want an error object", pull)
	}

	pk := postJSON(t, apiURL+"/provisioning/keys", access, ``, http.StatusCreated)
	_, devBody, _ := get(agentURL + "/v1/device")
	out := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d","deviceName":"line-1","deviceType":"gateway"}`,
		pk["key"], p.api), http.StatusOK)
	dev, _ := out["device"].(map[string]any)
	uuid, _ := dev["uuid"].(string)
	if out["success"] != true || dev["provisioned"] != true || uuid == "" || !strings.Contains(devBody, uuid) || dev["mqttBrokerUrl"] == "" {
		t.Fatalf("provision answer %v (device %s)", out, devBody)
	}
	for _, secret := range []string{"apiKey", "password", "dk2_"} {
		if strings.Contains(fmt.Sprint(out), secret) {
			t.Errorf("the provisioning answer shows %s: %v", secret, out)
		}
	}
	code, status, err := get(agentURL + "/v1/provision/status")
	if err != nil || code != 200 || !strings.Contains(status, `"provisioned":true`) || !strings.Contains(status, `"mqttConfigured":true`) || strings.Contains(status, "dk2_") {
		t.Fatalf("provision status: %d %s %v", code, status, err)
	}
	// The cloud knows the agent under the agent's own UUID, and has its
	// state report (phase three went over the embedded broker).
	var state string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body, err := getWithToken(apiURL+"/agents/"+uuid+"/current-state", access)
		if err == nil && code == http.StatusOK && strings.Contains(body, "provisioned") {
			state = body
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cloud has no state report of %s: %d %s %v", uuid, code, body, err)
		}
	}
	if !strings.Contains(state, "line-1") || !strings.Contains(state, `"unhealthySubsystems":[]`) || !strings.Contains(state, `"name":"store"`) {
		t.Errorf("state report without the line or the agent's health: %s", state)
	}
	// The target state: unchanged since provisioning (304 from the cloud),
	// then changed by an operator, then unchanged again.
	if pull := postJSON(t, agentURL+"/v1/sync/pull", "", ``, http.StatusOK); pull["changed"] != false {
		t.Fatalf("first pull: %v", pull)
	}
	putJSON(t, apiURL+"/agents/"+uuid+"/target-state", access, `{"state":{"schemaVersion":1,"settings":{"logging":{"level":"debug"}}}}`)
	// The change's notice may have made the agent pull it already; either
	// way this pull ends with the new version.
	pull := postJSON(t, agentURL+"/v1/sync/pull", "", ``, http.StatusOK)
	if v, _ := pull["version"].(float64); v < 1 {
		t.Fatalf("pull after a change: %v", pull)
	}
	if pull2 := postJSON(t, agentURL+"/v1/sync/pull", "", ``, http.StatusOK); pull2["changed"] != false || pull2["version"] != pull["version"] {
		t.Fatalf("pull without a change: %v", pull2)
	}
	if _, dev, _ := get(agentURL + "/v1/device"); !strings.Contains(dev, `"mode":"provisioned-online"`) || !strings.Contains(dev, `"is_online":true`) {
		t.Fatalf("device after pulls: %s", dev)
	}

	again := postJSON(t, agentURL+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d"}`, pk["key"], p.api), http.StatusConflict)
	if again["error"] == nil {
		t.Fatalf("second provisioning: %v", again)
	}

	// Deprovisioning keeps the UUID and the device key: provisioning again
	// needs no new provisioning key (the used one would be refused).
	if dep := postJSON(t, agentURL+"/v1/deprovision", "", ``, http.StatusOK); dep["status"] != "deprovisioned" {
		t.Fatalf("deprovision: %v", dep)
	}
	if _, status, _ := get(agentURL + "/v1/provision/status"); !strings.Contains(status, `"provisioned":false`) {
		t.Fatalf("status after deprovision: %s", status)
	}
	if re := postJSON(t, agentURL+"/v1/provision", "", `{}`, http.StatusOK); re["success"] != true {
		t.Fatalf("provisioning again without a key: %v", re)
	}

	// A factory reset forgets the cloud, keeps the UUID, and restarts.
	if fr := postJSON(t, agentURL+"/v1/factory-reset", "", ``, http.StatusOK); fr["status"] != "factory-reset" {
		t.Fatalf("factory reset: %v", fr)
	}
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, status, err := get(agentURL + "/v1/provision/status")
		if err == nil && code == http.StatusOK && strings.Contains(status, `"mqttConfigured":false`) {
			if !strings.Contains(status, uuid) {
				t.Fatalf("the UUID changed in a factory reset: %s", status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("status after factory reset: %d %s %v", code, status, err)
		}
	}
	// The reset agent soft-reboots: while it initialises its store is
	// closed (503); once up it is standalone and needs a key again.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, _ := jsonDo(t, http.MethodPost, agentURL+"/v1/provision", "", `{}`)
		if code == http.StatusBadRequest {
			break
		}
		if code != http.StatusServiceUnavailable || time.Now().After(deadline) {
			t.Fatalf("provisioning without a key after a factory reset: %d, want 400", code)
		}
	}
}

// putJSON sends a PUT with a bearer token and wants 200.
func putJSON(t *testing.T, url, bearer, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s = %d %s", url, resp.StatusCode, b)
	}
}
