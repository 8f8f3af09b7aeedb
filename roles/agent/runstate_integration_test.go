package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/cloud"
)

// fakeCloud serves one agent's target state as the cloud's GET
// /api/v1/device/:uuid/state does: the version as ETag, 304 to an
// If-None-Match naming it.
type fakeCloud struct {
	mu      sync.Mutex
	version int64
	state   string
	srv     *httptest.Server
}

func startFakeCloud(t *testing.T) *fakeCloud {
	c := &fakeCloud{state: `{}`}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodGet || !strings.HasPrefix(req.URL.Path, "/api/v1/device/") || !strings.HasSuffix(req.URL.Path, "/state") {
			http.NotFound(w, req)
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		etag := `"` + strconv.FormatInt(c.version, 10) + `"`
		if req.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(cloud.TargetState{Version: c.version, State: json.RawMessage(c.state), UpdatedAt: "2026-11-29T10:00:00Z"})
	}))
	t.Cleanup(c.srv.Close)
	return c
}

// set makes the cloud serve state as version.
func (c *fakeCloud) set(version int64, state string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.version, c.state = version, state
}

// provisionTo marks the agent provisioned with credentials for c, as a
// finished POST /v1/provision leaves it.
func (r *running) provisionTo(c *fakeCloud) {
	r.t.Helper()
	st := r.agent.p.st.Load()
	creds, _ := json.Marshal(cloud.Credentials{APIEndpoint: c.srv.URL, AgentUUID: r.agent.p.id.Load().UUID, APIKey: "device-key"})
	for k, v := range map[string]string{metaCredentials: string(creds), metaProvisioned: "true"} {
		if err := st.SetMeta(context.Background(), k, v); err != nil {
			r.t.Fatal(err)
		}
	}
}

// pull asks the agent to pull its target state now.
func (r *running) pull() {
	r.t.Helper()
	if code, body := r.do("POST", "/v1/sync/pull", "", nil); code != 200 {
		r.t.Fatalf("pull: %d %s", code, body)
	}
	if st := r.agent.p.cloud.target.TargetStatus(); st.Error != "" {
		r.t.Fatalf("target state: %+v", st)
	}
}

// polls counts the polls of every endpoint since the agent started.
func polls(t *testing.T, g prometheus.Gatherer) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "edgeplat_agent_polls_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

type endpointListed struct {
	UUID    string `json:"uuid"`
	Name    string `json:"name"`
	Enabled bool   `json:"enabled"`
	Health  *struct {
		Status string `json:"status"`
		State  string `json:"state"`
		Reason string `json:"reason"`
	} `json:"health"`
}

