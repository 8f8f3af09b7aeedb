package cmd

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// statusEndpoint polls the Modbus simulator every 500 ms, so the agent
// publishes telemetry well within the test's 3 s silence.
const statusEndpoint = `{"name":"press","protocol":"modbus","enabled":true,"poll_interval":500,"mqtt_topic":"plant/press",
 "connection":{"host":"127.0.0.1","port":%d,"unitId":1,"timeoutMs":1000},
 "data_points":[{"name":"spindle","register":"holding:0","type":"uint16","unit":"rpm"}]}`

// TestAgentStatusThreeAgentsIntegration is the status walk-through: three
// edgeplat agent processes provisioned to one all-in-one (embedded broker)
// and reading a Modbus simulator show online; one SIGKILLed shows offline
// once api.agent_offline_after (3 s here) has passed without traffic while
// the others stay online, and online again after a restart; lastSeen moves
// with the agents' real telemetry.
func TestAgentStatusThreeAgentsIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one, three agents and a Modbus server")
	}
	if err := exec.Command(systemPython, "-c", "import pymodbus").Run(); err != nil {
		coretest.Unavailable(t, "python3-pymodbus", systemPython, err)
	}
	clearEnv(t)
	const silence = 3 * time.Second
	t.Setenv("EDGEPLAT_API_AGENT_OFFLINE_AFTER", silence.String())
	bin := buildBinary(t)
	modbusPort := coretest.FreePort(t)
	mb := coretest.NewProcess(t, systemPython, pymodbusScript, "--port", strconv.Itoa(modbusPort), "--units", "1", "--registers", "20")
	mb.Ready = func() error { return coretest.Dialable(net.JoinHostPort("127.0.0.1", strconv.Itoa(modbusPort))) }
	mb.Start()

	p := freeAIOPorts(t)
	startAIO(t, p.args(filepath.Join(t.TempDir(), "data")))
	api := fmt.Sprintf("http://127.0.0.1:%d/api/v1", p.api)
	coretest.Eventually(t, 60*time.Second, "all-in-one to be healthy", func() bool {
		code, _, err := get(fmt.Sprintf("http://127.0.0.1:%d/health", p.api))
		return err == nil && code == http.StatusOK
	})
	postJSON(t, api+"/auth/bootstrap-admin", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusCreated)
	login := postJSON(t, api+"/auth/login", "", `{"email":"ops@example.com","password":"correct horse battery"}`, http.StatusOK)
	token, _ := login["accessToken"].(string)

	type agentProc struct {
		proc *proc
		url  string
		uuid string
	}
	var agents []*agentProc
	for i := range 3 {
		port := coretest.FreePort(t)
		a := &agentProc{url: fmt.Sprintf("http://127.0.0.1:%d", port)}
		env := append(os.Environ(), "AGENT_DATA_DIR="+filepath.Join(t.TempDir(), "agent"), "DEVICE_API_PORT="+strconv.Itoa(port), "EDGEPLAT_LOG_FORMAT=json")
		a.proc = startProc(t, bin, fmt.Sprintf("agent-%d", i), env, "agent")
		agents = append(agents, a)
	}
	ready := func(a *agentProc) {
		t.Helper()
		coretest.Eventually(t, 60*time.Second, "agent "+a.url+" to be ready", func() bool {
			code, _, err := get(a.url + "/v1/readiness")
			return err == nil && code == http.StatusOK
		})
	}
	for i, a := range agents {
		ready(a)
		pk := postJSON(t, api+"/provisioning/keys", token, ``, http.StatusCreated)
		out := postJSON(t, a.url+"/v1/provision", "", fmt.Sprintf(`{"provisioningApiKey":%q,"apiEndpoint":"http://127.0.0.1:%d","deviceName":"line-%d"}`, pk["key"], p.api, i), http.StatusOK)
		a.uuid, _ = out["device"].(map[string]any)["uuid"].(string)
		postJSON(t, a.url+"/v1/endpoints", "", fmt.Sprintf(statusEndpoint, modbusPort), http.StatusCreated)
	}

	// status and lastSeen of every agent, from GET /agents.
	type seen struct {
		status   string
		lastSeen time.Time
	}
	list := func() map[string]seen {
		code, body, err := getWithToken(api+"/agents", token)
		if err != nil || code != http.StatusOK {
			t.Fatalf("GET /agents: %d %s %v", code, body, err)
		}
		var out struct {
			Agents []struct {
				UUID     string     `json:"uuid"`
				Status   string     `json:"status"`
				LastSeen *time.Time `json:"lastSeen"`
			} `json:"agents"`
		}
		if err := json.Unmarshal([]byte(body), &out); err != nil {
			t.Fatal(err)
		}
		m := map[string]seen{}
		for _, a := range out.Agents {
			s := seen{status: a.Status}
			if a.LastSeen != nil {
				s.lastSeen = *a.LastSeen
			}
			m[a.UUID] = s
		}
		return m
	}
	allOnline := func(except string) func() bool {
		return func() bool {
			m := list()
			for _, a := range agents {
				if a.uuid != except && m[a.uuid].status != "online" {
					return false
				}
			}
			return true
		}
	}
	coretest.Eventually(t, 60*time.Second, "three agents online", allOnline(""))
	before := list()
	coretest.Eventually(t, 10*time.Second, "lastSeen to move with the agents' telemetry", func() bool {
		now := list()
		for _, a := range agents {
			if !now[a.uuid].lastSeen.After(before[a.uuid].lastSeen) {
				return false
			}
		}
		return true
	})

	victim := agents[1]
	victim.proc.kill()
	killed := time.Now()
	coretest.Eventually(t, 30*time.Second, "the killed agent offline", func() bool { return list()[victim.uuid].status == "offline" })
	t.Logf("offline %s after the SIGKILL (silence %s)", time.Since(killed).Round(100*time.Millisecond), silence)
	if !allOnline(victim.uuid)() {
		t.Errorf("the other agents after one was killed: %v", list())
	}
	last := list()[victim.uuid].lastSeen
	if last.After(killed) {
		t.Errorf("the killed agent's lastSeen %v is after the kill at %v", last, killed)
	}

	victim.proc.start()
	ready(victim)
	coretest.Eventually(t, 60*time.Second, "the restarted agent online", allOnline(""))
	if got := list()[victim.uuid].lastSeen; !got.After(killed) {
		t.Errorf("the restarted agent's lastSeen %v is not after its restart", got)
	}
}
