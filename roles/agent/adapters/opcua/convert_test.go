package opcua

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/gopcua/opcua/ua"
)

func TestStatusQuality(t *testing.T) {
	tests := []struct {
		status ua.StatusCode
		want   string
	}{
		{ua.StatusBadTimeout, adapters.CodeTimeout},
		{ua.StatusBadNodeIDUnknown, adapters.CodeReadError},
		{ua.StatusBadAttributeIDInvalid, adapters.CodeReadError},
		{ua.StatusBadNotReadable, adapters.CodeReadError},
		{ua.StatusBadTypeMismatch, adapters.CodeBadData},
		{ua.StatusBadDecodingError, adapters.CodeBadData},
		{ua.StatusBadDataTypeIDUnknown, adapters.CodeBadData},
		{ua.StatusBadServerNotConnected, adapters.CodeDeviceOffline},
		{ua.StatusBadCommunicationError, adapters.CodeDeviceOffline},
		{ua.StatusBadSessionClosed, adapters.CodeDeviceOffline},
		{ua.StatusBadSessionIDInvalid, adapters.CodeDeviceOffline},
		{ua.StatusBadSecureChannelClosed, adapters.CodeDeviceOffline},
		{ua.StatusBadConnectionClosed, adapters.CodeDeviceOffline},
		{ua.StatusBadTooManySessions, adapters.CodeDeviceBusy},
		{ua.StatusBadTimeout | 0x0400, adapters.CodeTimeout}, // info bits do not change the condition
		{ua.StatusBadInternalError, adapters.CodeReadError},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%#08x", uint32(tc.status)), func(t *testing.T) {
			if got := statusQuality(tc.status); got != tc.want {
				t.Fatalf("statusQuality = %s, want %s", got, tc.want)
			}
			if got := adapters.Classify(statusError(tc.status)); got != tc.want {
				t.Fatalf("Classify(statusError) = %s, want %s", got, tc.want)
			}
		})
	}
	if got := adapters.Classify(statusError(ua.StatusUncertain)); got != adapters.CodeReadError {
		t.Fatalf("uncertain = %s", got)
	}
	if !isGood(ua.StatusOK) || !isGood(ua.StatusGoodClamped) || isGood(ua.StatusUncertain) || isGood(ua.StatusBadTimeout) {
		t.Fatal("isGood severity")
	}
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"status wrapped", wrap(ua.StatusBadSessionIDInvalid), adapters.CodeDeviceOffline},
		{"status timeout", wrap(ua.StatusBadTimeout), adapters.CodeTimeout},
		{"eof", wrap(io.EOF), adapters.CodeDeviceOffline},
		{"deadline", wrap(context.DeadlineExceeded), adapters.CodeTimeout},
		{"explicit code wins", adapters.WithCode(adapters.CodeBadData, ua.StatusBadTimeout), adapters.CodeBadData},
		{"other", errors.New("x"), adapters.CodeReadError},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := adapters.Classify(classify(tc.err)); got != tc.want {
				t.Fatalf("got %s, want %s", got, tc.want)
			}
		})
	}
	if classify(nil) != nil {
		t.Fatal("classify(nil) != nil")
	}
}

func wrap(err error) error { return errors.Join(errors.New("ctx"), err) }

func TestVariantConversion(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in       any
		wantType string
		want     any
	}{
		{float64(21.5), "Double", 21.5},
		{float32(1.5), "Float", 1.5},
		{int32(-42), "Int32", int32(-42)},
		{uint16(7), "UInt16", uint16(7)},
		{int64(1 << 40), "Int64", int64(1 << 40)},
		{true, "Boolean", true},
		{"line-1", "String", "line-1"},
		{ts, "DateTime", ts},
		{[]byte{1, 2}, "ByteString", []byte{1, 2}},
		{ua.NewLocalizedText("hello"), "LocalizedText", "hello"},
		{&ua.QualifiedName{NamespaceIndex: 2, Name: "X"}, "QualifiedName", "2:X"},
		{ua.NewStringNodeID(2, "A"), "NodeId", "ns=2;s=A"},
		{[]float64{1, 2}, "Double", []any{1.0, 2.0}},
		{[]int32{3}, "Int32", []any{int32(3)}},
	}
	for _, tc := range tests {
		v := ua.MustVariant(tc.in)
		if got := nodeType(v); got != tc.wantType {
			t.Errorf("nodeType(%T) = %q, want %q", tc.in, got, tc.wantType)
		}
		got, err := jsonValue(v.Value())
		if err != nil {
			t.Errorf("jsonValue(%T): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("jsonValue(%T) = %#v, want %#v", tc.in, got, tc.want)
		}
		if _, err := json.Marshal(got); err != nil {
			t.Errorf("value of %T does not marshal: %v", tc.in, err)
		}
	}
	for _, bad := range []any{math.NaN(), math.Inf(1), []float64{1, math.NaN()}, &ua.ExtensionObject{}} {
		if _, err := jsonValue(bad); !errors.Is(err, errBadData) {
			t.Errorf("jsonValue(%v) err = %v, want errBadData", bad, err)
		}
	}
	if nodeType(nil) != "Null" {
		t.Error("nodeType(nil)")
	}
}

