package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// aioRun is one all-in-one process run in the test, with its output kept.
type aioRun struct {
	stdout, stderr syncBuffer
	stop           func()
}

// startAIO runs all-in-one with args until stop, which wants a clean exit.
func startAIO(t *testing.T, args []string) *aioRun {
	t.Helper()
	r := &aioRun{}
	ctx, cancel := context.WithCancel(context.Background())
	exit := make(chan int, 1)
	go func() { exit <- execute(ctx, args, &r.stdout, &r.stderr) }()
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case code := <-exit:
			if code != 0 {
				t.Errorf("all-in-one exited %d; stderr:\n%s", code, r.stderr.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("all-in-one did not stop")
		}
	}
	t.Cleanup(r.stop)
	return r
}

// provisionStatusOf returns the agent's GET /v1/provision/status, or nil.
func provisionStatusOf(agentURL string) map[string]any {
	code, body, err := get(agentURL + "/v1/provision/status")
	if err != nil || code != http.StatusOK {
		return nil
	}
	var st map[string]any
	if json.Unmarshal([]byte(body), &st) != nil {
		return nil
	}
	return st
}

// waitLog waits for a log line of all-in-one that holds every part.
func waitLog(t *testing.T, r *aioRun, what string, parts ...string) {
	t.Helper()
	coretest.Eventually(t, 30*time.Second, what, func() bool {
		for _, line := range strings.Split(r.stderr.String(), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		return false
	})
}

// cloudAgents lists the agents the Cloud API shows the admin.
func cloudAgents(t *testing.T, apiURL, token string) []map[string]any {
	t.Helper()
	code, body, err := getWithToken(apiURL+"/agents", token)
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /agents: %d %s %v", code, body, err)
	}
	var doc struct {
		Agents []map[string]any `json:"agents"`
	}
	if err := json.Unmarshal([]byte(body), &doc); err != nil {
		t.Fatalf("GET /agents: %v: %s", err, body)
	}
	return doc.Agents
}

// TestAllInOneProvisionsItself: with the admin's credentials in the
// environment, all-in-one creates the admin and provisions its own agent,
// which the admin then sees in the cloud under the agent's UUID. A restart
// on the same data directory changes nothing, and an agent deprovisioned
// by the operator stays standalone across a restart.
func TestAllInOneProvisionsItself(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	const email, password = "ops@example.com", "correct horse battery"
	t.Setenv("EDGEPLAT_ADMIN_EMAIL", email)
	t.Setenv("EDGEPLAT_ADMIN_PASSWORD", password)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := append(p.args(dataDir), "--auto-provision=true")
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)

	first := startAIO(t, args)
	var uuid string
	coretest.Eventually(t, 30*time.Second, "the agent to be provisioned", func() bool {
		st := provisionStatusOf(agentURL)
		uuid, _ = st["uuid"].(string)
		return st["provisioned"] == true
	})
	if st := provisionStatusOf(agentURL); st["apiEndpoint"] != fmt.Sprintf("http://127.0.0.1:%d", p.api) {
		t.Errorf("provisioned against %v, want all-in-one's own API", st["apiEndpoint"])
	}
	waitLog(t, first, "the provisioning log line", `"msg":"agent provisioned"`, uuid, `"tenant":"Default"`, `"device_name":"all-in-one"`)

	login := postJSON(t, apiURL+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), http.StatusOK)
	token, _ := login["accessToken"].(string)
	agents := cloudAgents(t, apiURL, token)
	if len(agents) != 1 || agents[0]["uuid"] != uuid {
		t.Fatalf("the cloud lists %v, want the agent %s alone", agents, uuid)
	}
	code, body, _ := getWithToken(apiURL+"/agents/"+uuid, token)
	if code != http.StatusOK || !strings.Contains(body, `"all-in-one"`) {
		t.Errorf("GET /agents/%s: %d %s", uuid, code, body)
	}
	for name, out := range map[string]string{"stdout": first.stdout.String(), "stderr": first.stderr.String()} {
		if strings.Contains(out, password) {
			t.Errorf("the configured admin password appears on %s", name)
		}
	}
	first.stop()

	// Idempotent: the second start finds the agent provisioned and makes
	// no new key, admin or agent.
	second := startAIO(t, args)
	waitLog(t, second, "the second start to find the agent provisioned", `"msg":"agent is provisioned already"`, uuid)
	if st := provisionStatusOf(agentURL); st["provisioned"] != true || st["uuid"] != uuid {
		t.Fatalf("status after a restart: %v", st)
	}
	if strings.Contains(second.stderr.String(), `"msg":"agent provisioned"`) || strings.Contains(second.stderr.String(), "created the Cloud API admin") {
		t.Errorf("the second start provisioned again:\n%s", second.stderr.String())
	}
	login = postJSON(t, apiURL+"/auth/login", "", fmt.Sprintf(`{"email":%q,"password":%q}`, email, password), http.StatusOK)
	token, _ = login["accessToken"].(string)
	if agents := cloudAgents(t, apiURL, token); len(agents) != 1 || agents[0]["uuid"] != uuid {
		t.Errorf("the cloud lists %v after a restart", agents)
	}
	code, body, _ = getWithToken(apiURL+"/audit/events", token)
	if code != http.StatusOK || strings.Count(body, `"provisioning_key.created"`) != 1 || strings.Count(body, `"agent.registered"`) != 1 {
		t.Errorf("audit after a restart, want the first start's key and registration only: %d %s", code, body)
	}

	// The operator's choice to leave the cloud survives a restart.
	postJSON(t, agentURL+"/v1/deprovision", "", ``, http.StatusOK)
	second.stop()
	third := startAIO(t, args)
	waitLog(t, third, "the third start to leave the deprovisioned agent", `"msg":"agent was deprovisioned after all-in-one provisioned it; leaving it standalone"`)
	if st := provisionStatusOf(agentURL); st["provisioned"] != false {
		t.Errorf("status after deprovisioning and a restart: %v", st)
	}
}

