package cmd

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// appNameLabel is the label the agent's reconciler puts the app's name in
// (docs/apps.md); the tests' app names are unique, so they find and
// remove their own containers by it and never touch anyone else's.
const appNameLabel = "io.edgeplat.app-name"

// uniqueAppName is name with a suffix no other test run uses: podman's
// storage is the machine's.
func uniqueAppName(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
}

// useRuntime points the agent at agentURL to the podman service through
// its local API and checks it answers.
func useRuntime(t *testing.T, agentURL string, pm *coretest.PodmanEngine) {
	t.Helper()
	cfg := fmt.Sprintf(`{"type":"socket","socketPath":%q}`, pm.Socket)
	if code, body := jsonDo(t, http.MethodPost, agentURL+"/v1/docker/test", "", cfg); code != http.StatusOK || body["version"] == nil {
		t.Fatalf("POST /v1/docker/test: %d %v", code, body)
	}
	if code, body := jsonDo(t, http.MethodPost, agentURL+"/v1/docker/config", "", cfg); code != http.StatusOK {
		t.Fatalf("POST /v1/docker/config: %d %v", code, body)
	}
}

// runningContainer waits until exactly one container of app runs and
// returns it.
func runningContainer(t *testing.T, pm *coretest.PodmanEngine, app string, within time.Duration) coretest.PodmanContainer {
	t.Helper()
	var cs []coretest.PodmanContainer
	coretest.Eventually(t, within, "a running container of app "+app, func() bool {
		var err error
		cs, err = pm.ContainersLabelled(appNameLabel, app)
		return err == nil && len(cs) == 1 && cs[0].State == "running"
	})
	return cs[0]
}

// agentApps is the agent's GET /v1/apps.
func agentApps(t *testing.T, agentURL string) control.AppsState {
	t.Helper()
	code, body, err := get(agentURL + "/v1/apps")
	if err != nil || code != http.StatusOK {
		t.Fatalf("GET /v1/apps: %d %s %v", code, body, err)
	}
	var st control.AppsState
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("GET /v1/apps %s: %v", body, err)
	}
	return st
}

// serviceOf finds a service in an apps state; nil when absent.
func serviceOf(st control.AppsState, app, service string) *control.ServiceState {
	for _, a := range st.Apps {
		if a.AppName != app {
			continue
		}
		for i := range a.Services {
			if a.Services[i].ServiceName == service {
				return &a.Services[i]
			}
		}
	}
	return nil
}

// cloudApps is the apps section of the agent's current state in the
// cloud; ok is false until the agent has reported one.
func (c cloudSide) cloudApps(t *testing.T) (control.AppsState, bool) {
	t.Helper()
	code, body, err := getWithToken(c.apiURL+"/agents/"+c.agent+"/current-state", c.access)
	if err != nil || code != http.StatusOK {
		return control.AppsState{}, false
	}
	var cur struct {
		State struct {
			Apps *control.AppsState `json:"apps"`
		} `json:"state"`
	}
	if err := json.Unmarshal([]byte(body), &cur); err != nil {
		t.Fatalf("current-state %s: %v", body, err)
	}
	if cur.State.Apps == nil {
		return control.AppsState{}, false
	}
	return *cur.State.Apps, true
}

func appDoc(id int, name, image string) string {
	return fmt.Sprintf(`{"appId":%d,"appName":%q,"services":[{"serviceName":"main","imageName":%q}]}`, id, name, image)
}

