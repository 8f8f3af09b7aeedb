package bacnet

import (
	"context"
	"encoding/json"
	"errors"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/runner"
)

func f64(v float64) *float64 { return &v }

// testEndpoint reads every object of device.js, one property other than
// present-value and one object the device does not have.
func testEndpoint(d *device, extra string) adapters.Endpoint {
	type dp = adapters.DataPoint
	return adapters.Endpoint{
		UUID: "6f1e0000-0000-4000-8000-00000000bac0", Name: "ahu-1", Protocol: Protocol,
		Connection: d.connection(extra), PollIntervalMS: 200, Enabled: true,
		DataPoints: []dp{
			{Name: "zone_temp", Register: "analog-input:1"},
			{Name: "setpoint", Register: "analog-value:2"},
			{Name: "setpoint_scaled", Register: "av:2", Scale: f64(10), Unit: "permille"},
			{Name: "fan", Register: "binary-input:3"},
			{Name: "mode", Register: "multi-state-value:4"},
			{Name: "broken", Register: "analog-input:5"},
			{Name: "maintenance", Register: "binary-value:6"},
			{Name: "valve", Register: "analog-output:7"},
			{Name: "zone_name", Register: "ai:1/object-name"},
			{Name: "missing", Register: "analog-input:99"},
		},
	}
}

