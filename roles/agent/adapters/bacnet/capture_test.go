package bacnet

import (
	"encoding/hex"
	"flag"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

var update = flag.Bool("update", false, "rewrite wire/testdata/*.hex from the frames device.js sends")

// capture sends one datagram to the device from a socket of its own and
// returns the device's answer, raw.
func capture(t *testing.T, d *device, frame []byte) []byte {
	t.Helper()
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.WriteToUDP(frame, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: d.port}); err != nil {
		t.Fatal(err)
	}
	if err := c.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.MaxFrame)
	n, err := c.Read(buf)
	if err != nil {
		t.Fatalf("no answer from device.js: %v", err)
	}
	return buf[:n]
}

func confirmed(invokeID, service uint8, payload []byte) []byte {
	return wire.AppendBVLC(nil, wire.BVLCOriginalUnicastNPDU,
		wire.AppendNPDU(nil, true, wire.AppendConfirmedRequest(nil, invokeID, service, 1476, payload)))
}

// TestCaptureFramesIntegration asks device.js, a third-party stack, for
// one answer of each kind and compares it with the golden frames the
// codec's tests decode (wire/golden_test.go). With -update it rewrites
// them.
func TestCaptureFramesIntegration(t *testing.T) {
	d := startDevice(t)
	rejecting := startDevice(t, "--rpm", "reject")
	pv := wire.PropertyRef{ID: wire.PropPresentValue, Index: wire.ArrayAll}
	ref := func(p wire.PropertyID) wire.PropertyRef { return wire.PropertyRef{ID: p, Index: wire.ArrayAll} }
	ai1 := wire.ObjectID{Type: wire.AnalogInput, Instance: 1}
	rpm := wire.AppendReadPropertyMultiple(nil, []wire.ReadAccessSpec{
		{Object: ai1, Props: []wire.PropertyRef{pv, ref(wire.PropStatusFlags), ref(wire.PropReliability), ref(wire.PropUnits)}},
		{Object: wire.ObjectID{Type: wire.AnalogOutput, Instance: 7}, Props: []wire.PropertyRef{pv, ref(wire.PropReliability)}},
		{Object: wire.ObjectID{Type: wire.AnalogInput, Instance: 99}, Props: []wire.PropertyRef{pv}},
	})
	write, err := wire.AppendWriteProperty(nil, wire.ObjectID{Type: wire.AnalogValue, Instance: 2}, pv, float32(25), 10)
	if err != nil {
		t.Fatal(err)
	}
	frames := []struct {
		file   string
		dev    *device
		send   []byte
		expect string // the answer's BVLC, NPDU and APDU header, as a check
	}{
		{"iam.hex", d, wire.AppendBVLC(nil, wire.BVLCOriginalUnicastNPDU,
			wire.AppendNPDU(nil, false, wire.AppendUnconfirmedRequest(nil, wire.ServiceWhoIs, wire.AppendWhoIs(nil, 1234, 1234)))), "1000"},
		{"rp-ack.hex", d, confirmed(1, wire.ServiceReadProperty, wire.AppendReadProperty(nil, ai1, pv)), "30010c"},
		{"rp-object-list.hex", d, confirmed(2, wire.ServiceReadProperty,
			wire.AppendReadProperty(nil, wire.ObjectID{Type: wire.Device, Instance: 1234}, ref(wire.PropObjectList))), "30020c"},
		{"rpm-ack.hex", d, confirmed(3, wire.ServiceReadPropertyMultiple, rpm), "30030e"},
		{"error.hex", d, confirmed(4, wire.ServiceReadProperty,
			wire.AppendReadProperty(nil, wire.ObjectID{Type: wire.AnalogInput, Instance: 99}, pv)), "50040c"},
		{"simple-ack.hex", d, confirmed(5, wire.ServiceWriteProperty, write), "20050f"},
		{"reject.hex", rejecting, confirmed(6, wire.ServiceReadPropertyMultiple, rpm), "600609"},
	}
	for _, f := range frames {
		got := capture(t, f.dev, f.send)
		m, err := wire.Decode(got)
		if err != nil || !m.HasAPDU || !strings.HasPrefix(hex.EncodeToString(m.NPDU.APDU), f.expect) {
			t.Errorf("%s: answer % x does not start its APDU with %s: %v", f.file, got, f.expect, err)
			continue
		}
		path := filepath.Join("wire", "testdata", f.file)
		if *update {
			if err := os.WriteFile(path, []byte(hex.EncodeToString(got)+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run with -update to capture)", err)
		}
		if g := hex.EncodeToString(got); g != strings.TrimSpace(string(want)) {
			t.Errorf("%s: device.js now answers\n%s\nthe golden frame is\n%s", f.file, g, want)
		}
	}
}
