package modbus

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func TestCheckValue(t *testing.T) {
	pt := func(typ Type, scale float64) point {
		return point{dp: adapters.DataPoint{Name: "p"}, typ: typ, scale: scale}
	}
	tests := []struct {
		name        string
		p           point
		in          any
		raw, wrote  any
		wantFieldOK bool // a *FieldError on "value" is expected
	}{
		{name: "bool", p: pt(Bool, 1), in: true, raw: true, wrote: true},
		{name: "bool from number", p: pt(Bool, 1), in: 1.0, wantFieldOK: true},
		{name: "uint16", p: pt(Uint16, 1), in: 65535.0, raw: uint64(65535), wrote: uint64(65535)},
		{name: "uint16 json.Number", p: pt(Uint16, 1), in: json.Number("42"), raw: uint64(42), wrote: uint64(42)},
		{name: "uint16 too big", p: pt(Uint16, 1), in: 65536.0, wantFieldOK: true},
		{name: "uint16 negative", p: pt(Uint16, 1), in: -1.0, wantFieldOK: true},
		{name: "uint16 negative json", p: pt(Uint16, 1), in: json.Number("-1"), wantFieldOK: true},
		{name: "uint16 fraction", p: pt(Uint16, 1), in: 1.5, wantFieldOK: true},
		{name: "uint16 fraction json", p: pt(Uint16, 1), in: json.Number("1.5"), wantFieldOK: true},
		{name: "uint16 string", p: pt(Uint16, 1), in: "12", wantFieldOK: true},
		{name: "uint16 nil", p: pt(Uint16, 1), in: nil, wantFieldOK: true},
		{name: "int16 min", p: pt(Int16, 1), in: -32768.0, raw: int64(-32768), wrote: int64(-32768)},
		{name: "int16 under", p: pt(Int16, 1), in: -32769.0, wantFieldOK: true},
		{name: "int32 Go int", p: pt(Int32, 1), in: -7, raw: int64(-7), wrote: int64(-7)},
		{name: "int32 over", p: pt(Int32, 1), in: json.Number("2147483648"), wantFieldOK: true},
		{name: "int64 max exact", p: pt(Int64, 1), in: json.Number("9223372036854775807"), raw: int64(math.MaxInt64), wrote: int64(math.MaxInt64)},
		{name: "int64 over", p: pt(Int64, 1), in: json.Number("9223372036854775808"), wantFieldOK: true},
		{name: "int64 float over", p: pt(Int64, 1), in: 9.3e18, wantFieldOK: true},
		{name: "uint64 max exact", p: pt(Uint64, 1), in: json.Number("18446744073709551615"), raw: uint64(math.MaxUint64), wrote: uint64(math.MaxUint64)},
		{name: "uint64 Go uint64", p: pt(Uint64, 1), in: uint64(1 << 63), raw: uint64(1 << 63), wrote: uint64(1 << 63)},
		{name: "uint64 float over", p: pt(Uint64, 1), in: 1.9e19, wantFieldOK: true},
		{name: "float32", p: pt(Float32, 1), in: 0.1, raw: 0.1, wrote: float64(float32(0.1))},
		{name: "float32 over", p: pt(Float32, 1), in: 1e39, wantFieldOK: true},
		{name: "float64", p: pt(Float64, 1), in: json.Number("1e300"), raw: 1e300, wrote: 1e300},
		{name: "scale divided out", p: pt(Int16, 0.1), in: 23.4, raw: int64(234), wrote: mul(234, 0.1)},
		{name: "scale rounds to nearest", p: pt(Int16, 0.1), in: -23.46, raw: int64(-235), wrote: mul(-235, 0.1)},
		{name: "scale rounds half away from zero", p: pt(Int16, 0.5), in: 1.25, raw: int64(3), wrote: 1.5},
		{name: "scale rounds negative half away from zero", p: pt(Int16, 0.5), in: -1.25, raw: int64(-3), wrote: -1.5},
		{name: "scale range checked after division", p: pt(Uint16, 0.01), in: 700.0, wantFieldOK: true},
		{name: "scale on float", p: pt(Float32, 2), in: 3.0, raw: 1.5, wrote: 3.0},
		{name: "NaN", p: pt(Float64, 1), in: math.NaN(), wantFieldOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, wrote, err := checkValue(tt.p, tt.in)
			if tt.wantFieldOK {
				var fe *adapters.FieldError
				if !errors.As(err, &fe) || fe.Field != "value" {
					t.Fatalf("checkValue(%#v) = %#v, %v; want a FieldError on value", tt.in, raw, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if raw != tt.raw || wrote != tt.wrote {
				t.Fatalf("checkValue(%#v) = %#v, %#v; want %#v, %#v", tt.in, raw, wrote, tt.raw, tt.wrote)
			}
		})
	}
}

func TestWriteRequests(t *testing.T) {
	ep := adapters.Endpoint{
		Name: "e", Connection: json.RawMessage(`{"host":"h","unitId":3}`),
		DataPoints: []adapters.DataPoint{
			{Name: "setpoint", Register: "hr:10", Type: "float32", WordOrder: "little"},
			{Name: "limit", Register: "hr:20", Type: "int16", Scale: f64(0.1)},
			{Name: "wide", Register: "hr:30@9", Type: "uint64", ByteOrder: "little"},
			{Name: "pump", Register: "coil:4"},
			{Name: "level", Register: "ir:1"},
			{Name: "flag", Register: "hr:40", Type: "bool"},
		},
	}
	tests := []struct {
		register  string
		value     any
		want      any
		wantWrite string
		wantField string
	}{
		{register: "setpoint", value: 1.5, want: 1.5, wantWrite: "regs u3 10 2 00003fc0"},
		{register: "limit", value: -1.26, want: mul(-13, 0.1), wantWrite: "reg u3 20 fff3"},
		{register: "wide", value: json.Number("258"), want: uint64(258), wantWrite: "regs u9 30 4 0000000000000201"},
		{register: "pump", value: true, want: true, wantWrite: "coil u3 4 ff00"},
		{register: "pump", value: false, want: false, wantWrite: "coil u3 4 0000"},
		{register: "flag", value: true, want: true, wantWrite: "reg u3 40 0001"},
		{register: "holding:7", value: 7.0, want: uint64(7), wantWrite: "reg u3 7 0007"},
		{register: "hr:7@12", value: 65535.0, want: uint64(65535), wantWrite: "reg u12 7 ffff"},
		{register: "co:8", value: true, want: true, wantWrite: "coil u3 8 ff00"},
		{register: "level", value: 1.0, wantField: "register"},
		{register: "ir:9", value: 1.0, wantField: "register"},
		{register: "di:9", value: true, wantField: "register"},
		{register: "nosuch", value: 1.0, wantField: "register"},
		{register: "hr:7", value: 1.5, wantField: "value"},
		{register: "pump", value: 1.0, wantField: "value"},
		{register: "setpoint", value: "1.5", wantField: "value"},
	}
	for _, tt := range tests {
		t.Run(tt.register, func(t *testing.T) {
			f := newFake()
			a := newTestAdapter(t, ep, f)
			got, err := a.Write(context.Background(), tt.register, tt.value)
			if tt.wantField != "" {
				var fe *adapters.FieldError
				if !errors.As(err, &fe) || fe.Field != tt.wantField {
					t.Fatalf("Write(%s, %#v) = %#v, %v; want FieldError on %s", tt.register, tt.value, got, err, tt.wantField)
				}
				if len(f.writes) != 0 {
					t.Fatalf("invalid write sent %v", f.writes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("written %#v, want %#v", got, tt.want)
			}
			if !slices.Equal(f.writes, []string{tt.wantWrite}) {
				t.Errorf("requests %q, want %q", f.writes, tt.wantWrite)
			}
		})
	}
}

func TestWriteNotConnected(t *testing.T) {
	a, err := NewAdapter(testEndpoint(), adapters.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Write(context.Background(), "speed", 1.0); adapters.Classify(err) != adapters.CodeDeviceOffline {
		t.Fatalf("Write before Connect: %v", err)
	}
}

// mul multiplies at run time, as the adapter does; a constant expression
// like 234 * 0.1 would be exact.
func mul(a, b float64) float64 { return a * b }