var shownPassword = regexp.MustCompile(`password: (\S+) \(shown once\)`)

// TestAllInOneShowsGeneratedAdminPasswordOnce: without admin credentials
// in the configuration, the admin gets a random password, shown once on
// the first start and never logged; it logs in. The second start shows
// nothing.
func TestAllInOneShowsGeneratedAdminPasswordOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := append(p.args(dataDir), "--auto-provision=true")
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)

	first := startAIO(t, args)
	coretest.Eventually(t, 30*time.Second, "the agent to be provisioned", func() bool {
		return provisionStatusOf(agentURL)["provisioned"] == true
	})
	shown := shownPassword.FindAllStringSubmatch(first.stdout.String(), -1)
	if len(shown) != 1 || !strings.Contains(first.stdout.String(), "Cloud API admin: admin@edgeplat.local") {
		t.Fatalf("stdout shows %d passwords, want 1:\n%s", len(shown), first.stdout.String())
	}
	password := shown[0][1]
	if len(password) < 20 {
		t.Errorf("generated password %q is short", password)
	}
	if strings.Contains(first.stderr.String(), password) {
		t.Error("the generated password appears in the log")
	}
	postJSON(t, apiURL+"/auth/login", "", fmt.Sprintf(`{"email":"admin@edgeplat.local","password":%q}`, password), http.StatusOK)
	first.stop()

	second := startAIO(t, args)
	waitLog(t, second, "the second start to find the agent provisioned", `"msg":"agent is provisioned already"`)
	if out := second.stdout.String(); strings.Contains(out, "password") {
		t.Errorf("the second start shows a password:\n%s", out)
	}
}

// TestAllInOneAutoProvisionNeedsThePasswordOfAnExistingAdmin: once an
// admin exists, a start without its password cannot log in; it says so
// and leaves the agent standalone, and all-in-one keeps running.
func TestAllInOneAutoProvisionNeedsThePasswordOfAnExistingAdmin(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)
	apiURL := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)

	manual := startAIO(t, p.args(dataDir))
	coretest.Eventually(t, 30*time.Second, "the Cloud API to be healthy", func() bool {
		code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		return err == nil && code == http.StatusOK
	})
	postJSON(t, apiURL+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	manual.stop()

	auto := startAIO(t, append(p.args(dataDir), "--auto-provision=true"))
	waitLog(t, auto, "the warning about the missing password", `"level":"WARN"`, "EDGEPLAT_ADMIN_PASSWORD")
	if st := provisionStatusOf(agentURL); st["provisioned"] != false {
		t.Errorf("status: %v", st)
	}
	if strings.Contains(auto.stdout.String(), "password") {
		t.Errorf("a password was shown although no admin was created:\n%s", auto.stdout.String())
	}
	if code, _, err := get(agentURL + "/v1/readiness"); err != nil || code != http.StatusOK {
		t.Errorf("the agent after auto-provisioning gave up: %d %v", code, err)
	}
}

// TestAllInOneWarnsWhenTheExistingAdminIsKept: the admin variables on a
// data directory that has an admin already (and an agent provisioned, so
// nothing logs in) used to be ignored without a word.
func TestAllInOneWarnsWhenTheExistingAdminIsKept(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one")
	}
	clearEnv(t)
	p := freeAIOPorts(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	args := append(p.args(dataDir), "--auto-provision=true", "--log-format", "json")
	agentURL := fmt.Sprintf("http://127.0.0.1:%d", p.agent)

	t.Setenv("EDGEPLAT_ADMIN_PASSWORD", "first password")
	first := startAIO(t, args)
	coretest.Eventually(t, 30*time.Second, "the agent to be provisioned", func() bool {
		return provisionStatusOf(agentURL)["provisioned"] == true
	})
	first.stop()
	if strings.Contains(first.stderr.String(), "only create the first admin") {
		t.Errorf("the first start, which created the admin, warned:\n%s", first.stderr.String())
	}

	t.Setenv("EDGEPLAT_ADMIN_PASSWORD", "second password")
	second := startAIO(t, args)
	waitLog(t, second, "the warning that the existing admin is kept", `"level":"WARN"`,
		"EDGEPLAT_ADMIN_EMAIL and EDGEPLAT_ADMIN_PASSWORD only create the first admin", "it is kept",
		"the password is not that of the existing admin admin@edgeplat.local", "remove "+dataDir, "--data-dir elsewhere", "password/reset")
	waitLog(t, second, "the second start to find the agent provisioned", `"msg":"agent is provisioned already"`)
	second.stop()
	if n := strings.Count(second.stderr.String(), "only create the first admin"); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
}
