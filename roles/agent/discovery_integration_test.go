package agent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
)

type foundDevice struct {
	Protocol   string          `json:"protocol"`
	Name       string          `json:"name"`
	Connection json.RawMessage `json:"connection"`
	Validated  bool            `json:"validated"`
	Details    map[string]any  `json:"details"`
}

// discover posts body to /v1/discover and wants 200.
func (r *running) discover(body string) []foundDevice {
	r.t.Helper()
	code, out := r.do("POST", "/v1/discover", body, nil)
	if code != 200 {
		r.t.Fatalf("discover %s: %d %s", body, code, out)
	}
	var res struct {
		Devices []foundDevice     `json:"devices"`
		Errors  map[string]string `json:"errors"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		r.t.Fatal(err)
	}
	if len(res.Errors) > 0 {
		r.t.Fatalf("discover %s: errors %v", body, res.Errors)
	}
	return res.Devices
}

// startModbusUnit runs the Modbus test server serving only unit.
func startModbusUnit(t *testing.T, unit int) int {
	t.Helper()
	layout := filepath.Join(t.TempDir(), "layout.json")
	if err := os.WriteFile(layout, fmt.Appendf(nil, `{"units":{"%d":{"hr":{"0":%d}}}}`, unit, unit*11), 0o600); err != nil {
		t.Fatal(err)
	}
	port := coretest.FreePort(t)
	coretest.Pymodbus(t, "adapters/modbus/testdata/server.py", port, "--layout", layout)
	return port
}

// TestDiscoverModbusIntegration: POST /v1/discover finds two Modbus
// servers on different ports and unit ids exactly and validates them;
// the same scan again is a 409 naming forceRun; bad options are 400s
// naming the field.
func TestDiscoverModbusIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Modbus servers")
	}
	pa, pb := startModbusUnit(t, 2), startModbusUnit(t, 9)
	r := startAgent(t, t.TempDir(), true, nil)
	body := fmt.Sprintf(`{"protocols":["modbus"],"validate":true,"overrides":{"modbus":{"hosts":["127.0.0.1"],"ports":[%d,%d],"unitIds":[1,2,9]}}}`, pa, pb)
	devs := r.discover(body)
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%s %s %v", d.Name, d.Connection, d.Validated))
	}
	want := []string{
		fmt.Sprintf(`modbus-127.0.0.1-%d-unit2 {"host":"127.0.0.1","port":%d,"unitId":2} true`, pa, pa),
		fmt.Sprintf(`modbus-127.0.0.1-%d-unit9 {"host":"127.0.0.1","port":%d,"unitId":9} true`, pb, pb),
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("found\n%v\nwant\n%v", got, want)
	}
	if code, out := r.do("POST", "/v1/discover", body, nil); code != 409 || !strings.Contains(errorOf(t, out), "forceRun") {
		t.Fatalf("same scan again: %d %s, want 409 naming forceRun", code, out)
	}
	forced := strings.Replace(body, `"validate":true`, `"forceRun":true`, 1)
	if devs := r.discover(forced); len(devs) != 2 {
		t.Fatalf("forced scan found %d devices", len(devs))
	}
	for _, bad := range []struct{ body, field string }{
		{`{"protocols":["modbus"],"overrides":{"modbus":{"network":"10.0.0.0/23"}}}`, "overrides.modbus.network"},
		{`{"protocols":["modbus"],"overrides":{"modbus":{"netwrk":"10.0.0.0/24"}}}`, "overrides.modbus.netwrk"},
		{`{"protocols":["modbus"],"overrides":{"modbus":{"unitIds":"1"}}}`, "overrides.modbus.unitIds"},
		{`{"protocols":["profinet"]}`, "protocols[0]"},
		{`{"protocols":["bacnet"],"overrides":{"bacnet":{"windowMs":50}}}`, "overrides.bacnet.windowMs"},
		{`{"protocols":["modbus"],"overrides":{"opcua":{}}}`, "overrides.opcua"},
		{`{"protocol":["modbus"]}`, "protocol"},
		{`{"protocols":["modbus"],"validate":"yes"}`, "validate"},
		{`{}`, "protocols"},
	} {
		if code, out := r.do("POST", "/v1/discover", bad.body, nil); code != 400 || !strings.Contains(errorOf(t, out), bad.field) {
			t.Errorf("POST /v1/discover %s = %d %s, want 400 naming %s", bad.body, code, out, bad.field)
		}
	}
}

// TestDiscoverOPCUAIntegration: the node-opcua test server is found with
// its endpoint and its three security modes.
func TestDiscoverOPCUAIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts an OPC-UA server")
	}
	port := coretest.FreePort(t)
	startNodeOPCUA(t, port)
	r := startAgent(t, t.TempDir(), true, nil)
	devs := r.discover(fmt.Sprintf(`{"protocols":["opcua"],"validate":true,"overrides":{"opcua":{"hosts":["127.0.0.1"],"ports":[%d]}}}`, port))
	if len(devs) != 1 {
		t.Fatalf("found %+v, want one server", devs)
	}
	d := devs[0]
	if string(d.Connection) != fmt.Sprintf(`{"endpointUrl":"opc.tcp://127.0.0.1:%d"}`, port) || !d.Validated {
		t.Fatalf("device %+v", d)
	}
	modes := fmt.Sprint(d.Details["securityModes"])
	policies := fmt.Sprint(d.Details["securityPolicies"])
	if modes != "[None Sign SignAndEncrypt]" || !strings.Contains(policies, "Basic256Sha256") || !strings.Contains(policies, "None") {
		t.Fatalf("modes %s policies %s", modes, policies)
	}
}

// TestDiscoverMQTTIntegration: topics under a unique prefix are listed
// with the shape of their payloads.
func TestDiscoverMQTTIntegration(t *testing.T) {
	addr := coretest.MQTTAddr(t)
	prefix := "edgeplat-test/discovery/" + codec.NewUUID().String()[:8]
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID("edgeplat-test-" + codec.NewUUID().String()[:8]))
	if tok := c.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer c.Disconnect(100)
	msgs := map[string]string{prefix + "/line1/temp": `{"value":21.5,"unit":"C","ok":true}`, prefix + "/line1/raw": "\x00\x01\x02"}
	for topic, payload := range msgs {
		// Retained, so the scan sees them at once; cleared at the end.
		if tok := c.Publish(topic, 1, true, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
		t.Cleanup(func() { c.Publish(topic, 1, true, "").WaitTimeout(5 * time.Second) })
	}
	r := startAgent(t, t.TempDir(), true, nil)
	devs := r.discover(fmt.Sprintf(`{"protocols":["mqtt"],"overrides":{"mqtt":{"brokerUrl":"tcp://%s","topics":["%s/#"],"durationMs":1000}}}`, addr, prefix))
	got := map[string]string{}
	for _, d := range devs {
		shape, _ := json.Marshal(d.Details["shape"])
		got[fmt.Sprint(d.Details["topic"])] = string(shape)
	}
	want := map[string]string{
		prefix + "/line1/temp": `{"fields":{"ok":"boolean","unit":"string","value":"number"},"format":"json","size":35,"type":"object"}`,
		prefix + "/line1/raw":  `{"format":"binary","size":3}`,
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("topics\n%v\nwant\n%v", got, want)
	}
}

type ruleRun struct {
	UUID             string        `json:"uuid"`
	Status           string        `json:"status"`
	DevicesFound     int           `json:"devices_found"`
	EndpointsCreated int           `json:"endpoints_created"`
	Error            string        `json:"error"`
	Devices          []foundDevice `json:"devices"`
}

func (r *running) runs(path string) []ruleRun {
	r.t.Helper()
	code, out := r.do("GET", path, "", nil)
	if code != 200 {
		r.t.Fatalf("GET %s: %d %s", path, code, out)
	}
	var res struct{ Runs []ruleRun }
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		r.t.Fatal(err)
	}
	return res.Runs
}

// TestDiscoveryRulesIntegration: a rule with auto_enable creates one
// endpoint per new device, through POST /v1/endpoints' checks, and its
// second run none; runs are listed; deleting the rule deletes them; bad
// rules and limits are 400s; with features.discovery off every route is
// a 409 naming it.
func TestDiscoveryRulesIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts a Modbus server")
	}
	port := coretest.FreePort(t)
	coretest.Pymodbus(t, "adapters/modbus/testdata/server.py", port, "--units", "2", "--registers", "10")
	r := startAgent(t, t.TempDir(), true, nil)
	// Disabled, so the scheduler leaves it to the explicit runs.
	rule := fmt.Sprintf(`{"name":"line","protocol":"modbus","enabled":false,"auto_enable":true,"interval_seconds":600,
		"params_json":{"hosts":["127.0.0.1"],"ports":[%d],"unitIds":[1,2,3]},
		"target_json":{"name":"auto-","poll_interval":1000,"connection":{"timeoutMs":700},
			"data_points":[{"name":"r0","register":"holding:0"}]}}`, port)
	code, out := r.do("POST", "/v1/discovery-rules", rule, nil)
	if code != 201 {
		t.Fatalf("create rule: %d %s", code, out)
	}
	id := decode(t, out)["uuid"].(string)

	run := func() ruleRun {
		code, out := r.do("POST", "/v1/discovery-rules/"+id+"/run", "", nil)
		if code != 200 {
			t.Fatalf("run: %d %s", code, out)
		}
		var rr ruleRun
		if err := json.Unmarshal([]byte(out), &rr); err != nil {
			t.Fatal(err)
		}
		return rr
	}
	first := run()
	if first.Status != "succeeded" || first.DevicesFound != 2 || first.EndpointsCreated != 2 || len(first.Devices) != 2 {
		t.Fatalf("first run %+v", first)
	}
	_, eps := r.do("GET", "/v1/endpoints?protocol=modbus", "", nil)
	for _, u := range []int{1, 2} {
		name := fmt.Sprintf("auto-modbus-127.0.0.1-%d-unit%d", port, u)
		if !strings.Contains(eps, `"name":"`+name+`"`) || !strings.Contains(eps, fmt.Sprintf(`"unitId":%d`, u)) || !strings.Contains(eps, `"timeoutMs":700`) {
			t.Fatalf("endpoint %s missing: %s", name, eps)
		}
	}
	// The endpoints poll the devices they were made for.
	eventually(t, 15*time.Second, "auto-created endpoint reads unit 2", func() bool {
		d := r.device("modbus", fmt.Sprintf("auto-modbus-127.0.0.1-%d-unit2", port))
		return allQuality(d, "GOOD", "") && d.DataPoints[0].Value == 2000.0
	})
	second := run()
	if second.Status != "succeeded" || second.DevicesFound != 2 || second.EndpointsCreated != 0 {
		t.Fatalf("second run %+v", second)
	}
	if runs := r.runs("/v1/discovery-rules/" + id + "/runs"); len(runs) != 2 || runs[0].UUID != second.UUID || runs[1].UUID != first.UUID {
		t.Fatalf("rule runs %+v", runs)
	}
	if runs := r.runs("/v1/discovery-runs?limit=1"); len(runs) != 1 || runs[0].UUID != second.UUID {
		t.Fatalf("all runs %+v", runs)
	}
	for _, bad := range []struct{ method, path, body, field string }{
		{"GET", "/v1/discovery-rules/" + id + "/runs?limit=51", "", "limit"},
		{"GET", "/v1/discovery-runs?limit=0", "", "limit"},
		{"POST", "/v1/discovery-rules", `{"protocol":"modbus","params_json":{"network":"10.0.0.0/24"}}`, "name"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"modbus","interval_seconds":5,"params_json":{"network":"10.0.0.0/24"}}`, "interval_seconds"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"modbus","params_json":{"network":"10.0.0.0/16"}}`, "params_json.network"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"profinet"}`, "protocol"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"modbus","params_json":{"network":"10.0.0.0/24"},"target_json":{"protocol":"opcua"}}`, "target_json.protocol"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"modbus","params_json":{"network":"10.0.0.0/24"},"target_json":{"poll_intervall":5}}`, "target_json.poll_intervall"},
		{"POST", "/v1/discovery-rules", `{"name":"x","protocol":"modbus","colour":1}`, "colour"},
		{"PATCH", "/v1/discovery-rules/" + id, `{"interval_seconds":"often"}`, "interval_seconds"},
	} {
		if code, out := r.do(bad.method, bad.path, bad.body, nil); code != 400 || !strings.Contains(errorOf(t, out), bad.field) {
			t.Errorf("%s %s %s = %d %s, want 400 naming %s", bad.method, bad.path, bad.body, code, out, bad.field)
		}
	}
	if code, out := r.do("PATCH", "/v1/discovery-rules/"+id, `{"interval_seconds":120,"name":"line 1"}`, nil); code != 200 ||
		!strings.Contains(out, `"interval_seconds":120`) || !strings.Contains(out, `"name":"line 1"`) || !strings.Contains(out, `"enabled":false`) {
		t.Fatalf("patch: %d %s", code, out)
	}
	if code, out := r.do("GET", "/v1/discovery-rules", "", nil); code != 200 || strings.Count(out, `"uuid"`) != 1 {
		t.Fatalf("rules: %d %s", code, out)
	}

	// Off: every route answers 409 naming the setting.
	if code, out := r.do("PATCH", "/v1/settings", `{"features":{"discovery":false}}`, nil); code != 200 {
		t.Fatalf("switch off: %d %s", code, out)
	}
	for _, rt := range [][2]string{{"POST", "/v1/discover"}, {"GET", "/v1/discovery-rules"}, {"POST", "/v1/discovery-rules/" + id + "/run"},
		{"GET", "/v1/discovery-runs"}, {"DELETE", "/v1/discovery-rules/" + id}} {
		body := ""
		if rt[0] == "POST" {
			body = `{}`
		}
		if code, out := r.do(rt[0], rt[1], body, nil); code != 409 || !strings.Contains(errorOf(t, out), "features.discovery") {
			t.Errorf("%s %s while off = %d %s, want 409 naming features.discovery", rt[0], rt[1], code, out)
		}
	}
	if code, out := r.do("PATCH", "/v1/settings", `{"features":{"discovery":true}}`, nil); code != 200 {
		t.Fatalf("switch on: %d %s", code, out)
	}

	if code, out := r.do("DELETE", "/v1/discovery-rules/"+id, "", nil); code != 204 {
		t.Fatalf("delete: %d %s", code, out)
	}
	if code, _ := r.do("GET", "/v1/discovery-rules/"+id+"/runs", "", nil); code != 404 {
		t.Fatalf("runs of a deleted rule: %d, want 404", code)
	}
	if runs := r.runs("/v1/discovery-runs"); len(runs) != 0 {
		t.Fatalf("runs left after the rule was deleted: %+v", runs)
	}
	if code, _ := r.do("DELETE", "/v1/discovery-rules/"+id, "", nil); code != 404 {
		t.Fatalf("second delete: %d, want 404", code)
	}
}
