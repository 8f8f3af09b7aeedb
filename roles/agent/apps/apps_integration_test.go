package apps

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/events"
	"github.com/moby/moby/client"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/apps/appstest"
)

// startManager runs a Manager for agent against p until the test ends;
// the agent's containers are removed then.
func startManager(t *testing.T, p *appstest.Service, agent string) (*Manager, context.CancelFunc) {
	t.Helper()
	m := New(Options{Resync: 2 * time.Second, Log: slog.New(slog.NewTextHandler(tlog{t}, nil))})
	m.Configure(agent, RuntimeConfig{Type: RuntimeSocket, SocketPath: p.Socket}, true)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = m.Run(ctx)
	}()
	stop := func() {
		cancel()
		<-done
	}
	t.Cleanup(stop)
	return m, stop
}

type tlog struct{ t *testing.T }

func (w tlog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

// cleanupAgent removes every container of agent at the end of the test.
func cleanupAgent(t *testing.T, p *appstest.Service, agent string) {
	t.Cleanup(func() {
		ids, _ := p.Run("ps", "-aq", "--filter", "label="+LabelAgent+"="+agent)
		for _, id := range strings.Fields(ids) {
			_, _ = p.Run("rm", "-f", "-t", "0", id)
		}
	})
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func service(m *Manager, appID int, name string) control.ServiceState {
	for _, a := range m.State(context.Background()).Apps {
		if a.AppID != appID {
			continue
		}
		for _, s := range a.Services {
			if s.ServiceName == name {
				return s
			}
		}
	}
	return control.ServiceState{}
}

func tickerApp(id int, name string, env map[string]string, ports ...string) control.TargetApp {
	return control.TargetApp{AppID: id, AppName: name, Services: []control.TargetService{{
		ServiceName: "main", ImageName: appstest.TickerImage, State: control.ServiceRunning,
		Config: control.ServiceConfig{Image: appstest.TickerImage, Environment: env, Ports: ports, Restart: "unless-stopped"},
	}}}
}

// watchSwap watches the runtime's events and, once called back, says
// when (by the runtime's clock) a container other than old started and
// when old died. Events, not polling: a swap can be quicker than a poll.
func watchSwap(t *testing.T, cli *client.Client, agent, old string) func() (newRunning, oldStopped time.Time) {
	var newRunning, oldStopped time.Time
	ctx, cancel := context.WithCancel(context.Background())
	ev := cli.Events(ctx, client.EventsListOptions{Filters: client.Filters{}.Add("type", "container").Add("label", LabelAgent+"="+agent)})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-ev.Err:
				return
			case msg := <-ev.Messages:
				at := time.Unix(0, msg.TimeNano)
				switch {
				case msg.Action == events.ActionStart && msg.Actor.ID != old && newRunning.IsZero():
					newRunning = at
				case (msg.Action == events.ActionDie || msg.Action == events.ActionStop) && msg.Actor.ID == old && oldStopped.IsZero():
					oldStopped = at
				}
			}
		}
	})
	return func() (time.Time, time.Time) {
		// The events of the last steps may still be on their way.
		time.Sleep(500 * time.Millisecond)
		cancel()
		wg.Wait()
		if newRunning.IsZero() || oldStopped.IsZero() {
			t.Fatalf("swap not seen: new started at %v, old died at %v", newRunning, oldStopped)
		}
		return newRunning, oldStopped
	}
}

// owned lists the agent's containers straight from the runtime.
func listOwned(t *testing.T, cli *client.Client, agent string) []container.Summary {
	t.Helper()
	res, err := cli.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", LabelAgent+"="+agent)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Items
}

