package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/apps"
	"github.com/edgeplat/edgeplat/roles/agent/apps/appstest"
	"github.com/edgeplat/edgeplat/roles/agent/httpapi"
)

func volumeApp(name, volume string) control.TargetApp {
	return control.TargetApp{AppName: name, Services: []control.TargetService{{ServiceName: "main", ImageName: appstest.TickerImage,
		Config: control.ServiceConfig{Volumes: []string{volume}}}}}
}

// TestAppsVolumeRootsSetting: agent.apps_volume_roots decides which host
// paths an app may mount, for local writes (400 naming the field) and
// for the cloud's documents (refused as a whole).
func TestAppsVolumeRootsSetting(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	r := startAgent(t, dir, true, func(a *config.Agent) {
		a.AppsVolumeRoots = "/srv/edge, /opt/data"
		a.DockerHost = "unix://" + filepath.Join(dir, "none.sock")
	})
	a := r.agent.p.apps
	if _, err := a.CreateApp(ctx, volumeApp("ok", "/srv/edge/app:/data")); err != nil {
		t.Fatalf("host path under a root: %v", err)
	}
	_, err := a.CreateApp(ctx, volumeApp("bad", "/etc:/data"))
	var he *httpapi.Error
	if !errors.As(err, &he) || he.Status != http.StatusBadRequest ||
		!strings.Contains(he.Message, "services[0].config.volumes[0]: host path /etc is outside the allowed roots /srv/edge, /opt/data") {
		t.Fatalf("host path outside: %v", err)
	}
	// The default root is <data dir>/volumes.
	r.stop()
	r = startAgent(t, dir, true, func(a *config.Agent) { a.DockerHost = "unix://" + filepath.Join(dir, "none.sock") })
	a = r.agent.p.apps
	if _, err := a.CreateApp(ctx, volumeApp("default", filepath.Join(dir, "volumes", "x")+":/x")); err != nil {
		t.Fatalf("host path under the default root: %v", err)
	}
	if _, err := a.CreateApp(ctx, volumeApp("old", "/srv/edge/app:/data")); err == nil {
		t.Fatal("a root of the earlier setting is still allowed")
	}
	doc := `{"schemaVersion":1,"apps":[{"appId":7,"appName":"cloud","services":[{"serviceName":"s","imageName":"x:1","config":{"volumes":["/etc:/etc"]}}]}]}`
	err = r.agent.p.cloud.target.Apply(ctx, r.agent.p.st.Load(), 3, json.RawMessage(doc), false)
	if err == nil || !strings.Contains(err.Error(), "apps[0].services[0].config.volumes[0]: host path /etc is outside") {
		t.Fatalf("cloud document: %v", err)
	}
	if st := r.agent.p.cloud.target.TargetStatus(); st.Refused != 3 {
		t.Fatalf("target status %+v, want version 3 refused", st)
	}
}

// TestDockerHostSetting: agent.docker_host is the runtime the agent uses
// until one is saved.
func TestDockerHostSetting(t *testing.T) {
	p := appstest.Podman(t)
	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.DockerHost = "unix://" + p.Socket })
	cfg, err := r.agent.p.apps.RuntimeConfig(context.Background())
	if err != nil || cfg.Type != "socket" || cfg.SocketPath != p.Socket {
		t.Fatalf("runtime config %+v, %v", cfg, err)
	}
	eventually(t, 10*time.Second, "the runtime connection", func() bool {
		return r.agent.p.apps.mgr.RuntimeState().Status == apps.StatusConnected
	})
}

