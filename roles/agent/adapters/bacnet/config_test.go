package bacnet

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
	"github.com/edgeplat/edgeplat/roles/agent/adapters/bacnet/wire"
)

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig(json.RawMessage(`{"host":"10.0.0.5","deviceInstance":1200}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{Host: "10.0.0.5", Port: 47808, DeviceInstance: 1200, TimeoutMS: 3000, MaxAPDU: 1476, UsePropertyMultiple: true}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("defaults = %+v", c)
	}
	c, err = ParseConfig(json.RawMessage(`{"host":"h","port":47809,"deviceInstance":0,"timeoutMs":500,"localPort":47808,
		"bbmd":{"host":"bbmd.local"},"maxApdu":480,"usePropertyMultiple":false,"timeoutMs":null}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.BBMD == nil || *c.BBMD != (BBMD{Host: "bbmd.local", Port: 47808, TTLSeconds: 300}) || c.UsePropertyMultiple || c.MaxAPDU != 480 || c.LocalPort != 47808 || c.TimeoutMS != 3000 {
		t.Fatalf("config = %+v", c)
	}
	tests := []struct {
		name string
		raw  string
		want []string
	}{
		{"empty", `{}`, []string{"connection.deviceInstance", "connection.host"}},
		{"not an object", `[1]`, []string{"connection", "connection.deviceInstance", "connection.host"}},
		{"unknown and wrong types", `{"host":"h","deviceInstance":1,"hots":"x","port":"47808","usePropertyMultiple":"yes"}`,
			[]string{"connection.hots", "connection.port", "connection.usePropertyMultiple"}},
		{"ranges", `{"host":"h","deviceInstance":4194303,"port":0,"localPort":70000,"timeoutMs":0,"maxApdu":49}`,
			[]string{"connection.deviceInstance", "connection.localPort", "connection.maxApdu", "connection.port", "connection.timeoutMs"}},
		{"negative instance", `{"host":"h","deviceInstance":-2,"maxApdu":1477}`, []string{"connection.deviceInstance", "connection.maxApdu"}},
		{"bbmd", `{"host":"h","deviceInstance":1,"bbmd":{"port":0,"ttlSeconds":5,"ttl":1}}`,
			[]string{"connection.bbmd.host", "connection.bbmd.port", "connection.bbmd.ttl", "connection.bbmd.ttlSeconds"}},
		{"bbmd not an object", `{"host":"h","deviceInstance":1,"bbmd":"x"}`, []string{"connection.bbmd", "connection.bbmd.host"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseConfig(json.RawMessage(tt.raw))
			if got := adapters.FieldsOf(err); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("fields = %v, want %v (%v)", got, tt.want, err)
			}
		})
	}
}

