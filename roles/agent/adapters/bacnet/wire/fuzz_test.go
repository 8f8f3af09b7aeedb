package wire

import (
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// seedFrames adds the captured frames of testdata/*.hex to f's corpus.
func seedFrames(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.hex"))
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(unhex(f, strings.TrimSpace(string(b))))
	}
}

// FuzzDecode feeds datagrams through the whole receive path: BVLC, NPDU,
// APDU header and the service decoder the APDU selects. None may panic,
// and the decoders' output is bounded by their input.
func FuzzDecode(f *testing.F) {
	seedFrames(f)
	f.Add(AppendBVLC(nil, BVLCOriginalUnicastNPDU, AppendNPDU(nil, false, AppendComplexAck(nil, 1, ServiceReadPropertyMultiple,
		AppendReadPropertyMultiple(nil, []ReadAccessSpec{{Object: ObjectID{Type: AnalogInput, Instance: 1}, Props: []PropertyRef{{ID: PropPresentValue, Index: ArrayAll}}}})))))
	f.Add(AppendResult(nil, ResultRegisterForeignDeviceNAK))
	f.Add(AppendForwarded(nil, netipZero, AppendNPDU(nil, false, AppendUnconfirmedRequest(nil, ServiceIAm, AppendIAm(nil, IAm{Device: ObjectID{Type: Device, Instance: 9}, MaxAPDU: 1476})))))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil || !m.HasAPDU {
			return
		}
		p := m.APDU.Payload
		if len(p) > len(b) {
			t.Fatalf("payload of %d bytes from %d", len(p), len(b))
		}
		_ = m.APDU.AnswerError()
		switch {
		case m.APDU.Type == PDUUnconfirmedRequest && m.APDU.Service == ServiceIAm:
			_, _ = DecodeIAm(p)
		case m.APDU.Type == PDUUnconfirmedRequest && m.APDU.Service == ServiceWhoIs:
			_, _, _, _ = DecodeWhoIs(p)
		case m.APDU.Type == PDUComplexAck && m.APDU.Service == ServiceReadProperty:
			if pv, err := DecodeReadPropertyAck(p); err == nil && len(pv.Values) > len(p) {
				t.Fatalf("%d values from %d bytes", len(pv.Values), len(p))
			}
		case m.APDU.Type == PDUComplexAck && m.APDU.Service == ServiceReadPropertyMultiple:
			if pvs, err := DecodeReadPropertyMultipleAck(p); err == nil && len(pvs) > len(p) {
				t.Fatalf("%d results from %d bytes", len(pvs), len(p))
			}
		case m.APDU.Type == PDUConfirmedRequest && m.APDU.Service == ServiceWriteProperty:
			_, _ = DecodeWriteProperty(p)
		}
	})
}

// FuzzDecodeServices runs every service decoder directly on the input, so
// the fuzzer need not first find valid headers to reach them.
func FuzzDecodeServices(f *testing.F) {
	f.Add(unhex(f, "0c 00000005 19 55 3e 44 4290cccd 3f"))
	f.Add(unhex(f, "0c 00000010 1e 29 55 4e 44 4290999a 4f 29 67 4e 91 00 4f 1f 0c 00000011 1e 29 55 5e 91 01 91 1f 5f 1f"))
	f.Add(unhex(f, "c4 02000001 22 01e0 91 00 21 63"))
	f.Add(unhex(f, "0c 00800001 19 55 3e 00 3f 49 08"))
	f.Add(unhex(f, "0e a4 7e0b0103 b4 0c000000 0f 21 05 3f"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = DecodeReadPropertyAck(b)
		_, _ = DecodeReadPropertyMultipleAck(b)
		_, _ = DecodeIAm(b)
		_, _, _, _ = DecodeWhoIs(b)
		_, _ = DecodeWriteProperty(b)
		if vals, n, err := DecodeValues(b, 3); err == nil && (n > len(b) || len(vals) > len(b)) {
			t.Fatalf("DecodeValues consumed %d of %d bytes into %d values", n, len(b), len(vals))
		}
	})
}

// FuzzAppRoundTrip checks that every application value that decodes
// encodes back to a value that decodes to the same thing.
func FuzzAppRoundTrip(f *testing.F) {
	for _, s := range []string{"00", "11", "21 48", "32 ff7f", "44 42900000", "55 08 4052000000000000", "63 1234ff", "74 05 e97465", "82 03b0", "91 00", "c4 0000000f", "a4 7e0b0103"} {
		f.Add(unhex(f, s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := DecodeApp(b)
		if err != nil {
			return
		}
		switch v.(type) {
		case Date, Time:
			return // passed through raw, never encoded
		}
		enc, err := AppendApp(nil, v)
		if err != nil {
			t.Fatalf("AppendApp(%#v): %v", v, err)
		}
		back, n, err := DecodeApp(enc)
		if err != nil || n != len(enc) {
			t.Fatalf("re-decode of % x: %v", enc, err)
		}
		if f, ok := v.(float32); ok && f != f {
			return // NaN
		}
		if f, ok := v.(float64); ok && f != f {
			return
		}
		if !reflect.DeepEqual(normalise(back), normalise(v)) {
			t.Fatalf("round trip %#v -> % x -> %#v", v, enc, back)
		}
	})
}

// normalise makes an empty byte slice and nil compare equal.
func normalise(v any) any {
	if b, ok := v.([]byte); ok && len(b) == 0 {
		return []byte{}
	}
	if bs, ok := v.(BitString); ok && len(bs.Bytes) == 0 {
		return BitString{Len: bs.Len, Bytes: []byte{}}
	}
	return v
}

var netipZero = netip.AddrPortFrom(netip.IPv4Unspecified(), 47808)
