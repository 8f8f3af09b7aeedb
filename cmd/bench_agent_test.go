package cmd

import (
	"strings"
	"testing"
	"time"
)

func TestBenchAgentOptionsValidate(t *testing.T) {
	ok := benchAgentOptions{modbus: "127.0.0.1:502", devices: 10, registers: 100, firstUnit: 1, interval: time.Second, duration: time.Minute}
	tests := []struct {
		name   string
		mutate func(*benchAgentOptions)
		want   string
	}{
		{"defaults", func(*benchAgentOptions) {}, ""},
		{"no server", func(o *benchAgentOptions) { o.modbus = "" }, "--modbus is required"},
		{"no port", func(o *benchAgentOptions) { o.modbus = "plc" }, "--modbus"},
		{"too many devices", func(o *benchAgentOptions) { o.devices = 300 }, "--devices"},
		{"units past 247", func(o *benchAgentOptions) { o.firstUnit = 240 }, "--first-unit"},
		{"no registers", func(o *benchAgentOptions) { o.registers = 0 }, "--registers"},
		{"interval too short", func(o *benchAgentOptions) { o.interval = time.Millisecond }, "--interval"},
		{"duration too short", func(o *benchAgentOptions) { o.duration = 0 }, "--duration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			err := o.validate()
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("validate = %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