func newAdapter(t *testing.T, ep adapters.Endpoint) *Adapter {
	t.Helper()
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

// connected builds the adapter of testEndpoint(d, extra) and connects it.
func connected(t *testing.T, d *device, extra string) *Adapter {
	t.Helper()
	a := newAdapter(t, testEndpoint(d, extra))
	if err := a.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	return a
}

func mustPoll(t *testing.T, a *Adapter) []adapters.Reading {
	t.Helper()
	rs, err := a.Poll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func byMetric(rs []adapters.Reading) map[string]adapters.Reading {
	m := make(map[string]adapters.Reading, len(rs))
	for _, r := range rs {
		m[r.Metric] = r
	}
	return m
}

// checkReadings asserts the values, Go types, units and qualities of
// device.js's objects as testEndpoint reads them.
func checkReadings(t *testing.T, rs []adapters.Reading) {
	t.Helper()
	m := byMetric(rs)
	good := []struct {
		metric string
		value  any
		unit   string
	}{
		{"zone_temp", 21.5, "degC"},
		{"setpoint", 20.0, "percent"},
		{"setpoint_scaled", 200.0, "permille"},
		{"fan", true, ""},
		{"mode", uint64(2), ""},
		{"valve", 35.0, "percent"},
		{"zone_name", "zone-temp", ""},
	}
	for _, w := range good {
		r := m[w.metric]
		if r.Quality != adapters.Good || r.Value != w.value || r.Unit != w.unit {
			t.Errorf("%s = %+v (%T), want %v (%T) %q GOOD", w.metric, r, r.Value, w.value, w.value, w.unit)
		}
	}
	bad := map[string]string{
		"broken":      adapters.CodeDeviceFault,  // reliability over-range, fault flag
		"maintenance": adapters.CodeOutOfService, // out-of-service
		"missing":     adapters.CodeReadError,    // unknown-object
	}
	for metric, code := range bad {
		if r := m[metric]; r.Quality != adapters.Bad || r.QualityCode != code || r.Value != nil {
			t.Errorf("%s = %+v, want BAD %s", metric, r, code)
		}
	}
	if r := m["zone_temp"]; r.DeviceName != "ahu-1" || r.DeviceID == "" || r.Timestamp.IsZero() {
		t.Errorf("identity of zone_temp = %+v", r)
	}
}

func TestPollIntegration(t *testing.T) {
	d := startDevice(t)
	base := runtime.NumGoroutine()
	a := connected(t, d, "")
	checkReadings(t, mustPoll(t, a))

	diag := a.Diagnostics().(Diagnostics)
	// Seven objects (ai:1 twice, av:2 twice) fit one request at 1476 bytes.
	if diag.LastPollRPM != 1 || diag.LastPollRP != 0 || diag.PlannedRequests != 1 || diag.Objects != 8 || diag.RPMRefused {
		t.Errorf("diagnostics = %+v", diag)
	}
	if diag.IAm == nil || diag.IAm.VendorID != 999 || diag.IAm.Segmentation != "no-segmentation" || diag.IAm.MaxAPDU < 1476 {
		t.Errorf("I-Am = %+v", diag.IAm)
	}
	if diag.DeviceMaxAPDU != 1476 || diag.MaxAPDU != 1476 || !diag.Connected {
		t.Errorf("max APDU / connected = %+v", diag)
	}
	if !strings.Contains(diag.LastError, "broken") && !strings.Contains(diag.LastError, "maintenance") && !strings.Contains(diag.LastError, "missing") {
		t.Errorf("last error %q names no BAD point", diag.LastError)
	}
	if diag.BadPoints["broken"] != adapters.CodeDeviceFault || len(diag.BadPoints) != 3 {
		t.Errorf("bad points = %v", diag.BadPoints)
	}
	// The device saw: Who-Is, one ReadProperty (max-apdu at connect), one
	// RPM for the units, one RPM for the poll.
	if n := d.requests("rpm"); n != 2 {
		t.Errorf("device saw %d RPM requests, want 2", n)
	}
	if n := d.requests("rp"); n != 1 {
		t.Errorf("device saw %d RP requests, want 1", n)
	}
	if n := d.requests("whois"); n != 1 {
		t.Errorf("device saw %d Who-Is, want 1", n)
	}
	if _, err := json.Marshal(diag); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	checkGoroutines(t, base)
}

// A small maxApdu spreads a poll over several RPM requests, none of whose
// answers needs segmentation.
func TestPollSmallAPDUIntegration(t *testing.T) {
	d := startDevice(t)
	a := connected(t, d, `,"maxApdu":128`)
	checkReadings(t, mustPoll(t, a))
	diag := a.Diagnostics().(Diagnostics)
	if diag.MaxAPDU != 128 || diag.LastPollRPM < 3 || diag.LastPollRPM != diag.PlannedRequests || diag.LastPollRP != 0 {
		t.Errorf("diagnostics = %+v", diag)
	}
	t.Logf("maxApdu 128: %d RPM requests per poll", diag.LastPollRPM)
}

func TestRPMRefusedIntegration(t *testing.T) {
	for _, mode := range []string{"reject", "error"} {
		t.Run(mode, func(t *testing.T) {
			d := startDevice(t, "--rpm", mode)
			a := connected(t, d, "")
			ctx := context.Background()
			// The units read at connect met the refusal already.
			if n := d.requests("rpm"); n != 1 {
				t.Fatalf("device saw %d RPM requests at connect, want 1", n)
			}
			for range 2 {
				checkReadings(t, mustPoll(t, a))
			}
			diag := a.Diagnostics().(Diagnostics)
			if !diag.RPMRefused || diag.LastPollRPM != 0 || diag.LastPollRP == 0 {
				t.Errorf("diagnostics = %+v", diag)
			}
			// No RPM after the refusal, reconnects included.
			if err := a.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := a.Poll(ctx); err != nil {
				t.Fatal(err)
			}
			if n := d.requests("rpm"); n != 1 {
				t.Errorf("device saw %d RPM requests, want the one refused", n)
			}
			t.Logf("ReadProperty mode: %d requests per poll", diag.LastPollRP)
		})
	}
}

func TestUsePropertyMultipleOffIntegration(t *testing.T) {
	d := startDevice(t)
	a := connected(t, d, `,"usePropertyMultiple":false`)
	checkReadings(t, mustPoll(t, a))
	first := a.Diagnostics().(Diagnostics).LastPollRP
	mustPoll(t, a)
	// analog-output:7 has no reliability: asked once, then remembered.
	if second := a.Diagnostics().(Diagnostics).LastPollRP; second != first-1 {
		t.Errorf("ReadProperty requests: %d then %d, want one fewer", first, second)
	}
	if n := d.requests("rpm"); n != 0 {
		t.Errorf("device saw %d RPM requests", n)
	}
}

func TestWriteIntegration(t *testing.T) {
	d := startDevice(t)
	a := connected(t, d, "")
	ctx := context.Background()
	write := func(register string, value any) any {
		t.Helper()
		got, err := a.Write(ctx, register, value)
		if err != nil {
			t.Fatalf("Write(%s, %v): %v", register, value, err)
		}
		return got
	}
	poll := func(metric string) any {
		t.Helper()
		return byMetric(mustPoll(t, a))[metric].Value
	}
	// Priority 16 by default; the value the device holds comes back.
	if got := write("setpoint", json.Number("42.5")); got != 42.5 {
		t.Errorf("write setpoint = %v", got)
	}
	if v := poll("setpoint"); v != 42.5 {
		t.Errorf("setpoint after write = %v", v)
	}
	// Priority 8 from the body overrides; relinquishing it falls back to
	// the value at 16.
	if got := write("setpoint", map[string]any{"value": json.Number("50"), "priority": json.Number("8")}); got != 50.0 {
		t.Errorf("write at 8 = %v", got)
	}
	if got := write("analog-value:2", map[string]any{"value": 7.0}); got != 50.0 {
		t.Errorf("write at 16 under 8 = %v, want the value at 8", got)
	}
	if got := write("analog-value:2@8", map[string]any{"value": nil}); got != 7.0 {
		t.Errorf("relinquish 8 = %v", got)
	}
	// The data point's scale is divided out.
	if got := write("setpoint_scaled", 300.0); got != 300.0 {
		t.Errorf("scaled write = %v", got)
	}
	if v := poll("setpoint"); v != 30.0 {
		t.Errorf("setpoint after scaled write = %v", v)
	}
	if got := write("mode", json.Number("3")); got != uint64(3) {
		t.Errorf("write mode = %v (%T)", got, got)
	}
	if got := write("binary-value:6", true); got != true {
		t.Errorf("write bv = %v", got)
	}
	priorities := d.lines("wp")
	if len(priorities) != 7 || !strings.HasSuffix(priorities[0], "@16") || !strings.HasSuffix(priorities[1], "@8") || !strings.Contains(priorities[3], "[null] @8") {
		t.Errorf("device saw writes %q", priorities)
	}

	// Wrong JSON types are field errors on value, before any I/O.
	for _, tc := range []struct {
		register string
		value    any
	}{
		{"fan", json.Number("1")},
		{"setpoint", "hot"},
		{"mode", json.Number("1.5")},
		{"mode", json.Number("0")},
		{"setpoint", map[string]any{"value": 1.0, "priority": json.Number("17")}},
		{"setpoint", map[string]any{"valeu": 1.0}},
		{"setpoint", 1e39},
	} {
		_, err := a.Write(ctx, tc.register, tc.value)
		var fe *adapters.FieldError
		if !errors.As(err, &fe) || fe.Field != "value" {
			t.Errorf("Write(%s, %v) = %v, want a field error on value", tc.register, tc.value, err)
		}
	}
	for _, register := range []string{"zone_name", "nope", "analog-value:2/units", "device:1"} {
		_, err := a.Write(ctx, register, 1.0)
		var fe *adapters.FieldError
		if !errors.As(err, &fe) || fe.Field != "register" {
			t.Errorf("Write(%s) = %v, want a field error on register", register, err)
		}
	}
	// The device refuses: an input in service, a state it does not have.
	for _, tc := range []struct {
		register string
		value    any
		want     string
	}{
		{"zone_temp", 1.0, "write-access-denied"},
		{"mode", json.Number("9"), "value-out-of-range"},
	} {
		_, err := a.Write(ctx, tc.register, tc.value)
		if err == nil || !strings.Contains(err.Error(), tc.want) || adapters.Classify(err) != adapters.CodeReadError {
			t.Errorf("Write(%s, %v) = %v, want %s", tc.register, tc.value, err, tc.want)
		}
	}
	if w := a.Diagnostics().(Diagnostics).Writes; w != 9 {
		t.Errorf("diagnostics writes = %d, want 9", w)
	}
}

// collector is a runner.Output keeping every reading.
type collector struct {
	mu       sync.Mutex
	readings []adapters.Reading
}

func (c *collector) Readings(_ context.Context, _ adapters.Endpoint, rs []adapters.Reading) {
	c.mu.Lock()
	c.readings = append(c.readings, rs...)
	c.mu.Unlock()
}
func (c *collector) Disconnected(context.Context, adapters.Endpoint) {}
func (c *collector) Stopped(adapters.Endpoint)                       {}

// since returns the readings of metric from index i on.
func (c *collector) last(metric string) (adapters.Reading, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := len(c.readings) - 1; i >= 0; i-- {
		if c.readings[i].Metric == metric {
			return c.readings[i], len(c.readings)
		}
	}
	return adapters.Reading{}, len(c.readings)
}

// The runner drives the adapter through an outage: readings turn BAD with
// the code Classify gives a device that stopped answering, and GOOD again
// once the device is back on the same port.
func TestOutageIntegration(t *testing.T) {
	d := startDevice(t)
	out := &collector{}
	r := runner.New([]adapters.Driver{Driver{}}, out, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r.Start(ctx)
	t.Cleanup(r.StopAll)
	ep := testEndpoint(d, `,"timeoutMs":300`)
	if err := r.Apply(ep); err != nil {
		t.Fatal(err)
	}
	isGood := func() bool {
		rd, _ := out.last("zone_temp")
		return rd.Quality == adapters.Good && rd.Value == 21.5
	}
	coretest.Eventually(t, 10*time.Second, "GOOD readings", isGood)

	d.Stop()
	coretest.Eventually(t, 10*time.Second, "BAD readings after the device died", func() bool {
		rd, _ := out.last("zone_temp")
		return rd.Quality == adapters.Bad
	})
	rd, _ := out.last("zone_temp")
	if rd.QualityCode != adapters.CodeTimeout || rd.Value != nil {
		t.Errorf("reading during the outage = %+v, want BAD TIMEOUT", rd)
	}
	// The runner records the lost connection right after delivering the
	// poll's BAD readings.
	coretest.Eventually(t, 10*time.Second, "health to show the outage", func() bool {
		h, ok := r.Health(ep.UUID)
		return ok && !h.Connected && strings.HasPrefix(h.LastError, adapters.CodeTimeout)
	})

	d.Start()
	coretest.Eventually(t, 40*time.Second, "GOOD readings after the restart", isGood)
	dev, err := r.Device(Protocol, ep.Name)
	if err != nil {
		t.Fatal(err)
	}
	if diag, ok := dev.Diagnostics.(Diagnostics); !ok || !diag.Connected || diag.TotalErrors == 0 {
		t.Errorf("diagnostics after recovery = %+v", dev.Diagnostics)
	}
}

func TestForeignDeviceIntegration(t *testing.T) {
	// device.js doubles as the BBMD, so the registration and the device's
	// traffic come from one peer.
	d := startDevice(t, "--bbmd")
	extra := `,"bbmd":{"host":"127.0.0.1","port":` + itoa(d.port) + `,"ttlSeconds":10}`
	a := newAdapter(t, testEndpoint(d, extra))
	ctx := context.Background()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if regs := d.lines("register"); len(regs) != 1 || !strings.HasPrefix(regs[0], "REQ register 10 ") {
		t.Fatalf("registrations = %q", regs)
	}
	diag := a.Diagnostics().(Diagnostics)
	if !diag.ForeignDevice || diag.BBMD == "" {
		t.Errorf("diagnostics = %+v", diag)
	}
	// Re-registration at ttl/2 = 5 s.
	coretest.Eventually(t, 15*time.Second, "a re-registration", func() bool { return d.requests("register") >= 2 })
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	n := d.requests("register")
	time.Sleep(6 * time.Second)
	if m := d.requests("register"); m != n {
		t.Errorf("%d registrations after Close", m-n)
	}
}

func TestConnectRefusedIntegration(t *testing.T) {
	// Nothing listens on the device's port: no answer, TIMEOUT.
	if testing.Short() {
		t.Skip("integration test; skipped with -short")
	}
	ep := adapters.Endpoint{
		Name: "ghost", Protocol: Protocol,
		Connection: []byte(`{"host":"127.0.0.1","port":` + itoa(coretest.FreeUDPPort(t)) + `,"deviceInstance":1,"timeoutMs":200}`),
		DataPoints: []adapters.DataPoint{{Name: "t", Register: "ai:1"}},
	}
	a := newAdapter(t, ep)
	err := a.Connect(context.Background())
	if code := adapters.Classify(err); code != adapters.CodeTimeout {
		t.Fatalf("Connect = %v (%s), want TIMEOUT", err, code)
	}
	rs, err := a.Poll(context.Background())
	if err == nil || len(rs) != 1 || rs[0].Quality != adapters.Bad || rs[0].QualityCode != adapters.CodeTimeout {
		t.Fatalf("Poll after failed connect = %+v, %v", rs, err)
	}
}

// checkGoroutines waits for the goroutine count to settle back to at most
// base, proving Close ended the client's goroutines.
func checkGoroutines(t *testing.T, base int) {
	t.Helper()
	coretest.Eventually(t, 5*time.Second, "the adapter's goroutines to end", func() bool {
		return runtime.NumGoroutine() <= base
	})
}
