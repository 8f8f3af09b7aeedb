package modbus

import (
	"bytes"
	"encoding/hex"
	"math"
	"testing"
)

// Wire layouts of one value in the four orders. BB is plain Modbus (big
// bytes, big words); LB swaps the bytes of every register; BL reverses
// the registers (the common "word swap" of 32-bit PLC values); LL both.
type orders struct{ BB, LB, BL, LL string }

func TestDecodeEncodeEveryTypeAndOrder(t *testing.T) {
	tests := []struct {
		typ  Type
		want any
		wire orders
	}{
		{Bool, true, orders{"0001", "0100", "0001", "0100"}},
		{Bool, false, orders{"0000", "0000", "0000", "0000"}},
		{Uint16, uint64(0x1234), orders{"1234", "3412", "1234", "3412"}},
		{Int16, int64(-2), orders{"fffe", "feff", "fffe", "feff"}},
		{Uint32, uint64(0x12345678), orders{"12345678", "34127856", "56781234", "78563412"}},
		{Int32, int64(-123456789), orders{"f8a432eb", "a4f8eb32", "32ebf8a4", "eb32a4f8"}},
		{Float32, float64(float32(-273.15)), orders{"c3889333", "88c33393", "9333c388", "339388c3"}},
		{Float32, 1.5, orders{"3fc00000", "c03f0000", "00003fc0", "0000c03f"}},
		{Uint64, uint64(0x0102030405060708), orders{"0102030405060708", "0201040306050807", "0708050603040102", "0807060504030201"}},
		{Uint64, uint64(math.MaxUint64), orders{"ffffffffffffffff", "ffffffffffffffff", "ffffffffffffffff", "ffffffffffffffff"}},
		{Int64, int64(-1234567890123), orders{"fffffee08e04fb35", "ffffe0fe048e35fb", "fb358e04fee0ffff", "35fb048ee0feffff"}},
		{Float64, math.Pi, orders{"400921fb54442d18", "0940fb214454182d", "2d18544421fb4009", "182d4454fb210940"}},
	}
	for _, tt := range tests {
		for _, o := range []struct {
			name string
			l    layout
			wire string
		}{
			{"big/big", layout{}, tt.wire.BB},
			{"little/big", layout{littleBytes: true}, tt.wire.LB},
			{"big/little", layout{littleWords: true}, tt.wire.BL},
			{"little/little", layout{littleBytes: true, littleWords: true}, tt.wire.LL},
		} {
			t.Run(tt.typ.String()+" "+o.name+" "+o.wire, func(t *testing.T) {
				raw, err := hex.DecodeString(o.wire)
				if err != nil {
					t.Fatal(err)
				}
				got, err := decodeRegisters(raw, tt.typ, o.l)
				if err != nil {
					t.Fatal(err)
				}
				if got != tt.want {
					t.Fatalf("decode %s = %#v, want %#v", o.wire, got, tt.want)
				}
				enc, err := encodeRegisters(tt.want, tt.typ, o.l)
				if err != nil {
					t.Fatal(err)
				}
				if tt.typ == Bool && !tt.want.(bool) {
					raw = make([]byte, 2)
				}
				if !bytes.Equal(enc, raw) {
					t.Fatalf("encode %#v = %x, want %s", tt.want, enc, o.wire)
				}
			})
		}
	}
}

func TestDecodeBoolFromAnyNonZeroRegister(t *testing.T) {
	for _, w := range []string{"0100", "8000", "ffff"} {
		raw, _ := hex.DecodeString(w)
		if v, err := decodeRegisters(raw, Bool, layout{}); err != nil || v != true {
			t.Errorf("bool %s = %v, %v", w, v, err)
		}
	}
}

func TestDecodeWrongLength(t *testing.T) {
	if _, err := decodeRegisters([]byte{1, 2}, Uint32, layout{}); err == nil {
		t.Fatal("decoded a uint32 from one register")
	}
}

func TestApplyScale(t *testing.T) {
	tests := []struct {
		in    any
		scale float64
		want  any
	}{
		{uint64(250), 1, uint64(250)},
		{int64(-5), 1, int64(-5)},
		{uint64(250), 0.5, 125.0},
		{int64(-5), 2, -10.0},
		{1.5, -2, -3.0},
		{true, 1, true},
	}
	for _, tt := range tests {
		if got := applyScale(tt.in, tt.scale); got != tt.want {
			t.Errorf("applyScale(%#v, %v) = %#v, want %#v", tt.in, tt.scale, got, tt.want)
		}
	}
}

func TestBitAt(t *testing.T) {
	b := []byte{0b1000_0101, 0b0000_0010}
	want := map[int]bool{0: true, 1: false, 2: true, 7: true, 8: false, 9: true, 15: false}
	for i, w := range want {
		if got, err := bitAt(b, i); err != nil || got != w {
			t.Errorf("bitAt(%d) = %v, %v; want %v", i, got, err, w)
		}
	}
	if _, err := bitAt(b, 16); err == nil {
		t.Error("bitAt past the response did not fail")
	}
}