// TestAgentAppsIntegration runs an app through the agent: the device
// count, the state report, the health report, the cloud's management
// (409 for local writes) and a runtime outage during which an endpoint
// keeps polling.
func TestAgentAppsIntegration(t *testing.T) {
	p := appstest.Podman(t)
	ctx := context.Background()
	r := startAgent(t, t.TempDir(), true, func(a *config.Agent) { a.DockerHost = "unix://" + p.Socket })
	agentID := r.agent.p.id.Load().UUID
	t.Cleanup(func() {
		ids, _ := p.Run("ps", "-aq", "--filter", "label="+apps.LabelAgent+"="+agentID)
		for _, id := range strings.Fields(ids) {
			_, _ = p.Run("rm", "-f", "-t", "0", id)
		}
	})
	a := r.agent.p.apps
	app, err := a.CreateApp(ctx, control.TargetApp{AppName: "ticker", Services: []control.TargetService{{ServiceName: "main", ImageName: appstest.TickerImage}}})
	if err != nil || app.AppID != 1 {
		t.Fatalf("create: %+v, %v", app, err)
	}
	running := func() bool {
		st, _ := a.State(ctx)
		return len(st.Apps) == 1 && st.Apps[0].Services[0].State == "running"
	}
	eventually(t, 30*time.Second, "the app to run", running)
	if code, body := r.do("GET", "/v1/device", "", nil); code != 200 || !strings.Contains(body, `"apps":1`) {
		t.Fatalf("device: %d %s", code, body)
	}
	rep, err := stateSource{p: r.agent.p, buffer: nil}.appsOnly(ctx)
	if err != nil || rep == nil || rep.Runtime.Status != apps.StatusConnected || rep.Apps[0].Services[0].ContainerID == "" {
		t.Fatalf("state report apps: %+v, %v", rep, err)
	}

	// A Modbus endpoint polls throughout.
	port := coretest.FreePort(t)
	startPymodbus(t, port)
	ep := fmt.Sprintf(`{"name":"plc","protocol":"modbus","poll_interval":100,"connection":{"host":"127.0.0.1","port":%d,"unitId":1},
		"data_points":[{"name":"r0","register":"holding:0","type":"uint16"}]}`, port)
	if code, body := r.do("POST", "/v1/endpoints", ep, nil); code != 201 {
		t.Fatalf("endpoint: %d %s", code, body)
	}
	polls := func() int {
		m, err := r.agent.p.endpoints.runner.DeviceMetrics("modbus", "plc")
		if err != nil {
			return 0
		}
		return int(m.Polls)
	}
	eventually(t, 15*time.Second, "polling", func() bool { return polls() > 0 })

	p.Stop()
	eventually(t, 20*time.Second, "the runtime to be unreachable", func() bool {
		return a.mgr.RuntimeState().Status == apps.StatusUnreachable
	})
	before := polls()
	eventually(t, 10*time.Second, "polling while the runtime is down", func() bool { return polls() >= before+5 })
	code, body := r.do("GET", "/v1/health/report", "", nil)
	if code != 200 || !strings.Contains(body, `"name":"apps-runtime","healthy":true,"degraded":true`) {
		t.Fatalf("health while the runtime is down: %d %s", code, body)
	}
	if _, err := a.Act(ctx, 1, "main", httpapi.ActionRestart, false); !errors.Is(err, httpapi.ErrRuntimeDown) {
		t.Fatalf("restart while down: %v, want ErrRuntimeDown", err)
	}
	p.Start()
	eventually(t, 60*time.Second, "convergence once the runtime is back", func() bool {
		return a.mgr.RuntimeState().Status == apps.StatusConnected && running()
	})

	// Provisioned with a document that has apps: the cloud's apps run,
	// local writes are refused, actions stay allowed.
	if err := r.agent.p.st.Load().SetMeta(ctx, metaProvisioned, "true"); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"schemaVersion":1,"apps":[{"appId":5,"appName":"cloud-ticker","services":[{"serviceName":"main","imageName":%q}]}]}`, appstest.TickerImage)
	if err := r.agent.p.cloud.target.Apply(ctx, r.agent.p.st.Load(), 4, json.RawMessage(doc), false); err != nil {
		t.Fatal(err)
	}
	_, err = a.CreateApp(ctx, control.TargetApp{AppName: "local", Services: []control.TargetService{{ServiceName: "m", ImageName: appstest.TickerImage}}})
	var he *httpapi.Error
	if !errors.As(err, &he) || he.Status != http.StatusConflict || !strings.Contains(he.Message, "version 4") {
		t.Fatalf("local write while managed: %v", err)
	}
	eventually(t, 30*time.Second, "the cloud's app to run and the local one to go", func() bool {
		st, _ := a.State(ctx)
		return len(st.Apps) == 1 && st.Apps[0].AppID == 5 && st.Apps[0].Services[0].State == "running"
	})
	if _, err := a.Act(ctx, 5, "main", httpapi.ActionStop, false); err != nil {
		t.Fatalf("stop a managed app's service: %v", err)
	}
}
