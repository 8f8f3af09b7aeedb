package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// startNodeOPCUA runs the OPC-UA adapter's test server (node-opcua, see
// adapters/opcua/testdata/server.js) on port. node-opcua is looked up where
// the build machines install it, $EDGEPLAT_NPM_CACHE (default
// ~/.cache/edgeplat-npm)/node_modules, and the server keeps its PKI in the
// user cache folder the adapter's own tests use, so only the very first
// start spends seconds making certificates.
func startNodeOPCUA(t *testing.T, port int) *coretest.Process {
	t.Helper()
	node, mods := coretest.NodePackage(t, "node-opcua")
	// coretest.Process passes the test's environment on to the child.
	if prev := os.Getenv("NODE_PATH"); prev != "" {
		mods += string(os.PathListSeparator) + prev
	}
	t.Setenv("NODE_PATH", mods)
	pki := t.TempDir()
	if dir, err := os.UserCacheDir(); err == nil {
		dir = filepath.Join(dir, "edgeplat", "opcua-test-pki")
		if os.MkdirAll(dir, 0o700) == nil {
			pki = dir
		}
	}
	p := coretest.NewProcess(t, node, "adapters/opcua/testdata/server.js", strconv.Itoa(port), pki)
	// The server prints READY once it listens; Start truncates the log, so
	// this also holds after a restart.
	p.Ready = func() error {
		if !strings.Contains(p.Output(), "READY ") {
			return fmt.Errorf("no READY line yet")
		}
		return nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node-opcua output:\n%s", p.Output())
		}
	})
	p.Start()
	return p
}

// opcuaDevice is GET /v1/adapters/opcua/devices/:name.
type opcuaDevice struct {
	Connected   bool          `json:"connected"`
	Status      string        `json:"status"`
	DataPoints  []pointStatus `json:"dataPoints"`
	Diagnostics struct {
		EndpointURL string `json:"endpointUrl"`
		Subscribe   bool   `json:"subscribe"`
		State       string `json:"state"`
		Connects    int64  `json:"connects"`
	} `json:"diagnostics"`
}

func (d opcuaDevice) point(name string) pointStatus {
	for _, p := range d.DataPoints {
		if p.Name == name {
			return p
		}
	}
	return pointStatus{}
}

func (d opcuaDevice) allQuality(q, code string) bool {
	return allQuality(deviceDetail{DataPoints: d.DataPoints}, q, code)
}

// forT is r reporting to t, so a subtest fails itself rather than calling
// FailNow on its parent.
func (r *running) forT(t *testing.T) *running {
	c := *r
	c.t = t
	return &c
}

func (r *running) opcuaDevice(name string) opcuaDevice {
	r.t.Helper()
	code, body := r.do("GET", "/v1/adapters/opcua/devices/"+name, "", nil)
	if code != 200 {
		r.t.Fatalf("device %s: %d %s", name, code, body)
	}
	var d opcuaDevice
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		r.t.Fatalf("device %s: %v in %s", name, err, body)
	}
	return d
}

