package wire

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func unhex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The expected encodings are written out by hand from ASHRAE 135 clause
// 20.2 (and its annex F examples), not produced by the encoder.
func TestAppendApp(t *testing.T) {
	tests := []struct {
		name string
		v    any
		want string
	}{
		{"null", nil, "00"},
		{"false", false, "10"},
		{"true", true, "11"},
		{"unsigned 72", uint64(72), "21 48"},
		{"unsigned 256", uint64(256), "22 0100"},
		{"unsigned 0", uint64(0), "21 00"},
		{"signed 72", int64(72), "31 48"},
		{"signed -1", int64(-1), "31 ff"},
		{"signed -129", int64(-129), "32 ff7f"},
		{"signed 128", int64(128), "32 0080"},
		{"real 72.0", float32(72), "44 42900000"},
		{"double 72.0", float64(72), "55 08 4052000000000000"},
		{"octets", []byte{0x12, 0x34, 0xff}, "63 1234ff"},
		{"string", "This is a BACnet string!", "75 19 00 546869732069732061204241436e657420737472696e6721"},
		{"bits 10110", BitString{Len: 5, Bytes: []byte{0xB0}}, "82 03b0"},
		{"enumerated 0", Enumerated(0), "91 00"},
		{"object id", ObjectID{Type: AnalogInput, Instance: 15}, "c4 0000000f"},
		{"object id device", ObjectID{Type: Device, Instance: 1234}, "c4 020004d2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := AppendApp(nil, tt.v)
			if err != nil {
				t.Fatal(err)
			}
			if want := unhex(t, tt.want); !bytes.Equal(got, want) {
				t.Fatalf("AppendApp(%v) = % x, want % x", tt.v, got, want)
			}
			back, n, err := DecodeApp(got)
			if err != nil || n != len(got) {
				t.Fatalf("DecodeApp(% x) = %v, %d, %v", got, back, n, err)
			}
			if !reflect.DeepEqual(back, tt.v) {
				t.Fatalf("round trip %#v -> %#v", tt.v, back)
			}
		})
	}
}

func TestDecodeAppErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
	}{
		{"empty", ""},
		{"length past end", "44 4290"},
		{"huge extended length", "65 ff 7fffffff 00"},
		{"two-byte length past end", "65 fe 0100 00"},
		{"real of 3 bytes", "43 429000"},
		{"unsigned of 0 bytes", "20"},
		{"unsigned of 9 bytes", "25 09 010203040506070809"},
		{"boolean value 2", "12"},
		{"context tag", "09 01"},
		{"bit string unused 8", "82 0800"},
		{"unknown charset", "73 07 4142"},
		{"odd UCS-2", "74 04 414243"},
		{"unknown tag 13", "d1 00"},
		{"enumerated too large", "95 05 0100000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if v, _, err := DecodeApp(unhex(t, tt.in)); err == nil {
				t.Fatalf("DecodeApp(%s) = %#v, want an error", tt.in, v)
			}
		})
	}
}

func TestCharsets(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"74 05 e9 74 e9", "été"},            // ISO 8859-1
		{"75 05 04 00e9 0074", "ét"},         // UCS-2
		{"74 00 c3a9 74", "ét"},              // UTF-8
		{"75 05 00 e282ac 41", "€A"},         // UTF-8, three-byte rune
		{"71 00", ""},                        // empty UTF-8
		{"75 05 04 d83d de00", "\U0001F600"}, // UCS-2 surrogate pair
	}
	for _, tt := range tests {
		v, _, err := DecodeApp(unhex(t, tt.in))
		if err != nil || v != tt.want {
			t.Errorf("DecodeApp(%s) = %q, %v; want %q", tt.in, v, err, tt.want)
		}
	}
}

func TestExtendedTagsAndLengths(t *testing.T) {
	// Context tag 20, 300 bytes of content: extended number and a
	// two-byte length.
	content := bytes.Repeat([]byte{7}, 300)
	b := appendTag(nil, 20, true, len(content))
	if want := unhex(t, "fd 14 fe 012c"); !bytes.Equal(b, want) {
		t.Fatalf("tag = % x, want % x", b, want)
	}
	b = append(b, content...)
	tag, n, err := DecodeTag(b)
	if err != nil || tag.Number != 20 || !tag.Context || tag.Length != 300 || n != 5 {
		t.Fatalf("DecodeTag = %+v, %d, %v", tag, n, err)
	}
	if b := AppendOpening(nil, 20); !bytes.Equal(b, unhex(t, "fe 14")) {
		t.Fatalf("opening 20 = % x", b)
	}
}

