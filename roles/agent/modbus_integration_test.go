package agent

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// startPymodbus runs the Modbus adapter's test server (Debian's
// python3-pymodbus) with generated units: holding and input register i of
// unit u hold u*1000+i.
func startPymodbus(t *testing.T, port int) *coretest.Process {
	t.Helper()
	return coretest.Pymodbus(t, "adapters/modbus/testdata/server.py", port, "--units", "2", "--registers", "100")
}

type pointStatus struct {
	Name        string `json:"name"`
	Value       any    `json:"value"`
	Quality     string `json:"quality"`
	QualityCode string `json:"qualityCode"`
}

type deviceDetail struct {
	Connected   bool          `json:"connected"`
	DataPoints  []pointStatus `json:"dataPoints"`
	Diagnostics struct {
		RequestsPerPoll int `json:"requestsPerPoll"`
	} `json:"diagnostics"`
}

func (r *running) device(protocol, name string) deviceDetail {
	r.t.Helper()
	code, body := r.do("GET", "/v1/adapters/"+protocol+"/devices/"+name, "", nil)
	if code != 200 {
		r.t.Fatalf("device %s: %d %s", name, code, body)
	}
	var d deviceDetail
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		r.t.Fatal(err)
	}
	return d
}

func allQuality(d deviceDetail, q, code string) bool {
	if len(d.DataPoints) == 0 {
		return false
	}
	for _, p := range d.DataPoints {
		if p.Quality != q || p.QualityCode != code {
			return false
		}
	}
	return true
}

// TestModbusThroughAPIIntegration drives the whole agent against a real
// Modbus server: an endpoint created over the API polls at once, values
// are exact, contiguous registers cost one request, a write reaches the
// server, and an outage turns readings BAD and back without a restart.
func TestModbusThroughAPIIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a Modbus server")
	}
	port := coretest.FreePort(t)
	srv := startPymodbus(t, port)
	r := startAgent(t, t.TempDir(), true, nil)
	ep := fmt.Sprintf(`{"name":"press-1","protocol":"modbus","poll_interval":200,
		"connection":{"host":"127.0.0.1","port":%d,"unitId":2},
		"data_points":[
			{"name":"r0","register":"holding:0","type":"uint16"},
			{"name":"r1","register":"holding:1","type":"int16"},
			{"name":"r2","register":"holding:2","type":"uint16","scale":0.5,"unit":"bar"},
			{"name":"r5","register":"holding:5"},
			{"name":"in7","register":"input:7"}]}`, port)
	if code, body := r.do("POST", "/v1/endpoints", ep, nil); code != 201 {
		t.Fatalf("create: %d %s", code, body)
	}
	want := map[string]any{"r0": 2000.0, "r1": 2001.0, "r2": 1001.0, "r5": 2005.0, "in7": 2007.0}
	good := func(d deviceDetail) bool {
		if !allQuality(d, "GOOD", "") {
			return false
		}
		for _, p := range d.DataPoints {
			if p.Value != want[p.Name] {
				return false
			}
		}
		return true
	}
	eventually(t, 15*time.Second, "exact GOOD values", func() bool { return good(r.device("modbus", "press-1")) })
	d := r.device("modbus", "press-1")
	if !d.Connected || d.Diagnostics.RequestsPerPoll != 2 {
		t.Fatalf("holding 0..5 and input 7 should take 2 requests per poll: %+v", d)
	}

	// A write through the API reaches the server's register, as a
	// third-party client (mbpoll) reads it.
	code, body := r.do("POST", "/v1/adapters/modbus/devices/press-1/write", `{"register":"r5","value":4242}`, nil)
	if code != 200 || !strings.Contains(body, `"success":true`) {
		t.Fatalf("write: %d %s", code, body)
	}
	if mbpoll, err := exec.LookPath("mbpoll"); err != nil {
		coretest.Unavailable(t, "mbpoll", "PATH", err)
	} else {
		out, err := exec.Command(mbpoll, "-m", "tcp", "-p", strconv.Itoa(port), "-a", "2", "-t", "4", "-0", "-r", "5", "-c", "1", "-1", "127.0.0.1").CombinedOutput()
		if err != nil {
			t.Fatalf("mbpoll: %v\n%s", err, out)
		}
		if m := regexp.MustCompile(`(?m)^\[5\]:\s+(\d+)`).FindStringSubmatch(string(out)); m == nil || m[1] != "4242" {
			t.Fatalf("mbpoll reads holding 5 of unit 2 as %v, want 4242:\n%s", m, out)
		}
	}
	if code, body := r.do("POST", "/v1/adapters/modbus/devices/press-1/write", `{"register":"r5","value":70000}`, nil); code != 400 || !strings.Contains(errorOf(t, body), "value") {
		t.Fatalf("out-of-range write: %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/adapters/modbus/devices/press-1/write", `{"register":"input:7","value":1}`, nil); code != 400 {
		t.Fatalf("write to an input register: %d %s", code, body)
	}

	// The server goes away: readings turn BAD with CONNECTION_REFUSED and
	// health leaves CONNECTED.
	srv.Stop()
	eventually(t, 15*time.Second, "BAD readings with CONNECTION_REFUSED", func() bool {
		d := r.device("modbus", "press-1")
		return !d.Connected && allQuality(d, "BAD", "CONNECTION_REFUSED")
	})
	_, body = r.do("GET", "/v1/endpoints", "", nil)
	if !strings.Contains(body, `"connected":false`) || strings.Contains(body, `"status":"connected"`) {
		t.Fatalf("endpoint health during the outage: %s", body)
	}

	// It comes back (with fresh registers): values return, no restart.
	srv.Start()
	want["r5"] = 2005.0
	eventually(t, 45*time.Second, "GOOD values after the server came back", func() bool { return good(r.device("modbus", "press-1")) })
	code, body = r.do("GET", "/v1/adapters/modbus/devices/press-1/metrics", "", nil)
	m := decode(t, body)
	if code != 200 || m["polls"].(float64) < 2 || m["readsBad"].(float64) < 1 {
		t.Fatalf("metrics: %d %s", code, body)
	}
	if code, _ := r.do("GET", "/v1/adapters/modbus/metrics", "", nil); code != 200 {
		t.Fatalf("protocol metrics: %d", code)
	}
}