func TestAppLifecycleIntegration(t *testing.T) {
	p := appstest.Podman(t)
	agent := "test-" + codec.NewUUID().String()
	cleanupAgent(t, p, agent)
	cli := p.Client()
	ctx := context.Background()

	// A container the agent did not create must stay as it is.
	foreign := "foreign-" + agent[:13]
	if out, err := p.Run("run", "-d", "--name", foreign, appstest.TickerImage); err != nil {
		t.Fatalf("run foreign container: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = p.Run("rm", "-f", "-t", "0", foreign) })
	foreignID, _ := p.Run("inspect", "-f", "{{.Id}}", foreign)

	m, _ := startManager(t, p, agent)
	app := "life-" + agent[5:13]
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "1"})}, false)
	waitFor(t, "the service to run", 30*time.Second, func() bool { return service(m, 1, "main").State == "running" })
	first := service(m, 1, "main")
	t.Logf("deployed: container %.12s, status %q", first.ContainerID, first.Status)

	// Logs: the ticker's lines, followed.
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	var lines []LogLine
	err := m.Logs(lctx, 1, "main", LogOptions{Tail: 10, Follow: true}, func(l LogLine) error {
		lines = append(lines, l)
		if len(lines) == 3 {
			lcancel()
		}
		return nil
	})
	lcancel()
	if err != nil || len(lines) < 3 || !strings.HasPrefix(lines[2].Msg, "tick ") || lines[2].Stream != "stdout" {
		t.Fatalf("logs = %+v, %v; want 3 tick lines on stdout", lines, err)
	}

	// Change of environment: blue-green, the new one runs first.
	sw := watchSwap(t, cli, agent, first.ContainerID)
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "2"})}, false)
	waitFor(t, "the new container", 30*time.Second, func() bool {
		s := service(m, 1, "main")
		return s.State == "running" && s.ContainerID != first.ContainerID && len(listOwned(t, cli, agent)) == 1
	})
	newRunning, oldStopped := sw()
	if !newRunning.Before(oldStopped) {
		t.Fatalf("blue-green: new running at %v, old stopped at %v; want the new one first", newRunning, oldStopped)
	}
	t.Logf("blue-green: the new container ran %v before the old one stopped", oldStopped.Sub(newRunning).Round(time.Millisecond))

	// Run state stopped stops the service; running brings it back.
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "2"})}, true)
	waitFor(t, "the run state's stop", 30*time.Second, func() bool { return service(m, 1, "main").State == StateStopped })
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "2"})}, false)
	waitFor(t, "the run state's run", 30*time.Second, func() bool { return service(m, 1, "main").State == "running" })

	// Stop, start, restart.
	second := service(m, 1, "main").ContainerID
	if st, err := m.Act(ctx, 1, "main", ActionStop, false); err != nil || st.Services[0].State != StateStopped {
		t.Fatalf("stop: %+v, %v", st, err)
	}
	if st, err := m.Act(ctx, 1, "main", ActionStart, false); err != nil || st.Services[0].State != "running" || st.Services[0].ContainerID != second {
		t.Fatalf("start: %+v, %v", st, err)
	}
	if st, err := m.Act(ctx, 1, "main", ActionRestart, false); err != nil || st.Services[0].State != "running" {
		t.Fatalf("restart: %+v, %v", st, err)
	}
	if _, err := m.Act(ctx, 9, "main", ActionStart, false); err == nil {
		t.Fatal("act on an unknown app: no error")
	}

	// Delete: the container goes.
	m.SetTarget(nil, false)
	waitFor(t, "the container to go", 30*time.Second, func() bool { return len(listOwned(t, cli, agent)) == 0 })

	if id, _ := p.Run("inspect", "-f", "{{.Id}} {{.State.Running}}", foreign); id != foreignID+" true" {
		t.Fatalf("foreign container is now %q, want %q", id, foreignID+" true")
	}
}

func TestHostPortClashStopsFirstIntegration(t *testing.T) {
	p := appstest.Podman(t)
	agent := "test-" + codec.NewUUID().String()
	cleanupAgent(t, p, agent)
	cli := p.Client()
	m, _ := startManager(t, p, agent)
	port := coretest.FreePort(t)
	app := "clash-" + agent[5:13]
	ports := fmt.Sprintf("%d:8080", port)
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "1"}, ports)}, false)
	waitFor(t, "the service to run", 30*time.Second, func() bool { return service(m, 1, "main").State == "running" })
	first := service(m, 1, "main").ContainerID

	sw := watchSwap(t, cli, agent, first)
	m.SetTarget([]control.TargetApp{tickerApp(1, app, map[string]string{"V": "2"}, ports)}, false)
	waitFor(t, "the new container", 30*time.Second, func() bool {
		s := service(m, 1, "main")
		return s.State == "running" && s.ContainerID != first && len(listOwned(t, cli, agent)) == 1
	})
	newRunning, oldStopped := sw()
	if newRunning.Before(oldStopped) {
		t.Fatalf("port clash: new running at %v before the old one stopped at %v", newRunning, oldStopped)
	}
	t.Logf("port clash: stop-then-start, a gap of %v", newRunning.Sub(oldStopped).Round(time.Millisecond))
	if s := service(m, 1, "main"); s.Error != "" {
		t.Fatalf("service error after the swap: %s", s.Error)
	}
}

