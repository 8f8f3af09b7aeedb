package modbus

import (
	"testing"
)

func TestParseRegister(t *testing.T) {
	tests := []struct {
		in      string
		want    Register
		wantErr bool
	}{
		{in: "holding:0", want: Register{Area: Holding}},
		{in: "HR:100", want: Register{Area: Holding, Index: 100}},
		{in: "holding_register:65535", want: Register{Area: Holding, Index: 65535}},
		{in: "h:7", want: Register{Area: Holding, Index: 7}},
		{in: "input:1", want: Register{Area: Input, Index: 1}},
		{in: "ir:2", want: Register{Area: Input, Index: 2}},
		{in: "Input_Register:3", want: Register{Area: Input, Index: 3}},
		{in: "coil:4", want: Register{Area: Coil, Index: 4}},
		{in: "co:5", want: Register{Area: Coil, Index: 5}},
		{in: "COILS:6", want: Register{Area: Coil, Index: 6}},
		{in: "discrete:7", want: Register{Area: Discrete, Index: 7}},
		{in: "di:8", want: Register{Area: Discrete, Index: 8}},
		{in: "discrete_input:9", want: Register{Area: Discrete, Index: 9}},
		{in: " hr : 10 ", want: Register{Area: Holding, Index: 10}},
		{in: "hr:10@3", want: Register{Area: Holding, Index: 10, Unit: 3, HasUnit: true}},
		{in: "hr:10@0", want: Register{Area: Holding, Index: 10, Unit: 0, HasUnit: true}},
		{in: "hr:10@247", want: Register{Area: Holding, Index: 10, Unit: 247, HasUnit: true}},
		{in: "", wantErr: true},
		{in: "holding", wantErr: true},
		{in: "holding:", wantErr: true},
		{in: "holding:65536", wantErr: true},
		{in: "holding:-1", wantErr: true},
		{in: "holding:+1", wantErr: true},
		{in: "holding:0x10", wantErr: true},
		{in: "holding:1.5", wantErr: true},
		{in: "register:1", wantErr: true},
		{in: "40001", wantErr: true},
		{in: "hr:1@248", wantErr: true},
		{in: "hr:1@", wantErr: true},
		{in: "hr:1@x", wantErr: true},
		{in: "hr:99999999999999999999999", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseRegister(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseRegister(%q) = %+v, want an error", tt.in, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseRegister(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Fatalf("ParseRegister(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestRegisterString(t *testing.T) {
	tests := []struct {
		r    Register
		want string
	}{
		{Register{Area: Holding, Index: 1}, "holding:1"},
		{Register{Area: Input, Index: 65535}, "input:65535"},
		{Register{Area: Coil}, "coil:0"},
		{Register{Area: Discrete, Index: 9, Unit: 12, HasUnit: true}, "discrete:9@12"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}

// FuzzParseRegister checks that the parser never panics and that whatever
// it accepts formats to a canonical string that parses back to the same
// register.
func FuzzParseRegister(f *testing.F) {
	for _, s := range []string{"holding:0", "hr:65535", "coil:1@3", "di:7", "input_register:12@247", "x", "hr:-1", "hr:1@", ":", "@"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRegister(s)
		if err != nil {
			return
		}
		if r.Area < Coil || r.Area > Holding {
			t.Fatalf("ParseRegister(%q) accepted area %d", s, r.Area)
		}
		if r.HasUnit && r.Unit > MaxUnit {
			t.Fatalf("ParseRegister(%q) accepted unit %d", s, r.Unit)
		}
		canon := r.String()
		back, err := ParseRegister(canon)
		if err != nil {
			t.Fatalf("ParseRegister(%q) = %+v, but its String %q does not parse: %v", s, r, canon, err)
		}
		if back != r {
			t.Fatalf("round trip of %q: %+v -> %q -> %+v", s, r, canon, back)
		}
	})
}
