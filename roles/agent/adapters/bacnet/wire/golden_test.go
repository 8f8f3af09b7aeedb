package wire

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// golden decodes testdata/<name>, a frame captured from a third-party
// BACnet stack (@bacnet-js/client, see ../capture_test.go).
func golden(t *testing.T, name string) Message {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	m, err := Decode(unhex(t, strings.TrimSpace(string(b))))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !m.HasAPDU || m.BVLC.Function != BVLCOriginalUnicastNPDU {
		t.Fatalf("%s: %+v", name, m)
	}
	return m
}

func TestGoldenIAm(t *testing.T) {
	m := golden(t, "iam.hex")
	if m.APDU.Type != PDUUnconfirmedRequest || m.APDU.Service != ServiceIAm {
		t.Fatalf("APDU = %+v", m.APDU)
	}
	iam, err := DecodeIAm(m.APDU.Payload)
	want := IAm{Device: ObjectID{Type: Device, Instance: 1234}, MaxAPDU: 1482, Segmentation: 3, VendorID: 999}
	if err != nil || iam != want {
		t.Fatalf("I-Am = %+v, %v", iam, err)
	}
}

func TestGoldenReadProperty(t *testing.T) {
	m := golden(t, "rp-ack.hex")
	if m.APDU.Type != PDUComplexAck || m.APDU.InvokeID != 1 || m.APDU.AnswerError() != nil {
		t.Fatalf("APDU = %+v", m.APDU)
	}
	pv, err := DecodeReadPropertyAck(m.APDU.Payload)
	if err != nil || pv.Object != (ObjectID{Type: AnalogInput, Instance: 1}) || pv.Ref.ID != PropPresentValue || !reflect.DeepEqual(pv.Values, []any{float32(21.5)}) {
		t.Fatalf("ack = %+v, %v", pv, err)
	}

	m = golden(t, "rp-object-list.hex")
	pv, err = DecodeReadPropertyAck(m.APDU.Payload)
	if err != nil || len(pv.Values) != 8 {
		t.Fatalf("object-list = %+v, %v", pv, err)
	}
	want := []ObjectID{{Device, 1234}, {AnalogInput, 1}, {AnalogValue, 2}, {BinaryInput, 3}, {MultiStateValue, 4}, {AnalogInput, 5}, {BinaryValue, 6}, {AnalogOutput, 7}}
	for i, w := range want {
		if pv.Values[i] != w {
			t.Errorf("object-list[%d] = %v, want %v", i, pv.Values[i], w)
		}
	}
}

func TestGoldenReadPropertyMultiple(t *testing.T) {
	m := golden(t, "rpm-ack.hex")
	if m.APDU.Type != PDUComplexAck || m.APDU.InvokeID != 3 || m.APDU.Service != ServiceReadPropertyMultiple {
		t.Fatalf("APDU = %+v", m.APDU)
	}
	got, err := DecodeReadPropertyMultipleAck(m.APDU.Payload)
	if err != nil {
		t.Fatal(err)
	}
	ai1, ao7, ai99 := ObjectID{AnalogInput, 1}, ObjectID{AnalogOutput, 7}, ObjectID{AnalogInput, 99}
	all := ^uint32(0)
	want := []PropertyValue{
		{Object: ai1, Ref: PropertyRef{PropPresentValue, all}, Values: []any{float32(21.5)}},
		{Object: ai1, Ref: PropertyRef{PropStatusFlags, all}, Values: []any{BitString{Len: 4, Bytes: []byte{0x00}}}},
		{Object: ai1, Ref: PropertyRef{PropReliability, all}, Values: []any{Enumerated(0)}},
		{Object: ai1, Ref: PropertyRef{PropUnits, all}, Values: []any{Enumerated(62)}},
		{Object: ao7, Ref: PropertyRef{PropPresentValue, all}, Values: []any{float32(35)}},
		{Object: ao7, Ref: PropertyRef{PropReliability, all}, Err: &Error{Class: ErrorClassProperty, Code: ErrorCodeUnknownProperty}},
		{Object: ai99, Ref: PropertyRef{PropPresentValue, all}, Err: &Error{Class: ErrorClassObject, Code: ErrorCodeUnknownObject}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("RPM ack =\n%+v\nwant\n%+v", got, want)
	}
}

func TestGoldenAnswers(t *testing.T) {
	m := golden(t, "error.hex")
	var e *Error
	if err := m.APDU.AnswerError(); !errors.As(err, &e) || e.Class != ErrorClassObject || e.Code != ErrorCodeUnknownObject || m.APDU.InvokeID != 4 {
		t.Fatalf("error = %v, %+v", err, m.APDU)
	}
	m = golden(t, "simple-ack.hex")
	if m.APDU.Type != PDUSimpleAck || m.APDU.Service != ServiceWriteProperty || m.APDU.InvokeID != 5 || m.APDU.AnswerError() != nil {
		t.Fatalf("simple ack = %+v", m.APDU)
	}
	m = golden(t, "reject.hex")
	if err := m.APDU.AnswerError(); !UnrecognizedService(err) || m.APDU.InvokeID != 6 {
		t.Fatalf("reject = %v, %+v", err, m.APDU)
	}
}