// TestAppFromCloudIntegration: on all-in-one, an app put in the agent's
// target state runs on the agent within seconds (the notice path: the
// poll is an hour away), the cloud's current state shows it running, a
// restart-app job restarts its container in place, and an app of a
// fleet's template reaches the agent once it joins the fleet, next to
// its own.
func TestAppFromCloudIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs all-in-one and podman")
	}
	pm := coretest.Podman(t)
	clearEnv(t)
	p := freeAIOPorts(t)
	runAllInOne(t, p, filepath.Join(t.TempDir(), "data"))
	c := provisionAgent(t, p.api, fmt.Sprintf("http://127.0.0.1:%d", p.agent))
	web, tmpl := uniqueAppName("web"), uniqueAppName("tmpl")
	pm.CleanupLabelled(appNameLabel, web)
	pm.CleanupLabelled(appNameLabel, tmpl)
	useRuntime(t, c.agentURL, pm)
	c.setStatePoll(t, 3600000)
	c.waitPlatformConnected(t)

	start := time.Now()
	c.changeTargetState(t, http.MethodPut, `{"state":{"schemaVersion":1,"apps":[`+appDoc(1, web, coretest.PodmanTicker)+`]}}`)
	// The target is 5 s; the budget is wide for loaded CI machines and
	// the time it took is logged.
	ctr := runningContainer(t, pm, web, 30*time.Second)
	t.Logf("app %s running %v after the target-state PUT started", web, time.Since(start).Round(time.Millisecond))
	if ctr.Image != coretest.PodmanTicker || ctr.Labels[coretest.PodmanAgentLabel] == "" {
		t.Errorf("container %+v: want image %s and the agent label", ctr, coretest.PodmanTicker)
	}
	coretest.Eventually(t, 20*time.Second, "ticks in the container's log", func() bool {
		out, _ := pm.Logs(ctr.ID)
		return strings.Contains(out, "tick 2")
	})

	// Local writes to apps the cloud manages are refused.
	if code, body := jsonDo(t, http.MethodPost, c.agentURL+"/v1/apps", "", `{"appName":"local","services":[{"serviceName":"s","imageName":"localhost/busybox:test"}]}`); code != http.StatusConflict {
		t.Errorf("local POST /v1/apps under a managing cloud: %d %v, want 409", code, body)
	}

	coretest.Eventually(t, 30*time.Second, "the cloud's current state to show the app running", func() bool {
		st, ok := c.cloudApps(t)
		s := serviceOf(st, web, "main")
		return ok && st.Runtime.Status == "connected" && s != nil && s.State == "running" && s.ContainerID == ctr.ID
	})

	// restart-app restarts the same container.
	before, err := pm.Inspect(ctr.ID)
	if err != nil {
		t.Fatal(err)
	}
	job := postJSON(t, c.apiURL+"/agents/"+c.agent+"/jobs", c.access, `{"handler":"restart-app","params":{"appId":1}}`, http.StatusCreated)
	jobID, _ := job["jobId"].(string)
	coretest.Eventually(t, 30*time.Second, "the restart-app job to succeed", func() bool {
		code, body, err := getWithToken(c.apiURL+"/jobs/executions/"+jobID, c.access)
		if err != nil || code != http.StatusOK {
			return false
		}
		if strings.Contains(body, `"status":"failed"`) {
			t.Fatalf("restart-app failed: %s", body)
		}
		return strings.Contains(body, `"status":"succeeded"`)
	})
	after, err := pm.Inspect(ctr.ID)
	if err != nil {
		t.Fatalf("the container after restart-app: %v", err)
	}
	if !after.State.Running || after.State.StartedAt == before.State.StartedAt {
		t.Errorf("restart-app: container running %v, started %s (before %s): want it started again", after.State.Running, after.State.StartedAt, before.State.StartedAt)
	}

	// A fleet's template app reaches the agent when it joins; its own
	// app stays as it is.
	f := postJSON(t, c.apiURL+"/fleets", c.access, `{"name":"apps","template":{"schemaVersion":1,"apps":[`+appDoc(2, tmpl, coretest.PodmanTicker)+`]}}`, http.StatusCreated)
	fleetID, _ := f["id"].(string)
	postJSON(t, c.apiURL+"/fleets/"+fleetID+"/agents", c.access, fmt.Sprintf(`{"agentUuid":%q}`, c.agent), http.StatusOK)
	start = time.Now()
	runningContainer(t, pm, tmpl, 30*time.Second)
	t.Logf("the template's app %s running %v after the agent joined the fleet", tmpl, time.Since(start).Round(time.Millisecond))
	if cs, err := pm.ContainersLabelled(appNameLabel, web); err != nil || len(cs) != 1 || cs[0].ID != ctr.ID || cs[0].State != "running" {
		t.Errorf("the agent's own app after the fleet's arrived: %+v, %v; want %s still running", cs, err, ctr.ID)
	}
}

// TestAppAdoptedAfterAgentKillIntegration: the edgeplat agent binary runs
// a standalone app; SIGKILL and a restart of the binary leave the
// container as it was: the agent adopts it (same id, not restarted, no
// second container) and reports it running.
func TestAppAdoptedAfterAgentKillIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: builds the binary and runs podman")
	}
	pm := coretest.Podman(t)
	clearEnv(t)
	agent, url, ready := startAgentBinary(t)
	app := uniqueAppName("adopt")
	pm.CleanupLabelled(appNameLabel, app)
	useRuntime(t, url, pm)
	created := postJSON(t, url+"/v1/apps", "", fmt.Sprintf(`{"appName":%q,"services":[{"serviceName":"main","imageName":%q}]}`, app, coretest.PodmanTicker), http.StatusCreated)
	if created["appId"] == nil {
		t.Fatalf("POST /v1/apps answered %v", created)
	}
	ctr := runningContainer(t, pm, app, 30*time.Second)
	before, err := pm.Inspect(ctr.ID)
	if err != nil {
		t.Fatal(err)
	}

	agent.kill()
	agent.start()
	ready()
	coretest.Eventually(t, 30*time.Second, "the agent to report the adopted container running", func() bool {
		s := serviceOf(agentApps(t, url), app, "main")
		return s != nil && s.State == "running" && s.ContainerID == ctr.ID
	})
	cs, err := pm.ContainersLabelled(appNameLabel, app)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != ctr.ID {
		t.Fatalf("containers of %s after the restart: %+v, want only %s", app, cs, ctr.ID)
	}
	after, err := pm.Inspect(ctr.ID)
	if err != nil {
		t.Fatal(err)
	}
	if after.State.StartedAt != before.State.StartedAt || after.RestartCount != before.RestartCount || !after.State.Running {
		t.Errorf("the adopted container changed: started %s (before %s), restarts %d (before %d), running %v",
			after.State.StartedAt, before.State.StartedAt, after.RestartCount, before.RestartCount, after.State.Running)
	}
}
