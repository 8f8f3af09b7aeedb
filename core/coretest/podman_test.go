package coretest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestPodmanIntegration: the service answers, its images run, two
// services share the machine's storage, an outage keeps containers
// running, and the cleanup removes one agent's containers only.
func TestPodmanIntegration(t *testing.T) {
	e := Podman(t)
	v, err := e.Version()
	if err != nil {
		t.Fatal(err)
	}
	if v.APIVersion != strings.TrimPrefix(PodmanAPIVersion, "v") {
		t.Errorf("API version %q, want %s", v.APIVersion, PodmanAPIVersion)
	}
	for _, img := range e.Images {
		var info struct {
			Config struct{ Labels map[string]string }
		}
		if err := e.get("/"+PodmanAPIVersion+"/images/"+img+"/json", &info); err != nil {
			t.Fatalf("image %s: %v", img, err)
		}
		if got := info.Config.Labels[podmanImageLabel]; got != podmanImageRev {
			t.Errorf("image %s label %s = %q, want %s", img, podmanImageLabel, got, podmanImageRev)
		}
	}

	mine := fmt.Sprintf("coretest-%d", time.Now().UnixNano())
	other := mine + "-other"
	e.CleanupAgent(mine)
	e.CleanupAgent(other)
	id := e.run(t, mine, PodmanTicker, nil)
	otherID := e.run(t, other, PodmanBusybox, []string{"sleep", "600"})

	Eventually(t, 20*time.Second, "tick 2 in the ticker's logs", func() bool {
		out, _ := e.Logs(id)
		return strings.Contains(out, "tick 1\ntick 2\n")
	})

	// A second service over the same storage sees the first one's container.
	e2 := Podman(t)
	cs, err := e2.Containers(mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != id || cs[0].State != "running" || cs[0].Labels[PodmanAgentLabel] != mine {
		t.Fatalf("containers of %s seen by a second service = %+v, want only %s running", mine, cs, id)
	}

	in, err := e.Inspect(id)
	if err != nil || !in.State.Running || in.State.StartedAt == "" || in.Config.Labels[PodmanAgentLabel] != mine {
		t.Fatalf("inspect %s = %+v, %v", id, in, err)
	}
	if cs, err := e.ContainersLabelled(PodmanAgentLabel, other); err != nil || len(cs) != 1 || cs[0].ID != otherID {
		t.Fatalf("containers labelled %s = %+v, %v", other, cs, err)
	}

	e.Stop()
	if err := e.Ping(); err == nil {
		t.Fatal("service still answers after Stop")
	}
	e.Start()
	cs, err = e.Containers(mine)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].State != "running" {
		t.Fatalf("after an outage, containers = %+v, want %s still running", cs, id)
	}

	if err := e.RemoveAgent(mine); err != nil {
		t.Fatal(err)
	}
	if cs, err := e.Containers(mine); err != nil || len(cs) != 0 {
		t.Fatalf("after RemoveAgent, containers of %s = %+v, %v; want none", mine, cs, err)
	}
	cs, err = e.Containers(other)
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != otherID {
		t.Fatalf("RemoveAgent(%s) touched another agent's container: %+v", mine, cs)
	}
	if err := e.RemoveAgent(""); err == nil {
		t.Error("RemoveAgent of an empty UUID succeeded; it must refuse to match every agent")
	}
}

// run creates and starts a container labelled with agent, as the
// reconciler does, over the Docker API.
func (e *PodmanEngine) run(t *testing.T, agent, image string, cmd []string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"Image":      image,
		"Cmd":        cmd,
		"Labels":     map[string]string{PodmanAgentLabel: agent},
		"HostConfig": map[string]any{"Init": true},
	})
	var created struct{ Id string }
	if err := e.post("/"+PodmanAPIVersion+"/containers/create", body, http.StatusCreated, &created); err != nil {
		t.Fatal(err)
	}
	if err := e.post("/"+PodmanAPIVersion+"/containers/"+created.Id+"/start", nil, http.StatusNoContent, nil); err != nil {
		t.Fatal(err)
	}
	return created.Id
}

func (e *PodmanEngine) post(path string, body []byte, want int, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://d"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		return fmt.Errorf("post %s: %s: %s", path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}
