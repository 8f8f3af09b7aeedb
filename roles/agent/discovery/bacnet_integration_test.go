package discovery

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet"
)

// startBACnetDevice runs the BACnet adapter's test device (device.js on
// @bacnet-js/client, a third-party BACnet stack) on a free UDP port of
// 127.0.0.1 with device instance 1234.
func startBACnetDevice(t *testing.T) int {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	node, mods := coretest.NodePackage(t, "@bacnet-js/client")
	port := coretest.FreeUDPPort(t)
	d := coretest.NewProcess(t, node, "../adapters/bacnet/testdata/device.js", "--port", strconv.Itoa(port), "--device", "1234")
	d.Env = []string{"NODE_PATH=" + mods}
	d.Ready = func() error {
		if !strings.Contains(d.Output(), "READY ") {
			return fmt.Errorf("no READY line yet")
		}
		return nil
	}
	d.Start()
	return port
}

// TestBACnetScanFindsTheDevice: a Who-Is to the device's address finds
// instance 1234 with its objects as data point addresses, an endpoint
// with that instance covers it, and validation asks it again.
func TestBACnetScanFindsTheDevice(t *testing.T) {
	port := startBACnetDevice(t)
	s := BACnetScanner{}
	p, err := s.Plan(json.RawMessage(fmt.Sprintf(`{"target":"127.0.0.1:%d","windowMs":1000}`, port)), nil)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := p.Scan(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(devs) != 1 || devs[0].Identity != "bacnet:1234" || devs[0].Protocol != "bacnet" {
		t.Fatalf("found %+v, want device instance 1234", devs)
	}
	var conn struct {
		Host           string `json:"host"`
		Port           int    `json:"port"`
		DeviceInstance int    `json:"deviceInstance"`
	}
	if err := json.Unmarshal(devs[0].Connection, &conn); err != nil || conn.Host != "127.0.0.1" || conn.Port != port || conn.DeviceInstance != 1234 {
		t.Fatalf("connection %s (%v)", devs[0].Connection, err)
	}
	objs, _ := devs[0].Details["objects"].([]bacnet.DiscoveredObject)
	registers := 0
	for _, o := range objs {
		if o.Register != "" {
			registers++
		}
	}
	if registers == 0 {
		t.Fatalf("no readable objects in %+v", devs[0].Details)
	}
	if !s.Covers(json.RawMessage(`{"host":"10.1.2.3","deviceInstance":1234}`), devs[0]) || s.Covers(json.RawMessage(`{"host":"127.0.0.1","deviceInstance":99}`), devs[0]) {
		t.Fatal("Covers does not go by device instance")
	}
	p.Validate(t.Context(), devs)
	if !devs[0].Validated {
		t.Fatal("the device did not answer the validating Who-Is")
	}
	t.Logf("found %s (%s) with %d readable objects", devs[0].Name, devs[0].Identity, registers)
}

func TestBACnetPlanOptions(t *testing.T) {
	tests := []struct{ options, field string }{
		{`{}`, ""},
		{`{"target":"10.0.0.5"}`, ""},
		{`{"bbmd":{"host":"10.0.0.1"}}`, ""},
		{`{"target":":47808"}`, "target"},
		{`{"broadcastAddress":"10.0.0.255:70000"}`, "broadcastAddress"},
		{`{"bbmd":{"port":47808}}`, "bbmd.host"},
		{`{"low":10,"high":5}`, "low"},
		{`{"windowMs":50}`, "windowMs"},
		{`{"timeoutMs":60000}`, "timeoutMs"},
		{`{"requestsPerSecond":1000}`, "requestsPerSecond"},
		{`{"maxDevices":5000}`, "maxDevices"},
		{`{"colour":1}`, "colour"},
	}
	for _, tt := range tests {
		t.Run(tt.options, func(t *testing.T) {
			_, err := BACnetScanner{}.Plan(json.RawMessage(tt.options), nil)
			got := adapters.FieldsOf(err)
			if tt.field == "" && err != nil || tt.field != "" && (len(got) != 1 || got[0] != tt.field) {
				t.Fatalf("Plan(%s) = %v (fields %v), want field %q", tt.options, err, got, tt.field)
			}
		})
	}
}