func TestBVLC(t *testing.T) {
	npdu := unhex(t, "0104 0005 01 0c 0c 00000001 19 55")
	for _, fn := range []uint8{BVLCOriginalUnicastNPDU, BVLCOriginalBroadcastNPDU, BVLCDistributeBroadcastToNetwork} {
		b := AppendBVLC(nil, fn, npdu)
		m, err := DecodeBVLC(b)
		if err != nil || m.Function != fn || !bytes.Equal(m.NPDU, npdu) {
			t.Fatalf("BVLC 0x%02x: %+v, %v", fn, m, err)
		}
	}
	origin := netip.MustParseAddrPort("192.168.1.20:47809")
	b := AppendForwarded(nil, origin, npdu)
	if !bytes.Equal(b[:10], unhex(t, "81 04 0017 c0a80114 bac1")) {
		t.Fatalf("forwarded header % x", b[:10])
	}
	m, err := DecodeBVLC(b)
	if err != nil || m.Origin != origin || !bytes.Equal(m.NPDU, npdu) {
		t.Fatalf("forwarded = %+v, %v", m, err)
	}
	if b := AppendRegisterForeignDevice(nil, 600); !bytes.Equal(b, unhex(t, "81 05 0006 0258")) {
		t.Fatalf("register = % x", b)
	}
	m, err = DecodeBVLC(unhex(t, "81 00 0006 0030"))
	if err != nil || m.Function != BVLCResult || m.Result != ResultRegisterForeignDeviceNAK {
		t.Fatalf("result = %+v, %v", m, err)
	}
	m, err = DecodeBVLC(AppendRegisterForeignDevice(nil, 30))
	if err != nil || m.TTL != 30 {
		t.Fatalf("register decode = %+v, %v", m, err)
	}
	for _, bad := range []string{"", "81", "82 0a 0004", "81 0a 0005", "81 0a 0010 0100", "81 00 0005 00", "81 04 0008 01020304", "81 7f 0004"} {
		if _, err := DecodeBVLC(unhex(t, bad)); err == nil {
			t.Errorf("DecodeBVLC(%s) accepted", bad)
		}
	}
}