func TestParseRegister(t *testing.T) {
	tests := []struct {
		in   string
		want Register
	}{
		{"analog-input:1", Register{Object: wire.ObjectID{Type: wire.AnalogInput, Instance: 1}, Property: wire.PropPresentValue}},
		{"ao:0", Register{Object: wire.ObjectID{Type: wire.AnalogOutput}, Property: wire.PropPresentValue}},
		{"multi-state-value:4194302", Register{Object: wire.ObjectID{Type: wire.MultiStateValue, Instance: 4194302}, Property: wire.PropPresentValue}},
		{"av:3/units", Register{Object: wire.ObjectID{Type: wire.AnalogValue, Instance: 3}, Property: wire.PropUnits}},
		{"bo:2@8", Register{Object: wire.ObjectID{Type: wire.BinaryOutput, Instance: 2}, Property: wire.PropPresentValue, Priority: 8}},
		{"binary-value:9/85@1", Register{Object: wire.ObjectID{Type: wire.BinaryValue, Instance: 9}, Property: wire.PropPresentValue, Priority: 1}},
		{"msi:7/object-name", Register{Object: wire.ObjectID{Type: wire.MultiStateInput, Instance: 7}, Property: wire.PropObjectName}},
	}
	for _, tt := range tests {
		got, err := ParseRegister(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseRegister(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "analog-input", "analog-input:", "analog-input:x", "analog-input:-1", "analog-input:4194303",
		"analog-input:01", "Analog-Input:1", "device:1", "ai:1/pv", "ai:1@0", "ai:1@17", "ai:1@", "ai:1/", ":1", "ai:1:2"} {
		if r, err := ParseRegister(bad); err == nil {
			t.Errorf("ParseRegister(%q) = %+v, want an error", bad, r)
		}
	}
	for _, s := range []string{"analog-input:1", "av:3/units", "bo:2@8", "msi:7/object-name@3"} {
		r, _ := ParseRegister(s)
		back, err := ParseRegister(r.String())
		if err != nil || back != r {
			t.Errorf("%q -> %q -> %+v, %v", s, r.String(), back, err)
		}
	}
}

// FuzzParseRegister checks that any register string either parses to one
// that prints and parses back the same, or is an error, never a panic.
func FuzzParseRegister(f *testing.F) {
	for _, s := range []string{"analog-input:1", "av:3/units", "bo:2@8", "msi:7/85@16", "ai:4194302", "x:/@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRegister(s)
		if err != nil {
			return
		}
		back, err := ParseRegister(r.String())
		if err != nil || back != r {
			t.Fatalf("%q -> %q -> %+v, %v", s, r.String(), back, err)
		}
	})
}

func TestValidateDataPoints(t *testing.T) {
	type dp = adapters.DataPoint
	ep := adapters.Endpoint{
		Protocol: "modbus", Connection: json.RawMessage(`{"host":"h","deviceInstance":1}`),
		DataPoints: []dp{
			{Name: "ok", Register: "ai:1", Scale: f64(0.1)},
			{Name: "", Register: "ai:2"},
			{Name: "ok", Register: "ai:3"},
			{Name: "bad_reg", Register: "hr:1"},
			{Name: "typed", Register: "ai:4", Type: "float32"},
			{Name: "ordered", Register: "ai:5", ByteOrder: "little"},
			{Name: "scaled_bool", Register: "bi:1", Scale: f64(2)},
			{Name: "zero_scale", Register: "av:1", Scale: f64(0)},
			{Name: "nan_scale", Register: "av:2", Scale: f64(math.NaN())},
			{Name: "scaled_name", Register: "av:3/object-name", Scale: f64(3)},
		},
	}
	want := []string{"data_points[1].name", "data_points[2].name", "data_points[3].register", "data_points[4].type",
		"data_points[5].byte_order", "data_points[6].scale", "data_points[7].scale", "data_points[8].scale", "data_points[9].scale", "protocol"}
	if got := adapters.FieldsOf(Driver{}.Validate(ep)); !reflect.DeepEqual(got, want) {
		t.Fatalf("fields = %v\nwant     %v", got, want)
	}
	if _, err := (Driver{}).New(ep, adapters.Env{}); err == nil {
		t.Fatal("New accepted an invalid endpoint")
	}
	var fe *adapters.FieldError
	if err := (Driver{}).Validate(adapters.Endpoint{Connection: json.RawMessage(`{"host":"h","deviceInstance":1}`)}); err != nil || errors.As(err, &fe) {
		t.Fatalf("an endpoint without data points: %v", err)
	}
}

func TestUnitName(t *testing.T) {
	for u, want := range map[uint32]string{62: "degC", 64: "degF", 98: "percent", 48: "kW", 95: "", 19: "kWh", 4000: "4000"} {
		if got := UnitName(u); got != want {
			t.Errorf("UnitName(%d) = %q, want %q", u, got, want)
		}
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
	a, err := NewAdapter(ep, adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	// Nine objects, all small: one request at 1476 bytes.
	if d := a.Diagnostics().(Diagnostics); d.Objects != 9 || d.PlannedRequests != 1 || d.BBMD != "192.168.1.10:47808" {
		t.Fatalf("sample config diagnostics = %+v", d)
	}
}