func TestAdoptionIntegration(t *testing.T) {
	p := appstest.Podman(t)
	agent := "test-" + codec.NewUUID().String()
	cleanupAgent(t, p, agent)
	cli := p.Client()
	target := []control.TargetApp{tickerApp(3, "adopt-"+agent[5:13], nil)}
	m, stop := startManager(t, p, agent)
	m.SetTarget(target, false)
	waitFor(t, "the service to run", 30*time.Second, func() bool { return service(m, 3, "main").State == "running" })
	before := listOwned(t, cli, agent)
	stop()

	// A new Manager, as after a restart of the agent.
	m2, _ := startManager(t, p, agent)
	m2.SetTarget(target, false)
	waitFor(t, "the runtime", 10*time.Second, func() bool { return m2.RuntimeState().Status == StatusConnected })
	waitFor(t, "the adopted service", 10*time.Second, func() bool { return service(m2, 3, "main").State == "running" })
	// A resync pass has run by then: nothing was changed.
	time.Sleep(2500 * time.Millisecond)
	after := listOwned(t, cli, agent)
	if len(before) != 1 || len(after) != 1 || after[0].ID != before[0].ID || after[0].Created != before[0].Created {
		t.Fatalf("containers before %v, after %v; want the same one", ids(before), ids(after))
	}
	t.Logf("adopted container %.12s: same id, no duplicate", after[0].ID)
}

func ids(cs []container.Summary) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.ID[:12] + " " + string(c.State)
	}
	return out
}

func TestBadPullRetriesWithBackoffIntegration(t *testing.T) {
	p := appstest.Podman(t)
	agent := "test-" + codec.NewUUID().String()
	cleanupAgent(t, p, agent)
	m, _ := startManager(t, p, agent)
	app := tickerApp(4, "bad-"+agent[5:13], nil)
	app.Services[0].ImageName, app.Services[0].Config.Image = "registry.invalid/none:1", "registry.invalid/none:1"
	m.SetTarget([]control.TargetApp{app}, false)
	var seen []control.ServiceState
	waitFor(t, "three failed attempts", 30*time.Second, func() bool {
		s := service(m, 4, "main")
		if s.Retries > 0 && (len(seen) == 0 || seen[len(seen)-1].Retries != s.Retries) {
			seen = append(seen, s)
		}
		return s.Retries >= 3
	})
	last := seen[len(seen)-1]
	if !strings.Contains(last.Error, "registry.invalid/none:1") || last.State != StateMissing {
		t.Fatalf("service = %+v, want a pull error naming the image", last)
	}
	// Back-off: each retry is due later after its failure than the one
	// before (1 s, 2 s, 4 s ...).
	for i := 1; i < len(seen); i++ {
		if seen[i].NextRetry <= seen[i-1].NextRetry {
			t.Fatalf("nextRetry did not move on: %+v", seen)
		}
	}
	t.Logf("bad pull: %d retries, error %q", last.Retries, last.Error)
}

func TestRuntimeOutageIntegration(t *testing.T) {
	p := appstest.Podman(t)
	agent := "test-" + codec.NewUUID().String()
	cleanupAgent(t, p, agent)
	m, _ := startManager(t, p, agent)
	m.SetTarget([]control.TargetApp{tickerApp(5, "out-"+agent[5:13], nil)}, false)
	waitFor(t, "the service to run", 30*time.Second, func() bool { return service(m, 5, "main").State == "running" })

	p.Stop()
	waitFor(t, "the runtime to be unreachable", 20*time.Second, func() bool { return m.RuntimeState().Status == StatusUnreachable })
	st := m.State(context.Background())
	if st.Runtime.Error == "" || st.Apps[0].Services[0].State != StateUnknown {
		t.Fatalf("state while down: %+v", st)
	}
	if _, err := m.Act(context.Background(), 5, "main", ActionStop, false); err == nil || !strings.Contains(err.Error(), ErrRuntimeDown.Error()) {
		t.Fatalf("act while down: %v, want ErrRuntimeDown", err)
	}
	t.Logf("down: %s", st.Runtime.Error)

	// Changed while down: converges once the runtime is back.
	m.SetTarget([]control.TargetApp{tickerApp(5, "out-"+agent[5:13], map[string]string{"V": "2"})}, false)
	p.Start()
	waitFor(t, "convergence after the outage", 60*time.Second, func() bool {
		s := service(m, 5, "main")
		return m.RuntimeState().Status == StatusConnected && s.State == "running" && s.Config.Environment["V"] == "2" && len(listOwned(t, p.Client(), agent)) == 1
	})
}
