package discovery

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

const pymodbusServer = "../adapters/modbus/testdata/server.py"

// startUnits runs the Modbus test server on a free port serving only
// unit (holding register 0 = value).
func startUnits(t *testing.T, unit, value int) int {
	t.Helper()
	layout := filepath.Join(t.TempDir(), "layout.json")
	if err := os.WriteFile(layout, fmt.Appendf(nil, `{"units":{"%d":{"hr":{"0":%d}}}}`, unit, value), 0o600); err != nil {
		t.Fatal(err)
	}
	port := coretest.FreePort(t)
	coretest.Pymodbus(t, pymodbusServer, port, "--layout", layout)
	return port
}

// TestModbusScanIntegration: two servers on different ports with
// different unit ids are found exactly (a unit a server does not have
// answers exception 11, which proves nothing), on a closed port nothing
// is, and validation reads each once more.
func TestModbusScanIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: starts Modbus servers")
	}
	pa, pb := startUnits(t, 3, 4242), startUnits(t, 7, 77)
	closed := coretest.FreePort(t)
	var mu sync.Mutex
	probes := 0
	sc := ModbusScanner{Probe: func(string, int) { mu.Lock(); probes++; mu.Unlock() }}
	pl, err := sc.Plan(json.RawMessage(fmt.Sprintf(`{"hosts":["127.0.0.1"],"ports":[%d,%d,%d],"unitIds":[1,3,7],"timeoutMs":1000}`, pa, pb, closed)), nil)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := pl.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range devs {
		got = append(got, fmt.Sprintf("%s %s %v", d.Name, d.Connection, d.Details))
	}
	want := []string{
		fmt.Sprintf(`modbus-127.0.0.1-%d-unit3 {"host":"127.0.0.1","port":%d,"unitId":3} map[holdingRegister0:4242]`, pa, pa),
		fmt.Sprintf(`modbus-127.0.0.1-%d-unit7 {"host":"127.0.0.1","port":%d,"unitId":7} map[holdingRegister0:77]`, pb, pb),
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("found\n%v\nwant\n%v", got, want)
	}
	// 3 connects, 3 reads on each of the 2 open ports.
	if probes != 3+2*3 {
		t.Fatalf("%d probes, want 9", probes)
	}
	pl.Validate(context.Background(), devs)
	for _, d := range devs {
		if !d.Validated {
			t.Fatalf("%s not validated", d.Name)
		}
	}
}

// TestModbusLoopbackSweepIntegration: a /24 of loopback on a closed port
// is 256 connects and nothing more, at most the documented rate, and the
// scan ends well within MaxScanDuration.
func TestModbusLoopbackSweepIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 256 connects")
	}
	closed := coretest.FreePort(t)
	const rate = 200
	var mu sync.Mutex
	var addrs []string
	sc := ModbusScanner{Probe: func(addr string, unit int) {
		mu.Lock()
		defer mu.Unlock()
		if unit >= 0 {
			t.Errorf("unit %d read on a closed port %s", unit, addr)
		}
		addrs = append(addrs, addr)
	}}
	pl, err := sc.Plan(json.RawMessage(fmt.Sprintf(`{"network":"127.0.0.0/24","ports":[%d],"rate":%d}`, closed, rate)), nil)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	devs, err := pl.Scan(context.Background())
	elapsed := time.Since(start)
	if err != nil || len(devs) != 0 {
		t.Fatalf("scan = %v, %v", devs, err)
	}
	if len(addrs) != ModbusMaxAddresses || len(uniq(addrs)) != ModbusMaxAddresses {
		t.Fatalf("%d probes of %d addresses, want %d", len(addrs), len(uniq(addrs)), ModbusMaxAddresses)
	}
	// The limiter spaces probe starts 1/rate apart, so n probes need at
	// least (n-1)/rate; more probes in less time would break the rate.
	if minimum := time.Duration(len(addrs)-1) * time.Second / rate; elapsed < minimum {
		t.Fatalf("%d probes in %v: faster than %d per second", len(addrs), elapsed, rate)
	}
	t.Logf("%d probes in %v at rate %d", len(addrs), elapsed, rate)
}

// TestScanCancelled: a scan ends when its context does, with what it
// found so far.
func TestScanCancelled(t *testing.T) {
	if _, err := (ModbusScanner{}).Plan(json.RawMessage(`{"network":"127.0.0.0/24","ports":[1],"rate":1}`), nil); err == nil {
		t.Fatal("rate 1 for 256 connects should be refused as longer than a scan may take")
	}
	pl, err := ModbusScanner{}.Plan(json.RawMessage(`{"network":"127.0.0.0/25","ports":[1],"rate":2}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := pl.Scan(ctx); err != context.Canceled {
		t.Fatalf("cancelled scan: %v", err)
	}
}
