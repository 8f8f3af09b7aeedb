package agent

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// simStatus is GET /v1/simulation/status.
type simStatus struct {
	Scenarios []struct {
		Name      string     `json:"name"`
		Running   bool       `json:"running"`
		StartedAt *time.Time `json:"started_at"`
		Devices   []struct {
			Name    string `json:"name"`
			Running bool   `json:"running"`
		} `json:"devices"`
		Readings int64 `json:"readings"`
	} `json:"scenarios"`
}

func (r *running) simStatus(t *testing.T) simStatus {
	t.Helper()
	code, body := r.do("GET", "/v1/simulation/status", "", nil)
	var st simStatus
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("GET /v1/simulation/status = %d %s", code, body)
	}
	return st
}

// running counts the named scenario's running devices and returns its
// readings and whether it runs.
func (s simStatus) running(name string) (devices int, readings int64, running bool) {
	for _, sc := range s.Scenarios {
		if sc.Name == name {
			for _, d := range sc.Devices {
				if d.Running {
					devices++
				}
			}
			return devices, sc.Readings, sc.Running
		}
	}
	return 0, 0, false
}

// TestSimulationModeSetting: with agent.simulation_mode (SIMULATION_MODE)
// off, the four simulation routes answer 404 naming the setting and
// POST /v1/endpoints refuses protocol "simulated"; on, scenarios start
// (409 when running, 404 when unknown), their devices run in the
// endpoint runner and produce readings (the fault scenario's BAD ones
// among them), survive a soft reboot, and stop one by one or all at once.
func TestSimulationModeSetting(t *testing.T) {
	off := startAgent(t, t.TempDir(), true, nil)
	for _, rt := range []struct{ method, path string }{
		{"GET", "/v1/simulation/status"},
		{"POST", "/v1/simulation/scenarios/steady/start"},
		{"POST", "/v1/simulation/scenarios/steady/stop"},
		{"POST", "/v1/simulation/stop-all"},
	} {
		code, body := off.do(rt.method, rt.path, "", nil)
		if code != 404 || !strings.Contains(errorOf(t, body), "agent.simulation_mode") {
			t.Errorf("%s %s with simulation off = %d %s, want 404 naming the setting", rt.method, rt.path, code, body)
		}
	}
	simulated := `{"name":"sim-own","protocol":"simulated","poll_interval":1000,"connection":{"scenario":"steady"},` +
		`"data_points":[{"name":"t","register":"temperature"}]}`
	if code, body := off.do("POST", "/v1/endpoints", simulated, nil); code != 400 || !strings.Contains(errorOf(t, body), "protocol") {
		t.Errorf("POST /v1/endpoints simulated with simulation off = %d %s, want 400 naming protocol", code, body)
	}

	on := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.SimulationMode = true })
	st := on.simStatus(t)
	if len(st.Scenarios) != 5 {
		t.Fatalf("status lists %d scenarios: %+v", len(st.Scenarios), st)
	}
	for _, sc := range st.Scenarios {
		if sc.Running || sc.StartedAt != nil {
			t.Errorf("scenario %s runs before any start", sc.Name)
		}
	}
	code, body := on.do("POST", "/v1/simulation/scenarios/fault/start", "", nil)
	var started struct {
		Message string `json:"message"`
		Status  struct {
			Name    string            `json:"name"`
			Running bool              `json:"running"`
			Devices []json.RawMessage `json:"devices"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(body), &started); code != 200 || err != nil || started.Message == "" ||
		started.Status.Name != "fault" || !started.Status.Running || len(started.Status.Devices) != 1 {
		t.Fatalf("start fault = %d %s", code, body)
	}
	if code, body := on.do("POST", "/v1/simulation/scenarios/fault/start", "", nil); code != 409 {
		t.Errorf("start fault again = %d %s, want 409", code, body)
	}
	for _, path := range []string{"/v1/simulation/scenarios/chaos/start", "/v1/simulation/scenarios/chaos/stop"} {
		if code, body := on.do("POST", path, "", nil); code != 404 || !strings.Contains(errorOf(t, body), `"chaos"`) {
			t.Errorf("POST %s = %d %s, want 404 naming the scenario", path, code, body)
		}
	}
	if code, body := on.do("POST", "/v1/simulation/scenarios/steady/start", `{"seed":"x"}`, nil); code != 400 || !strings.Contains(errorOf(t, body), "seed") {
		t.Errorf("start with a bad seed = %d %s, want 400 naming seed", code, body)
	}
	if code, body := on.do("POST", "/v1/simulation/scenarios/steady/start", `{"seed":9}`, nil); code != 200 {
		t.Fatalf("start steady = %d %s", code, body)
	}
	// The fault device's first poll has a BAD reading; the runner shows
	// it in the device's last values.
	eventually(t, 10*time.Second, "a BAD reading of sim-fault-1", func() bool {
		_, body := on.do("GET", "/v1/adapters/simulated/devices/sim-fault-1", "", nil)
		return strings.Contains(body, `"quality":"BAD"`)
	})
	if _, readings, _ := on.simStatus(t).running("fault"); readings < 2 {
		t.Errorf("fault produced %d readings", readings)
	}
	code, body = on.do("GET", "/v1/devices?protocol=simulated", "", nil)
	for _, name := range []string{"sim-fault-1", "sim-steady-1", "sim-steady-2"} {
		if code != 200 || !strings.Contains(body, `"`+name+`"`) {
			t.Errorf("GET /v1/devices?protocol=simulated = %d %s: no %s", code, body, name)
		}
	}

	// A soft reboot stops every endpoint; the running scenarios resume.
	if code, body := on.do("POST", "/v1/reboot", "", nil); code != 202 {
		t.Fatalf("reboot = %d %s", code, body)
	}
	eventually(t, 20*time.Second, "the scenarios' devices running again after the reboot", func() bool {
		st := on.simStatus(t)
		f, _, _ := st.running("fault")
		s, _, _ := st.running("steady")
		// The devices run before the api phase makes the agent RUNNING
		// again; the writes below need it.
		code, _ := on.do("GET", "/v1/readiness", "", nil)
		return f == 1 && s == 2 && code == 200
	})

	if code, body := on.do("POST", "/v1/simulation/scenarios/fault/stop", "", nil); code != 200 || !strings.Contains(body, `"running":false`) {
		t.Errorf("stop fault = %d %s", code, body)
	}
	if code, body := on.do("POST", "/v1/simulation/scenarios/fault/stop", "", nil); code != 409 {
		t.Errorf("stop fault again = %d %s, want 409", code, body)
	}
	code, body = on.do("POST", "/v1/simulation/stop-all", "", nil)
	if code != 200 || !strings.Contains(body, `"stopped":["steady"]`) {
		t.Errorf("stop-all = %d %s", code, body)
	}
	for _, sc := range on.simStatus(t).Scenarios {
		if sc.Running {
			t.Errorf("scenario %s still runs after stop-all", sc.Name)
		}
	}
	if code, body := on.do("GET", "/v1/devices?protocol=simulated", "", nil); code != 200 || strings.Contains(body, "sim-") {
		t.Errorf("devices after stop-all = %d %s", code, body)
	}
	// On, an endpoint of protocol simulated can be stored like any other.
	if code, body := on.do("POST", "/v1/endpoints", simulated, nil); code != 201 {
		t.Errorf("POST /v1/endpoints simulated with simulation on = %d %s", code, body)
	}
}