func TestNPDU(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want NPDU
	}{
		{"local", "01 04 aa", NPDU{ExpectingReply: true, APDU: []byte{0xaa}}},
		// From network 5, station 0x0a, as a router forwards an answer.
		{"snet", "01 08 0005 01 0a 30 01", NPDU{SNET: 5, SADR: []byte{0x0a}, APDU: []byte{0x30, 0x01}}},
		// To network 0xffff (global broadcast), hop count 255.
		{"dnet", "01 20 ffff 00 ff 10 08", NPDU{APDU: []byte{0x10, 0x08}}},
		{"dnet and snet", "01 28 0007 02 0102 0009 01 03 fe 20 01 0f", NPDU{SNET: 9, SADR: []byte{3}, APDU: []byte{0x20, 0x01, 0x0f}}},
		{"network message", "01 80 00 0001", NPDU{NetworkMessage: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeNPDU(unhex(t, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if len(got.APDU) == 0 {
				got.APDU = nil
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("DecodeNPDU = %+v, want %+v", got, tt.want)
			}
		})
	}
	for _, bad := range []string{"", "01", "02 00", "01 20 ffff", "01 20 ffff 05 01", "01 08 0005 00 aa", "01 08 0005 06 01", "01 20 ffff 00"} {
		if _, err := DecodeNPDU(unhex(t, bad)); err == nil {
			t.Errorf("DecodeNPDU(%s) accepted", bad)
		}
	}
}

func TestAPDU(t *testing.T) {
	req := AppendConfirmedRequest(nil, 7, ServiceReadProperty, 1476, []byte{1, 2})
	// Not segmented, no segmented answers accepted, max APDU code 5.
	if !bytes.Equal(req, unhex(t, "00 05 07 0c 0102")) {
		t.Fatalf("request = % x", req)
	}
	a, err := DecodeAPDU(req)
	if err != nil || a.Type != PDUConfirmedRequest || a.InvokeID != 7 || a.Service != ServiceReadProperty || !bytes.Equal(a.Payload, []byte{1, 2}) {
		t.Fatalf("request decode = %+v, %v", a, err)
	}
	if c := MaxAPDUCode(480); c != 3 {
		t.Errorf("MaxAPDUCode(480) = %d", c)
	}
	if c := MaxAPDUCode(1000); c != 3 {
		t.Errorf("MaxAPDUCode(1000) = %d", c)
	}
	tests := []struct {
		name    string
		in      string
		wantErr string
	}{
		{"simple ack", "20 07 0f", ""},
		{"complex ack", "30 07 0c 0102", ""},
		{"segmented complex ack", "3c 07 00 04 0e 0102", "segment"},
		{"error", "50 07 0c 9102 9120", "property: unknown-property"},
		{"wrapped error", "50 07 0e 0e 9101 911f 0f", "object: unknown-object"},
		{"reject", "60 07 09", "unrecognized-service"},
		{"abort", "71 07 04", "segmentation"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := DecodeAPDU(unhex(t, tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if a.InvokeID != 7 {
				t.Errorf("invoke id %d", a.InvokeID)
			}
			err = a.AnswerError()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("AnswerError = %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("AnswerError = %v, want %q", err, tt.wantErr)
			}
		})
	}
	for _, bad := range []string{"", "00 05 07", "10", "20 07", "30 07", "38 07 00", "50 07 0c 91", "50 07 0c 2102 2120", "60 07", "71", "80 00 00"} {
		if _, err := DecodeAPDU(unhex(t, bad)); err == nil {
			t.Errorf("DecodeAPDU(%s) accepted", bad)
		}
	}
}

func TestUnrecognizedService(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{&RejectError{Reason: RejectUnrecognizedService}, true},
		{&RejectError{Reason: 4}, false},
		{&Error{Class: ErrorClassServices, Code: ErrorCodeRejectUnrecognizedService}, true},
		{&Error{Class: ErrorClassServices, Code: ErrorCodeOptionalFunctionalityNotSupported}, true},
		{&Error{Class: ErrorClassObject, Code: ErrorCodeUnknownObject}, false},
		{&AbortError{Reason: 9}, false},
		{errors.New("timeout"), false},
	}
	for _, tt := range tests {
		if got := UnrecognizedService(tt.err); got != tt.want {
			t.Errorf("UnrecognizedService(%v) = %v", tt.err, got)
		}
	}
}

func TestWhoIsIAm(t *testing.T) {
	b := AppendWhoIs(nil, 1234, 1234)
	if !bytes.Equal(b, unhex(t, "0a 04d2 1a 04d2")) {
		t.Fatalf("who-is = % x", b)
	}
	lo, hi, ok, err := DecodeWhoIs(b)
	if err != nil || !ok || lo != 1234 || hi != 1234 {
		t.Fatalf("DecodeWhoIs = %d %d %v %v", lo, hi, ok, err)
	}
	if b := AppendWhoIs(nil, -1, 0); len(b) != 0 {
		t.Fatalf("who-is all = % x", b)
	}
	// Annex F.5: device 1, max APDU 480, segmented-both, vendor 99.
	iamBytes := unhex(t, "c4 02000001 22 01e0 91 00 21 63")
	if got := AppendIAm(nil, IAm{Device: ObjectID{Type: Device, Instance: 1}, MaxAPDU: 480, VendorID: 99}); !bytes.Equal(got, iamBytes) {
		t.Fatalf("AppendIAm = % x", got)
	}
	iam, err := DecodeIAm(iamBytes)
	if err != nil || iam.Device.Instance != 1 || iam.MaxAPDU != 480 || iam.Segmentation != 0 || iam.VendorID != 99 {
		t.Fatalf("DecodeIAm = %+v, %v", iam, err)
	}
	for _, bad := range []string{"c4 00000001 22 01e0 91 00 21 63", "c4 02000001 22 01e0 91 07 21 63", "c4 02000001", "21 01 21 01 21 01 21 01"} {
		if _, err := DecodeIAm(unhex(t, bad)); err == nil {
			t.Errorf("DecodeIAm(%s) accepted", bad)
		}
	}
}

func TestReadProperty(t *testing.T) {
	obj := ObjectID{Type: AnalogInput, Instance: 5}
	req := AppendReadProperty(nil, obj, PropertyRef{ID: PropPresentValue, Index: ArrayAll})
	// Annex F.3.5: ReadProperty of analog-input 5, present-value.
	if !bytes.Equal(req, unhex(t, "0c 00000005 19 55")) {
		t.Fatalf("request = % x", req)
	}
	if req := AppendReadProperty(nil, ObjectID{Type: Device, Instance: 1}, PropertyRef{ID: PropObjectList, Index: 0}); !bytes.Equal(req, unhex(t, "0c 02000001 19 4c 29 00")) {
		t.Fatalf("indexed request = % x", req)
	}
	ack := unhex(t, "0c 00000005 19 55 3e 44 4290cccd 3f")
	pv, err := DecodeReadPropertyAck(ack)
	if err != nil || pv.Object != obj || pv.Ref.ID != PropPresentValue || len(pv.Values) != 1 || pv.Values[0] != float32(72.4) {
		t.Fatalf("ack = %+v, %v", pv, err)
	}
	// A list: object-list of two objects.
	pv, err = DecodeReadPropertyAck(unhex(t, "0c 02000001 19 4c 3e c4 02000001 c4 00000005 3f"))
	if err != nil || len(pv.Values) != 2 || pv.Values[1] != obj {
		t.Fatalf("list ack = %+v, %v", pv, err)
	}
	for _, bad := range []string{"0c 00000005 19 55 3e 44 4290cccd", "0c 00000005 19 55 44 4290cccd", "0c 00000005 19 55 3e 44 4290cccd 4f", "0b 000005 19 55 3e 3f", "0c 00000005 19 55 3e 3f 00"} {
		if _, err := DecodeReadPropertyAck(unhex(t, bad)); err == nil {
			t.Errorf("DecodeReadPropertyAck(%s) accepted", bad)
		}
	}
}

func TestReadPropertyMultiple(t *testing.T) {
	specs := []ReadAccessSpec{
		{Object: ObjectID{Type: AnalogInput, Instance: 16}, Props: []PropertyRef{{ID: PropPresentValue, Index: ArrayAll}, {ID: PropReliability, Index: ArrayAll}}},
		{Object: ObjectID{Type: AnalogInput, Instance: 17}, Props: []PropertyRef{{ID: PropPresentValue, Index: ArrayAll}}},
	}
	// Annex F.3.7, the second example's request.
	want := unhex(t, "0c 00000010 1e 09 55 09 67 1f 0c 00000011 1e 09 55 1f")
	if got := AppendReadPropertyMultiple(nil, specs); !bytes.Equal(got, want) {
		t.Fatalf("request = % x\nwant      % x", got, want)
	}
	// Its ack: 72.3 and no-fault-detected for 16, an unknown-object error
	// for 17... written here with the error on 17's present-value.
	ack := unhex(t, "0c 00000010 1e 29 55 4e 44 4290999a 4f 29 67 4e 91 00 4f 1f 0c 00000011 1e 29 55 5e 91 01 91 1f 5f 1f")
	got, err := DecodeReadPropertyMultipleAck(ack)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Values[0] != float32(72.3) || got[1].Values[0] != Enumerated(0) || got[2].Err == nil || got[2].Err.Code != ErrorCodeUnknownObject || got[2].Object.Instance != 17 {
		t.Fatalf("ack = %+v", got)
	}
	for _, bad := range []string{
		"0c 00000010 1e 29 55 4e 44 42909999 4f",
		"0c 00000010 1e 29 55 44 42909999 1f",
		"0c 00000010 1e 29 55 6e 91 00 6f 1f",
		"0c 00000010 1e 29 55 5e 91 01 5f 1f",
		"0c 00000010 1e 29 55 4e 44 42909999 5f 1f",
		"1e 1f",
	} {
		if _, err := DecodeReadPropertyMultipleAck(unhex(t, bad)); err == nil {
			t.Errorf("DecodeReadPropertyMultipleAck(%s) accepted", bad)
		}
	}
}

func TestWriteProperty(t *testing.T) {
	obj := ObjectID{Type: AnalogValue, Instance: 1}
	// Annex F.3.9: WriteProperty of analog-value 1, present-value 180.0.
	b, err := AppendWriteProperty(nil, obj, PropertyRef{ID: PropPresentValue, Index: ArrayAll}, float32(180), 0)
	if err != nil || !bytes.Equal(b, unhex(t, "0c 00800001 19 55 3e 44 43340000 3f")) {
		t.Fatalf("write = % x, %v", b, err)
	}
	b, err = AppendWriteProperty(nil, obj, PropertyRef{ID: PropPresentValue, Index: ArrayAll}, nil, 8)
	if err != nil || !bytes.Equal(b, unhex(t, "0c 00800001 19 55 3e 00 3f 49 08")) {
		t.Fatalf("relinquish = % x, %v", b, err)
	}
	w, err := DecodeWriteProperty(b)
	if err != nil || w.Object != obj || w.Priority != 8 || len(w.Values) != 1 || w.Values[0] != nil {
		t.Fatalf("DecodeWriteProperty = %+v, %v", w, err)
	}
	for _, bad := range []string{"0c 00800001 19 55 3e 00 3f 49 11", "0c 00800001 19 55 3e 00 3f 49 08 00", "0c 00800001 19 55 3e 00"} {
		if _, err := DecodeWriteProperty(unhex(t, bad)); err == nil {
			t.Errorf("DecodeWriteProperty(%s) accepted", bad)
		}
	}
	if _, err := AppendWriteProperty(nil, obj, PropertyRef{ID: PropPresentValue, Index: ArrayAll}, struct{}{}, 0); err == nil {
		t.Error("encoded a struct")
	}
}

func TestDecodeValuesNesting(t *testing.T) {
	// A constructed value (a date-time inside [0]) next to an application
	// value; then too deep a nesting.
	vals, n, err := DecodeValues(unhex(t, "0e a4 7e0b0103 b4 0c000000 0f 21 05 3f"), 3)
	if err != nil || n != 14 || len(vals) != 3 || vals[2] != uint64(5) {
		t.Fatalf("DecodeValues = %v, %d, %v", vals, n, err)
	}
	deep := bytes.Repeat([]byte{0x0e}, maxDepth+1)
	if _, _, err := DecodeValues(append(deep, 0x3f), 3); err == nil {
		t.Fatal("accepted too deep a nesting")
	}
	vals, _, err = DecodeValues(unhex(t, "1a 0102 3f"), 3)
	if err != nil || !reflect.DeepEqual(vals, []any{ContextValue{Tag: 1, Data: []byte{1, 2}}}) {
		t.Fatalf("context value = %v, %v", vals, err)
	}
	if _, _, err := DecodeValues(unhex(t, "21 05 2f"), 3); err == nil {
		t.Fatal("accepted a mismatched closing tag")
	}
}

func TestBitString(t *testing.T) {
	b := BitString{Len: 4, Bytes: []byte{0x50}} // 0101: fault, out-of-service
	want := []bool{false, true, false, true, false}
	for i, w := range want {
		if b.Bit(i) != w {
			t.Errorf("bit %d = %v", i, b.Bit(i))
		}
	}
	if b.Bit(-1) || b.Bit(100) {
		t.Error("bit out of range set")
	}
	if _, err := AppendApp(nil, BitString{Len: 20, Bytes: []byte{1}}); err == nil {
		t.Error("encoded an inconsistent bit string")
	}
}

func TestNames(t *testing.T) {
	if s := (ObjectID{Type: MultiStateValue, Instance: 3}).String(); s != "multi-state-value:3" {
		t.Errorf("object id = %s", s)
	}
	if s := ObjectType(900).String(); s != "900" {
		t.Errorf("unknown type = %s", s)
	}
	for _, in := range []string{"present-value", "85"} {
		if p, err := ParsePropertyID(in); err != nil || p != PropPresentValue {
			t.Errorf("ParsePropertyID(%s) = %v, %v", in, p, err)
		}
	}
	if _, err := ParsePropertyID("presentvalue"); err == nil {
		t.Error("accepted a misspelt property")
	}
	if s := (&Error{Class: 2, Code: 32}).Error(); s != "bacnet error property: unknown-property" {
		t.Errorf("error text %q", s)
	}
	if s := (&RejectError{Reason: 200}).Error(); !strings.Contains(s, "200") {
		t.Errorf("reject text %q", s)
	}
	if math.MaxUint32 != ArrayAll {
		t.Error("ArrayAll")
	}
}

func TestDecodeMessage(t *testing.T) {
	apdu := AppendComplexAck(nil, 3, ServiceReadProperty, unhex(t, "0c 00000005 19 55 3e 44 4290cccd 3f"))
	b := AppendBVLC(nil, BVLCOriginalUnicastNPDU, AppendNPDU(nil, false, apdu))
	m, err := Decode(b)
	if err != nil || !m.HasAPDU || m.APDU.Type != PDUComplexAck || m.APDU.InvokeID != 3 {
		t.Fatalf("Decode = %+v, %v", m, err)
	}
	m, err = Decode(AppendResult(nil, 0))
	if err != nil || m.HasAPDU || m.BVLC.Function != BVLCResult {
		t.Fatalf("Decode result = %+v, %v", m, err)
	}
}
