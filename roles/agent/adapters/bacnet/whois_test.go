package bacnet

import (
	"context"
	"strings"
	"testing"
	"time"
)

// wantObjects are device.js's objects as WhoIs reports them.
var wantObjects = []DiscoveredObject{
	{Type: "analog-input", Instance: 1, Name: "zone-temp", Register: "analog-input:1"},
	{Type: "analog-value", Instance: 2, Name: "setpoint", Register: "analog-value:2"},
	{Type: "binary-input", Instance: 3, Name: "fan-status", Register: "binary-input:3"},
	{Type: "multi-state-value", Instance: 4, Name: "mode", Register: "multi-state-value:4"},
	{Type: "analog-input", Instance: 5, Name: "broken-sensor", Register: "analog-input:5"},
	{Type: "binary-value", Instance: 6, Name: "maintenance", Register: "binary-value:6"},
	{Type: "analog-output", Instance: 7, Name: "valve", Register: "analog-output:7"},
}

func checkDiscovered(t *testing.T, d *device, got []DiscoveredDevice, maxObjects int) {
	t.Helper()
	if len(got) != 1 {
		t.Fatalf("found %d devices: %+v", len(got), got)
	}
	g := got[0]
	if g.Instance != 1234 || g.Address != "127.0.0.1:"+itoa(d.port) || g.VendorID != 999 || g.Segmentation != "no-segmentation" ||
		g.Name != "edgeplat-test-device" || g.Error != "" {
		t.Errorf("device = %+v", g)
	}
	want := wantObjects
	// The device object itself is the first entry of the list; MaxObjects
	// counts it.
	if maxObjects > 0 && maxObjects-1 < len(want) {
		want = want[:maxObjects-1]
	}
	if len(g.Objects) != len(want) || g.Truncated != (len(want) < len(wantObjects)) {
		t.Fatalf("objects = %+v (truncated %v)", g.Objects, g.Truncated)
	}
	for i := range want {
		if g.Objects[i] != want[i] {
			t.Errorf("object %d = %+v, want %+v", i, g.Objects[i], want[i])
		}
	}
}

func TestWhoIsIntegration(t *testing.T) {
	d := startDevice(t)
	ctx := context.Background()
	opts := WhoIsOptions{Target: "127.0.0.1:" + itoa(d.port), Window: 500 * time.Millisecond, RequestsPerSecond: 200}
	got, err := WhoIs(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	checkDiscovered(t, d, got, 0)
	// The whole object-list in one read, the eight names in one RPM.
	if rp, rpm := d.requests("rp"), d.requests("rpm"); rp != 1 || rpm != 1 {
		t.Errorf("device saw %d RP and %d RPM requests, want 1 and 1", rp, rpm)
	}

	// An instance range without the device finds nothing.
	got, err = WhoIs(ctx, WhoIsOptions{Target: opts.Target, Window: 300 * time.Millisecond, Low: 1, High: 1000})
	if err != nil || len(got) != 0 {
		t.Fatalf("range 1..1000 found %+v, %v", got, err)
	}
	if l := d.lines("whois"); len(l) != 2 || !strings.HasPrefix(l[0], "REQ whois - - ") || !strings.HasPrefix(l[1], "REQ whois 1 1000 ") {
		t.Errorf("who-is lines %q", l)
	}

	// I-Ams only.
	got, err = WhoIs(ctx, WhoIsOptions{Target: opts.Target, Window: 300 * time.Millisecond, SkipObjects: true, Low: 1234, High: 1234})
	if err != nil || len(got) != 1 || got[0].Objects != nil || got[0].Name != "" {
		t.Fatalf("skip objects: %+v, %v", got, err)
	}
}

// A list too long for one unsegmented answer is read element by element;
// MaxObjects stops early.
func TestWhoIsObjectListByIndexIntegration(t *testing.T) {
	d := startDevice(t, "--segment-object-list", "--rpm", "reject")
	opts := WhoIsOptions{Target: "127.0.0.1:" + itoa(d.port), Window: 500 * time.Millisecond, RequestsPerSecond: 200, MaxObjects: 5}
	got, err := WhoIs(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	checkDiscovered(t, d, got, 5)
	// Whole list (aborted), length, five elements; one RPM (rejected),
	// then five names one by one.
	if rp := d.lines("rp"); len(rp) != 1+1+5+5 || !strings.HasSuffix(rp[1], "76[0]") || !strings.HasSuffix(rp[6], "76[5]") {
		t.Errorf("device saw %q", rp)
	}
}

// Broadcasts reach the device as an Original-Broadcast-NPDU to the given
// address, or as a Distribute-Broadcast-To-Network through the BBMD.
func TestWhoIsBroadcastIntegration(t *testing.T) {
	d := startDevice(t, "--bbmd")
	addr := "127.0.0.1:" + itoa(d.port)
	for _, opts := range []WhoIsOptions{
		{BroadcastAddress: addr},
		{BBMD: &BBMD{Host: "127.0.0.1", Port: d.port}},
	} {
		opts.Window, opts.RequestsPerSecond = 500*time.Millisecond, 200
		got, err := WhoIs(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		checkDiscovered(t, d, got, 0)
	}
	if regs := d.lines("register"); len(regs) != 1 || !strings.HasPrefix(regs[0], "REQ register 300 ") {
		t.Errorf("registrations %q", regs)
	}
}

func TestWhoIsOptions(t *testing.T) {
	for _, o := range []WhoIsOptions{{Low: -1}, {Low: 5, High: 4}, {High: 4194303}, {LocalPort: 70000}} {
		if _, err := WhoIs(context.Background(), o); err == nil {
			t.Errorf("WhoIs(%+v) accepted", o)
		}
	}
	o, err := WhoIsOptions{BBMD: &BBMD{Host: "b"}}.withDefaults()
	if err != nil || o.Window != DefaultWhoIsWindow || o.RequestsPerSecond != DefaultRequestsPerSecond || o.MaxObjects != DefaultMaxObjects ||
		o.BBMD.Port != DefaultPort || o.BBMD.TTLSeconds != defaultTTLSeconds {
		t.Fatalf("defaults = %+v, %v", o, err)
	}
	if _, err := WhoIs(context.Background(), WhoIsOptions{Target: "127.0.0.1:99999"}); err == nil {
		t.Error("accepted port 99999")
	}
}

// The limiter books one slot per request, every 1/rate apart, whatever the
// clock says; a request after a pause goes at once.
func TestLimiter(t *testing.T) {
	l := newLimiter(10) // every 100 ms
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		wait time.Duration
	}{
		{0, 0},
		{0, 100 * time.Millisecond},
		{0, 200 * time.Millisecond},
		{50 * time.Millisecond, 250 * time.Millisecond},
		{time.Second, 0},
		{time.Second + 10*time.Millisecond, 90 * time.Millisecond},
	}
	for i, s := range steps {
		if got := l.reserve(t0.Add(s.at)); got != s.wait {
			t.Errorf("step %d: wait %s, want %s", i, got, s.wait)
		}
	}
	var none *limiter
	if err := none.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	slow := newLimiter(0.001)
	slow.reserve(time.Now())
	if err := slow.wait(ctx); err == nil {
		t.Fatal("wait ignored a cancelled context")
	}
}