// endpointHealth is the live health GET /v1/endpoints shows per endpoint
// name; an endpoint that does not run has none.
func (r *running) endpointHealth() map[string]struct {
	Status    string
	Connected bool
} {
	r.t.Helper()
	code, body := r.do("GET", "/v1/endpoints", "", nil)
	if code != 200 {
		r.t.Fatalf("list endpoints: %d %s", code, body)
	}
	var list struct {
		Endpoints []struct {
			Name   string `json:"name"`
			Health *struct {
				Status    string `json:"status"`
				Connected bool   `json:"connected"`
			} `json:"health"`
		} `json:"endpoints"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		r.t.Fatalf("list endpoints: %v in %s", err, body)
	}
	out := map[string]struct {
		Status    string
		Connected bool
	}{}
	for _, ep := range list.Endpoints {
		if ep.Health != nil {
			out[ep.Name] = struct {
				Status    string
				Connected bool
			}{ep.Health.Status, ep.Health.Connected}
		}
	}
	return out
}

// valueWatch collects the distinct GOOD values one data point of a device
// shows over successive reads of the device detail.
type valueWatch struct {
	r      *running
	device string
	point  string
	seen   map[any]bool
}

func (w *valueWatch) distinct() int {
	if p := w.r.opcuaDevice(w.device).point(w.point); p.Quality == "GOOD" && p.Value != nil {
		w.seen[p.Value] = true
	}
	return len(w.seen)
}

// TestOPCUAThroughAPIIntegration drives the whole agent against a real
// OPC-UA server (node-opcua): a polled endpoint created over the API shows
// the server's exact values, a subscribed one receives changing values
// pushed by the server (and has no poll metrics), the browse route walks
// the address space and refuses bad requests, and a server crash turns
// both endpoints BAD until the server is back, when polling and the
// subscription resume by themselves.
func TestOPCUAThroughAPIIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a node-opcua server")
	}
	begin := time.Now()
	port := coretest.FreePort(t)
	srv := startNodeOPCUA(t, port)
	url := fmt.Sprintf("opc.tcp://127.0.0.1:%d", port)
	t.Logf("node-opcua ready after %s", time.Since(begin).Round(time.Millisecond))
	r := startAgent(t, t.TempDir(), true, nil)

	fixed := map[string]any{"counter": 42.0, "running": true, "label": "line-1", "pressure": 1.5}
	// polledGood: every point GOOD, the fixed ones exact and temperature a
	// number.
	polledGood := func(d opcuaDevice) bool {
		if !d.allQuality("GOOD", "") || len(d.DataPoints) != len(fixed)+1 {
			return false
		}
		for _, p := range d.DataPoints {
			if want, ok := fixed[p.Name]; ok && p.Value != want {
				return false
			}
		}
		_, ok := d.point("temperature").Value.(float64)
		return ok
	}

	ok := t.Run("polling", func(t *testing.T) {
		r := r.forT(t)
		ep := fmt.Sprintf(`{"name":"plc-poll","protocol":"opcua","poll_interval":200,
			"connection":{"endpointUrl":%q,"timeoutMs":3000},
			"data_points":[
				{"name":"counter","register":"ns=1;s=Counter"},
				{"name":"running","register":"ns=1;s=Running"},
				{"name":"label","register":"ns=1;s=Label"},
				{"name":"pressure","register":"ns=1;s=Pressure","unit":"bar"},
				{"name":"temperature","register":"ns=1;s=Temperature","unit":"C"}]}`, url)
		if code, body := r.do("POST", "/v1/endpoints", ep, nil); code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		eventually(t, 15*time.Second, "exact GOOD polled values", func() bool { return polledGood(r.opcuaDevice("plc-poll")) })
		d := r.opcuaDevice("plc-poll")
		if !d.Connected || d.Status != "connected" || d.Diagnostics.Subscribe || d.Diagnostics.State != "Connected" || d.Diagnostics.EndpointURL != url {
			t.Fatalf("polled device detail: %+v", d)
		}
		if h := r.endpointHealth()["plc-poll"]; !h.Connected || h.Status != "connected" {
			t.Fatalf("endpoint health: %+v", h)
		}
		w := &valueWatch{r: r, device: "plc-poll", point: "temperature", seen: map[any]bool{}}
		eventually(t, 15*time.Second, "polled temperature to change", func() bool { return w.distinct() >= 2 })
	})
	if !ok {
		return
	}

	ok = t.Run("subscription", func(t *testing.T) {
		r := r.forT(t)
		ep := fmt.Sprintf(`{"name":"plc-sub","protocol":"opcua","poll_interval":200,
			"connection":{"endpointUrl":%q,"timeoutMs":3000,"subscribe":true,"publishingIntervalMs":100,"samplingIntervalMs":100},
			"data_points":[
				{"name":"temperature","register":"ns=1;s=Temperature","unit":"C"},
				{"name":"counter","register":"ns=1;s=Counter"}]}`, url)
		if code, body := r.do("POST", "/v1/endpoints", ep, nil); code != 201 {
			t.Fatalf("create: %d %s", code, body)
		}
		w := &valueWatch{r: r, device: "plc-sub", point: "temperature", seen: map[any]bool{}}
		eventually(t, 20*time.Second, "three distinct pushed temperatures", func() bool { return w.distinct() >= 3 })
		eventually(t, 10*time.Second, "the pushed counter", func() bool {
			d := r.opcuaDevice("plc-sub")
			return d.allQuality("GOOD", "") && d.point("counter").Value == 42.0
		})
		d := r.opcuaDevice("plc-sub")
		if !d.Connected || !d.Diagnostics.Subscribe || d.Diagnostics.State != "Connected" {
			t.Fatalf("subscribed device detail: %+v", d)
		}
		h := r.endpointHealth()
		if !h["plc-sub"].Connected || h["plc-sub"].Status != "connected" || !h["plc-poll"].Connected {
			t.Fatalf("endpoint health: %+v", h)
		}

		// Pushed values have no poll latency or rate: 501 with the error
		// shape. The polled endpoint has its figures.
		code, body := r.do("GET", "/v1/adapters/opcua/devices/plc-sub/metrics", "", nil)
		if code != 501 || !strings.Contains(errorOf(t, body), "not supported") {
			t.Fatalf("metrics of the subscribed device: %d %s", code, body)
		}
		code, body = r.do("GET", "/v1/adapters/opcua/devices/plc-poll/metrics", "", nil)
		m := decode(t, body)
		if code != 200 || m["deviceName"] != "plc-poll" || m["polls"].(float64) < 2 || m["readsGood"].(float64) < 5 {
			t.Fatalf("metrics of the polled device: %d %s", code, body)
		}
		// The protocol's metrics list the polled device only.
		code, body = r.do("GET", "/v1/adapters/opcua/metrics", "", nil)
		if code != 200 || !strings.Contains(body, `"plc-poll"`) || strings.Contains(body, `"plc-sub"`) {
			t.Fatalf("protocol metrics: %d %s", code, body)
		}
	})
	if !ok {
		return
	}

	ok = t.Run("browse", func(t *testing.T) {
		r := r.forT(t)
		code, body := r.do("POST", "/v1/discover/opcua/browse", fmt.Sprintf(`{"endpointUrl":%q,"maxDepth":3}`, url), nil)
		if code != 200 {
			t.Fatalf("browse: %d %s", code, body)
		}
		type node struct {
			NodeID    string `json:"nodeId"`
			NodeClass string `json:"nodeClass"`
			DataType  string `json:"dataType"`
			Children  []node `json:"children"`
		}
		var res struct {
			EndpointURL string `json:"endpointUrl"`
			NodeCount   int    `json:"nodeCount"`
			Nodes       []node `json:"nodes"`
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("browse: %v in %s", err, body)
		}
		type found struct {
			class, dataType, parent string
		}
		all := map[string]found{}
		var walk func(parent string, ns []node)
		walk = func(parent string, ns []node) {
			for _, n := range ns {
				all[n.NodeID] = found{n.NodeClass, n.DataType, parent}
				walk(n.NodeID, n.Children)
			}
		}
		walk("", res.Nodes)
		if res.EndpointURL != url || res.NodeCount != len(all) {
			t.Fatalf("browse header: url %q, nodeCount %d for %d nodes listed", res.EndpointURL, res.NodeCount, len(all))
		}
		want := map[string]found{
			"ns=1;s=Plant":       {"Object", "", ""},
			"ns=1;s=Line1":       {"Object", "", "ns=1;s=Plant"},
			"ns=1;s=Temperature": {"Variable", "Double", "ns=1;s=Plant"},
			"ns=1;s=Pressure":    {"Variable", "Float", "ns=1;s=Plant"},
			"ns=1;s=Counter":     {"Variable", "Int32", "ns=1;s=Line1"},
			"ns=1;s=Running":     {"Variable", "Boolean", "ns=1;s=Line1"},
			"ns=1;s=Label":       {"Variable", "String", "ns=1;s=Line1"},
		}
		for id, w := range want {
			if got, ok := all[id]; !ok || got != w {
				t.Errorf("%s: got %+v (listed %t), want %+v", id, got, ok, w)
			}
		}

		for _, depth := range []string{"-1", "21"} {
			code, body := r.do("POST", "/v1/discover/opcua/browse", fmt.Sprintf(`{"endpointUrl":%q,"maxDepth":%s}`, url, depth), nil)
			if code != 400 || !strings.Contains(errorOf(t, body), "maxDepth") {
				t.Errorf("maxDepth %s: %d %s", depth, code, body)
			}
		}
		// 0 is documented as unlimited, not refused.
		if code, body := r.do("POST", "/v1/discover/opcua/browse", fmt.Sprintf(`{"endpointUrl":%q,"maxDepth":0}`, url), nil); code != 200 || !strings.Contains(body, `"ns=1;s=Label"`) {
			t.Errorf("maxDepth 0 (unlimited): %d %.300s", code, body)
		}
		if code, body := r.do("POST", "/v1/discover/opcua/browse", `{"maxDepth":3}`, nil); code != 400 || !strings.Contains(errorOf(t, body), "endpointUrl") {
			t.Errorf("missing endpointUrl: %d %s", code, body)
		}

		// Nothing listens on a fresh free port: a gateway error naming the
		// URL and the quality code.
		dead := fmt.Sprintf("opc.tcp://127.0.0.1:%d", coretest.FreePort(t))
		code, body = r.do("POST", "/v1/discover/opcua/browse", fmt.Sprintf(`{"endpointUrl":%q,"maxDepth":3,"timeoutMs":2000}`, dead), nil)
		if msg := errorOf(t, body); code != 502 || !strings.Contains(msg, dead) || !strings.Contains(msg, "CONNECTION_REFUSED") {
			t.Errorf("unreachable server: %d %s", code, body)
		}
	})
	if !ok {
		return
	}

	t.Run("restart", func(t *testing.T) {
		r := r.forT(t)
		before := map[string]int64{"plc-poll": r.opcuaDevice("plc-poll").Diagnostics.Connects, "plc-sub": r.opcuaDevice("plc-sub").Diagnostics.Connects}

		// The server crashes: both endpoints' readings turn BAD with
		// CONNECTION_REFUSED once they try to reconnect, and health
		// leaves connected.
		srv.Stop()
		down := time.Now()
		for _, name := range []string{"plc-poll", "plc-sub"} {
			eventually(t, 20*time.Second, name+" BAD with CONNECTION_REFUSED", func() bool {
				d := r.opcuaDevice(name)
				return !d.Connected && d.allQuality("BAD", "CONNECTION_REFUSED")
			})
		}
		t.Logf("both endpoints BAD %s after the kill", time.Since(down).Round(time.Millisecond))
		for name, h := range r.endpointHealth() {
			if h.Connected || h.Status == "connected" {
				t.Fatalf("%s health during the outage: %+v", name, h)
			}
		}

		// Back on the same port: the runner reconnects by itself (backoff
		// 1, 2, 4 ... s with jitter) and both data paths resume.
		srv.Start()
		up := time.Now()
		eventually(t, 60*time.Second, "exact GOOD polled values after the restart", func() bool { return polledGood(r.opcuaDevice("plc-poll")) })
		eventually(t, 60*time.Second, "GOOD pushed values after the restart", func() bool {
			d := r.opcuaDevice("plc-sub")
			return d.Connected && d.allQuality("GOOD", "") && d.point("counter").Value == 42.0
		})
		t.Logf("both endpoints GOOD %s after the restart", time.Since(up).Round(time.Millisecond))
		poll := &valueWatch{r: r, device: "plc-poll", point: "temperature", seen: map[any]bool{}}
		eventually(t, 15*time.Second, "polled temperature to change after the restart", func() bool { return poll.distinct() >= 2 })
		sub := &valueWatch{r: r, device: "plc-sub", point: "temperature", seen: map[any]bool{}}
		eventually(t, 15*time.Second, "three distinct pushed temperatures after the restart", func() bool { return sub.distinct() >= 3 })

		h := r.endpointHealth()
		for _, name := range []string{"plc-poll", "plc-sub"} {
			if !h[name].Connected || h[name].Status != "connected" {
				t.Errorf("%s health after the restart: %+v", name, h[name])
			}
			if d := r.opcuaDevice(name); d.Diagnostics.Connects <= before[name] {
				t.Errorf("%s: %d connects after the restart, %d before", name, d.Diagnostics.Connects, before[name])
			}
		}
		code, body := r.do("GET", "/v1/adapters/opcua/devices/plc-poll/metrics", "", nil)
		m := decode(t, body)
		if code != 200 || m["pollFailures"].(float64) < 1 || m["readsBad"].(float64) < 1 || m["connectFailures"].(float64) < 1 {
			t.Errorf("metrics of the polled device after the outage: %d %s", code, body)
		}
		if code, body := r.do("GET", "/v1/adapters/opcua/devices/plc-sub/metrics", "", nil); code != 501 {
			t.Errorf("metrics of the subscribed device after the outage: %d %s", code, body)
		}
	})
}