// endpoints lists the endpoints by name, and the raw definitions
// without health.
func (r *running) endpoints() (map[string]endpointListed, map[string]string) {
	r.t.Helper()
	code, body := r.do("GET", "/v1/endpoints", "", nil)
	if code != 200 {
		r.t.Fatalf("endpoints: %d %s", code, body)
	}
	var l struct {
		Endpoints []json.RawMessage `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(body), &l); err != nil {
		r.t.Fatal(err)
	}
	byName, defs := map[string]endpointListed{}, map[string]string{}
	for _, raw := range l.Endpoints {
		var e endpointListed
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &e) != nil || json.Unmarshal(raw, &m) != nil {
			r.t.Fatalf("endpoint %s", raw)
		}
		delete(m, "health")
		def, _ := json.Marshal(m)
		byName[e.Name], defs[e.Name] = e, string(def)
	}
	return byName, defs
}

// stoppedByRunState checks that every named endpoint is listed, enabled
// and stopped by the run state, and is no running device.
func (r *running) stoppedByRunState(names ...string) {
	r.t.Helper()
	eps, _ := r.endpoints()
	for _, name := range names {
		e, ok := eps[name]
		if !ok || !e.Enabled || e.Health == nil || e.Health.Status != "stopped" || e.Health.State != "STOPPED" || e.Health.Reason != reasonRunStopped {
			r.t.Fatalf("endpoint %s while the run state is stopped: %+v %+v", name, e, e.Health)
		}
		if code, body := r.do("GET", "/v1/adapters/modbus/devices/"+name, "", nil); code != 404 {
			r.t.Fatalf("device %s runs while the run state is stopped: %d %s", name, code, body)
		}
	}
	code, body := r.do("GET", "/v1/health/report", "", nil)
	if code != 200 || decode(r.t, body)["runState"] != control.RunStopped {
		r.t.Fatalf("health report while stopped: %d %s", code, body)
	}
}

// runStateDoc is a document with one Modbus endpoint polling unit 1 of
// the server on port every 200 ms, and runState when it is not "".
func runStateDoc(port int, runState string) string {
	rs := ""
	if runState != "" {
		rs = fmt.Sprintf(`"runState":%q,`, runState)
	}
	return fmt.Sprintf(`{"schemaVersion":1,%s"endpoints":[{"name":"plc1","protocol":"modbus","poll_interval":200,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":1},
		"data_points":[{"name":"r0","register":"holding:0","type":"uint16"}]}]}`, rs, port)
}

// TestRunStateIntegration serves target states to an agent polling a
// real Modbus server: a stopped document stops the readings and keeps
// the definitions; a local endpoint created meanwhile is stored but not
// started; a restart and a soft reboot stay stopped; a running
// document brings the
// readings back with the same endpoint.
func TestRunStateIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a Modbus server")
	}
	port := coretest.FreePort(t)
	startPymodbus(t, port)
	fc := startFakeCloud(t)
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	r.provisionTo(fc)

	fc.set(1, runStateDoc(port, ""))
	r.pull()
	good := func() bool {
		d := r.device("modbus", "plc1")
		return allQuality(d, "GOOD", "") && d.DataPoints[0].Value == 1000.0
	}
	eventually(t, 15*time.Second, "GOOD readings of plc1", good)
	_, defsBefore := r.endpoints()

	// Stopped: the endpoint stops at once, its definition stays.
	fc.set(2, runStateDoc(port, control.RunStopped))
	r.pull()
	r.stoppedByRunState("plc1")
	if _, defs := r.endpoints(); defs["plc1"] != defsBefore["plc1"] {
		t.Fatalf("the run state rewrote plc1:\n%s\nwas\n%s", defs["plc1"], defsBefore["plc1"])
	}
	rep, err := r.agent.p.reports.State(t.Context(), time.Now())
	if err != nil || rep.RunState != control.RunStopped || len(rep.Endpoints) != 1 || rep.Endpoints[0].Status != "stopped" || !rep.Endpoints[0].Enabled {
		t.Fatalf("state report while stopped: %+v %v", rep, err)
	}
	// No poll happens any more: five poll intervals later the count
	// has not moved.
	before := polls(t, r.metrics)
	time.Sleep(time.Second)
	if after := polls(t, r.metrics); after != before {
		t.Fatalf("%v polls while the run state is stopped", after-before)
	}

	// A local endpoint created while stopped is stored, not started.
	if code, body := r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"local-1","protocol":"modbus","poll_interval":200,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":2},"data_points":[{"name":"r0","register":"holding:0","type":"uint16"}]}`, port), nil); code != 201 {
		t.Fatalf("local endpoint: %d %s", code, body)
	}
	r.stoppedByRunState("plc1", "local-1")

	// A restart keeps it stopped: the adapters phase starts no endpoint,
	// so the cached document applied at start has none to stop, and
	// nothing polls.
	r.stop()
	r = startAgent(t, dir, true, nil)
	r.stoppedByRunState("plc1", "local-1")
	if code, logs := r.do("GET", "/v1/logs?level=info&limit=1000", "", nil); code != 200 ||
		!strings.Contains(logs, "endpoints not started: "+reasonRunStopped) || strings.Contains(logs, "run state stopped: endpoints stop") {
		t.Fatalf("start-up logs of a stopped agent: %d %s", code, logs)
	}
	// So does a soft reboot, which runs the adapters phase again.
	if code, body := r.do("POST", "/v1/reboot", "", nil); code != 202 {
		t.Fatalf("reboot: %d %s", code, body)
	}
	eventually(t, 15*time.Second, "the adapters phase run again by the reboot", func() bool {
		_, logs := r.do("GET", "/v1/logs?level=info&limit=1000", "", nil)
		return strings.Count(logs, "endpoints not started: "+reasonRunStopped) == 2
	})
	r.waitReady()
	r.stoppedByRunState("plc1", "local-1")
	time.Sleep(time.Second)
	if n := polls(t, r.metrics); n != 0 {
		t.Fatalf("%v polls after a restart and a soft reboot with the run state stopped", n)
	}

	// Running again: both endpoints poll, plc1 with its old definition.
	fc.set(3, runStateDoc(port, control.RunRunning))
	r.pull()
	eventually(t, 15*time.Second, "GOOD readings of plc1 after running again", good)
	eventually(t, 15*time.Second, "GOOD readings of local-1", func() bool {
		code, _ := r.do("GET", "/v1/adapters/modbus/devices/local-1", "", nil)
		return code == 200 && allQuality(r.device("modbus", "local-1"), "GOOD", "")
	})
	if _, defs := r.endpoints(); defs["plc1"] != defsBefore["plc1"] {
		t.Fatalf("running again rewrote plc1:\n%s\nwas\n%s", defs["plc1"], defsBefore["plc1"])
	}
	code, body := r.do("GET", "/v1/health/report", "", nil)
	if code != 200 || decode(t, body)["runState"] != control.RunRunning {
		t.Fatalf("health report after running again: %d %s", code, body)
	}
}
