package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/roles/agent/apps"
	"github.com/edgeplat/edgeplat/roles/agent/apps/appstest"
)

// TestAppsRoutesIntegration drives the apps routes of a real agent over
// HTTP against podman: bad input is refused naming the field and changes
// nothing; an app deploys, runs and streams its log; a new environment
// swaps its container; service and app actions, restart, a runtime
// outage and DELETE answer as docs/apps.md says.
func TestAppsRoutesIntegration(t *testing.T) {
	p := appstest.Podman(t)
	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.DockerHost = p.Host })
	agentID := r.agent.p.id.Load().UUID
	t.Cleanup(func() { p.CleanupAgent(agentID) })
	owned := func() []string {
		ids, _ := p.Run("ps", "-aq", "--filter", "label="+apps.LabelAgent+"="+agentID)
		return strings.Fields(ids)
	}
	state := func() control.AppsState {
		t.Helper()
		code, body := r.do("GET", "/v1/apps", "", nil)
		var st control.AppsState
		if code != http.StatusOK || json.Unmarshal([]byte(body), &st) != nil {
			t.Fatalf("GET /v1/apps: %d %s", code, body)
		}
		return st
	}
	svc := func(st control.AppsState) control.ServiceState {
		if len(st.Apps) != 1 || len(st.Apps[0].Services) != 1 {
			return control.ServiceState{}
		}
		return st.Apps[0].Services[0]
	}
	app := func(services string) string { return `{"appName":"ticker","services":[` + services + `]}` }
	ticker := `{"serviceName":"main","imageName":"` + appstest.TickerImage + `","config":{"environment":{"V":"1"}}}`

	// Bad input: 400 naming the field, nothing stored, nothing created.
	for _, tt := range []struct{ name, body, field string }{
		{"bad port", app(`{"serviceName":"main","imageName":"x","config":{"ports":["80"]}}`), "services[0].config.ports[0]: "},
		{"volume outside the roots", app(`{"serviceName":"main","imageName":"x","config":{"volumes":["/etc:/data"]}}`), "services[0].config.volumes[0]: host path /etc is outside the allowed roots"},
		{"duplicate service", app(ticker + "," + ticker), "services[1].serviceName: "},
	} {
		code, body := r.do("POST", "/v1/apps", tt.body, nil)
		if code != http.StatusBadRequest || !strings.Contains(body, tt.field) {
			t.Errorf("%s: %d %s, want 400 naming %q", tt.name, code, body, tt.field)
		}
	}
	if st := state(); len(st.Apps) != 0 || len(owned()) != 0 {
		t.Fatalf("bad input changed something: %+v, containers %v", st.Apps, owned())
	}

	// Deploy: 201, running, and the log stream delivers its lines.
	code, body := r.do("POST", "/v1/apps", app(ticker), nil)
	if code != http.StatusCreated || !strings.Contains(body, `"appId":1`) || !strings.Contains(body, `"appName":"ticker"`) {
		t.Fatalf("deploy: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "the service running", func() bool { return svc(state()).State == "running" })
	first := svc(state()).ContainerID
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", r.base+"/v1/apps/1/services/main/logs?follow=true&tail=5", nil)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("log stream: %d %v", resp.StatusCode, resp.Header)
	}
	ticks := 0
	for sc := bufio.NewScanner(resp.Body); sc.Scan() && ticks < 2; {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var line struct{ Msg, Stream string }
		if err := json.Unmarshal([]byte(data), &line); err != nil {
			t.Fatalf("log event %q: %v", data, err)
		}
		if strings.Contains(line.Msg, "tick") && line.Stream == "stdout" {
			ticks++
		}
	}
	resp.Body.Close()
	cancel()
	if ticks < 2 {
		t.Fatalf("the log stream delivered %d tick lines", ticks)
	}

	// A second app may not take a host port the first one maps.
	code, body = r.do("PUT", "/v1/apps/1/services/main", `{"imageName":"`+appstest.TickerImage+`","config":{"ports":["18089:80"]}}`, nil)
	if code != http.StatusOK {
		t.Fatalf("PUT a port: %d %s", code, body)
	}
	other := `{"appName":"other","services":[{"serviceName":"web","imageName":"` + appstest.TickerImage + `","config":{"ports":["18089:81"]}}]}`
	if code, body := r.do("POST", "/v1/apps", other, nil); code != http.StatusBadRequest || !strings.Contains(body, "services[0].config.ports[0]: host port 18089/tcp is taken already") {
		t.Fatalf("second app on a taken host port: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "the port applied", func() bool {
		s := svc(state())
		return s.State == "running" && len(s.Config.Ports) == 1 && len(owned()) == 1
	})
	first = svc(state()).ContainerID

	// A new environment: a new container in place of the old, one only.
	code, body = r.do("PUT", "/v1/apps/1/services/main", `{"imageName":"`+appstest.TickerImage+`","config":{"environment":{"V":"2"}}}`, nil)
	if code != http.StatusOK {
		t.Fatalf("PUT service: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "the swapped container", func() bool {
		s := svc(state())
		return s.State == "running" && s.ContainerID != first && s.Config.Environment["V"] == "2" && len(owned()) == 1
	})

	// Service and app actions.
	for _, tt := range []struct{ path, want, state string }{
		{"/v1/apps/1/services/main/stop", `"action":"stop"`, "exited"},
		{"/v1/apps/1/services/main/start", `"action":"start"`, "running"},
		{"/v1/apps/1/stop", `"status":"stopped"`, "exited"},
		{"/v1/apps/1/start", `"status":"started"`, "running"},
	} {
		code, body := r.do("POST", tt.path, "", nil)
		if code != http.StatusOK || !strings.Contains(body, tt.want) {
			t.Fatalf("POST %s: %d %s", tt.path, code, body)
		}
		eventually(t, 30*time.Second, tt.path, func() bool {
			s := svc(state()).State
			return s == tt.state || (tt.state == "exited" && s == "stopped")
		})
	}
	if code, body := r.do("POST", "/v1/restart", `{"appId":1}`, nil); code != http.StatusOK || strings.TrimSpace(body) != "OK" {
		t.Fatalf("restart: %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/apps/1/services/main/pause", "", nil); code != http.StatusBadRequest {
		t.Fatalf("unknown action: %d %s", code, body)
	}

	// A runtime outage is an answer, not an error; it converges after.
	p.Stop()
	eventually(t, 30*time.Second, "the runtime reported unreachable", func() bool {
		st := state()
		return st.Runtime.Status == "unreachable" && st.Runtime.Error != ""
	})
	if code, _ := r.do("POST", "/v1/apps/1/services/main/restart", "", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("action with the runtime down: %d, want 503", code)
	}
	p.Start()
	eventually(t, 60*time.Second, "the runtime back and the app running", func() bool {
		st := state()
		return st.Runtime.Status == "connected" && svc(st).State == "running" && len(owned()) == 1
	})

	// DELETE removes the container.
	if code, body := r.do("DELETE", "/v1/apps/1", "", nil); code != http.StatusNoContent {
		t.Fatalf("delete: %d %s", code, body)
	}
	eventually(t, 30*time.Second, "the container removed", func() bool { return len(owned()) == 0 && len(state().Apps) == 0 })
	if code, _ := r.do("GET", "/v1/apps/1", "", nil); code != http.StatusNotFound {
		t.Fatalf("GET a deleted app: %d", code)
	}
}