func TestShape(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	tests := []struct {
		name  string
		kind  string
		scale *float64
		in    any
		want  any
		bad   bool
	}{
		{"as read", "", nil, int32(5), int32(5), false},
		{"scale int", "", f(0.1), int32(215), 21.5, false},
		{"scale 1 keeps type", "", f(1), int32(5), int32(5), false},
		{"scale ignores strings", "", f(2), "x", "x", false},
		{"to float", "float", nil, int16(3), 3.0, false},
		{"to float from string", "float", nil, "2.5", 2.5, false},
		{"to int rounds", "int", nil, 2.6, int64(3), false},
		{"to int from bool", "int", nil, true, int64(1), false},
		{"to bool", "bool", nil, int32(0), false, false},
		{"to string", "string", nil, 1.5, "1.5", false},
		{"string to int fails", "int", nil, "abc", nil, true},
		{"array to float fails", "float", nil, []any{1.0}, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := point{DataPoint: adapters.DataPoint{Name: "x", Scale: tc.scale, Type: tc.kind}, kind: valueTypes[tc.kind]}
			got, err := shape(p, tc.in)
			if tc.bad {
				if !errors.Is(err, errBadData) {
					t.Fatalf("err = %v, want errBadData", err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("shape = %#v, %v; want %#v", got, err, tc.want)
			}
		})
	}
}

func TestReading(t *testing.T) {
	a := &Adapter{ep: adapters.Endpoint{Name: "press", UUID: "u-1"}}
	p := point{DataPoint: adapters.DataPoint{Name: "temp", Unit: "C"}}
	now := time.Date(2026, 5, 1, 0, 0, 0, 0, time.UTC)
	src := now.Add(-time.Second)
	tests := []struct {
		name     string
		dv       *ua.DataValue
		quality  string
		code     string
		value    any
		nodeType string
		at       time.Time
	}{
		{"good with source time", &ua.DataValue{Value: ua.MustVariant(21.5), Status: ua.StatusOK, SourceTimestamp: src}, adapters.Good, "", 21.5, "Double", src},
		{"server time only", &ua.DataValue{Value: ua.MustVariant(int32(1)), ServerTimestamp: src}, adapters.Good, "", int32(1), "Int32", src},
		{"no timestamps", &ua.DataValue{Value: ua.MustVariant(true)}, adapters.Good, "", true, "Boolean", now},
		{"unknown node", &ua.DataValue{Status: ua.StatusBadNodeIDUnknown}, adapters.Bad, adapters.CodeReadError, nil, "Null", now},
		{"bad timeout", &ua.DataValue{Status: ua.StatusBadTimeout}, adapters.Bad, adapters.CodeTimeout, nil, "Null", now},
		{"NaN", &ua.DataValue{Value: ua.MustVariant(math.NaN())}, adapters.Bad, adapters.CodeBadData, nil, "Double", now},
		{"nil", nil, adapters.Bad, adapters.CodeBadData, nil, "", now},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := a.reading(p, tc.dv, now)
			if r.Quality != tc.quality || r.QualityCode != tc.code || !reflect.DeepEqual(r.Value, tc.value) ||
				r.NodeType != tc.nodeType || !r.Timestamp.Equal(tc.at) {
				t.Fatalf("reading = %+v", r)
			}
			if r.Protocol != "opcua" || r.DeviceName != "press" || r.DeviceID != "u-1" || r.Metric != "temp" || r.Unit != "C" {
				t.Fatalf("identity fields: %+v", r)
			}
		})
	}
}

func TestVerifyServer(t *testing.T) {
	der, _, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	pemOf := func(d []byte) string { return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: d})) }
	if err := verifyServer(der, []string{pemOf(other), pemOf(der)}); err != nil {
		t.Fatalf("listed certificate refused: %v", err)
	}
	if err := verifyServer(der, []string{pemOf(other)}); !errors.Is(err, ErrUntrustedServer) {
		t.Fatalf("unlisted certificate: err = %v", err)
	}
	if err := verifyServer(nil, []string{pemOf(der)}); !errors.Is(err, ErrUntrustedServer) {
		t.Fatalf("no certificate: err = %v", err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil || len(c.URIs) != 1 || c.URIs[0].String() != clientAppURI {
		t.Fatalf("generated certificate URI SAN: %v %v", err, c)
	}
}

func TestPollAndListenNotConnected(t *testing.T) {
	a, err := Driver{}.New(endpoint(`{"endpointUrl":"opc.tcp://127.0.0.1:1"}`), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	readings, err := a.Poll(context.Background())
	if err == nil || len(readings) != 1 || readings[0].Quality != adapters.Bad || readings[0].QualityCode != adapters.CodeDeviceOffline {
		t.Fatalf("Poll before Connect = %+v, %v", readings, err)
	}
	if err := a.(adapters.Listener).Listen(context.Background(), func([]adapters.Reading) {}); !errors.Is(err, adapters.ErrPollOnly) {
		t.Fatalf("Listen of a polled endpoint = %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
}

func selfSignedPEM(t *testing.T) string {
	t.Helper()
	der, _, err := selfSigned()
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
