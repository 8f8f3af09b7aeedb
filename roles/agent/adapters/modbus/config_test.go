package modbus

import (
	"bytes"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func f64(v float64) *float64 { return &v }

func TestParseConfigDefaults(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"host":"plc1"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		Transport: "tcp", Host: "plc1", Port: 502, UnitID: 1, TimeoutMS: 1000,
		BaudRate: 9600, DataBits: 8, Parity: "E", StopBits: 1, ByteOrder: "big", WordOrder: "big",
		MaxGap: 16, MaxCount: 125, MaxBitCount: 2000,
	}
	if c != want {
		t.Fatalf("defaults:\n got %+v\nwant %+v", c, want)
	}
	if got := c.Address(); got != "plc1:502" {
		t.Fatalf("Address() = %q", got)
	}
	c, err = ParseConfig(json.RawMessage(`{"transport":"RTU","serialPort":"/dev/ttyUSB0","parity":"n","unitId":0,"maxGap":0,"byteOrder":"LITTLE"}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Transport != "rtu" || c.Parity != "N" || c.UnitID != 0 || c.MaxGap != 0 || c.ByteOrder != "little" || c.Address() != "/dev/ttyUSB0" {
		t.Fatalf("rtu config: %+v", c)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		conn string
		want []string
	}{
		{"unknown field", `{"host":"h","hots":"x","Port":1}`, []string{"connection.Port", "connection.hots"}},
		{"not an object", `[1]`, []string{"connection"}},
		{"missing host", `{}`, []string{"connection.host"}},
		{"port range", `{"host":"h","port":70000}`, []string{"connection.port"}},
		{"port type", `{"host":"h","port":"502"}`, []string{"connection.port"}},
		{"unit range", `{"host":"h","unitId":248}`, []string{"connection.unitId"}},
		{"timeout", `{"host":"h","timeoutMs":0}`, []string{"connection.timeoutMs"}},
		{"transport", `{"host":"h","transport":"udp"}`, []string{"connection.transport"}},
		{"orders", `{"host":"h","byteOrder":"middle","wordOrder":"x"}`, []string{"connection.byteOrder", "connection.wordOrder"}},
		{"counts", `{"host":"h","maxCount":126,"maxBitCount":2001,"maxGap":-1}`, []string{"connection.maxBitCount", "connection.maxCount", "connection.maxGap"}},
		{"rtu", `{"transport":"rtu","baudRate":0,"dataBits":9,"parity":"X","stopBits":3}`,
			[]string{"connection.baudRate", "connection.dataBits", "connection.parity", "connection.serialPort", "connection.stopBits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(json.RawMessage(tt.conn))
			if got := adapters.FieldsOf(err); !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v (err: %v)", got, tt.want, err)
			}
		})
	}
}

func TestValidateDataPoints(t *testing.T) {
	conn := json.RawMessage(`{"host":"h","maxCount":2}`)
	tests := []struct {
		name string
		dps  []adapters.DataPoint
		want []string
	}{
		{"ok", []adapters.DataPoint{{Name: "a", Register: "hr:0"}, {Name: "b", Register: "coil:1"}, {Name: "c", Register: "ir:3", Type: "FLOAT32", Scale: f64(2)}}, nil},
		{"bad register", []adapters.DataPoint{{Name: "a", Register: "hr:0"}, {Name: "b", Register: "hr:x"}, {Name: "c", Register: "nope:1"}},
			[]string{"data_points[1].register", "data_points[2].register"}},
		{"bad type", []adapters.DataPoint{{Name: "a", Register: "hr:0", Type: "int8"}}, []string{"data_points[0].type"}},
		{"type on a bit", []adapters.DataPoint{{Name: "a", Register: "coil:0", Type: "uint16"}}, []string{"data_points[0].type"}},
		{"wider than maxCount", []adapters.DataPoint{{Name: "a", Register: "hr:0", Type: "float64"}}, []string{"data_points[0].type"}},
		{"past 65535", []adapters.DataPoint{{Name: "a", Register: "hr:65535", Type: "uint32"}}, []string{"data_points[0].register"}},
		{"last register fits", []adapters.DataPoint{{Name: "a", Register: "hr:65534", Type: "uint32"}}, nil},
		{"zero scale", []adapters.DataPoint{{Name: "a", Register: "hr:0", Scale: f64(0)}}, []string{"data_points[0].scale"}},
		{"scale on bool", []adapters.DataPoint{{Name: "a", Register: "di:0", Scale: f64(2)}}, []string{"data_points[0].scale"}},
		{"orders", []adapters.DataPoint{{Name: "a", Register: "hr:0", ByteOrder: "mid", WordOrder: "x"}}, []string{"data_points[0].byte_order", "data_points[0].word_order"}},
		{"names", []adapters.DataPoint{{Name: "a", Register: "hr:0"}, {Name: "", Register: "hr:1"}, {Name: "a", Register: "hr:2"}},
			[]string{"data_points[1].name", "data_points[2].name"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := adapters.Endpoint{Name: "e", Protocol: "modbus", Connection: conn, DataPoints: tt.dps}
			err := Driver{}.Validate(ep)
			if got := adapters.FieldsOf(err); !slices.Equal(got, tt.want) {
				t.Fatalf("fields = %v, want %v (err: %v)", got, tt.want, err)
			}
		})
	}
}

func TestValidateProtocolAndNew(t *testing.T) {
	ep := adapters.Endpoint{Name: "e", Protocol: "opcua", Connection: json.RawMessage(`{"host":"h"}`)}
	if got := adapters.FieldsOf(Driver{}.Validate(ep)); !slices.Equal(got, []string{"protocol"}) {
		t.Fatalf("fields = %v", got)
	}
	if _, err := (Driver{}).New(ep, adapters.Env{}); err == nil {
		t.Fatal("New accepted an invalid endpoint")
	}
	if p := (Driver{}).Protocol(); p != "modbus" {
		t.Fatalf("Protocol() = %q", p)
	}
}

func TestSampleConfigIsValid(t *testing.T) {
	b, err := os.ReadFile("sample-config.json")
	if err != nil {
		t.Fatal(err)
	}
	var ep adapters.Endpoint
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ep); err != nil {
		t.Fatal(err)
	}
	if err := (Driver{}).Validate(ep); err != nil {
		t.Fatal(err)
	}
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	// holding 0..13 (one block), holding 100 of unit 2, input 0, coil 0,
	// discrete 3.
	if n := a.Diagnostics().(Diagnostics).RequestsPerPoll; n != 5 {
		t.Fatalf("sample config plans %d requests, want 5", n)
	}
}
