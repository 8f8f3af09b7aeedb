package bench

import (
	"strings"
	"testing"
	"time"
)

func TestBenchAgentOptionsValidate(t *testing.T) {
	ok := AgentOptions{Modbus: "127.0.0.1:502", Devices: 10, Registers: 100, FirstUnit: 1, Interval: time.Second, Duration: time.Minute}
	tests := []struct {
		name   string
		mutate func(*AgentOptions)
		want   string
	}{
		{"defaults", func(*AgentOptions) {}, ""},
		{"no server", func(o *AgentOptions) { o.Modbus = "" }, "--modbus is required"},
		{"no port", func(o *AgentOptions) { o.Modbus = "plc" }, "--modbus"},
		{"too many devices", func(o *AgentOptions) { o.Devices = 300 }, "--devices"},
		{"units past 247", func(o *AgentOptions) { o.FirstUnit = 240 }, "--first-unit"},
		{"no registers", func(o *AgentOptions) { o.Registers = 0 }, "--registers"},
		{"interval too short", func(o *AgentOptions) { o.Interval = time.Millisecond }, "--interval"},
		{"duration too short", func(o *AgentOptions) { o.Duration = 0 }, "--duration"},
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
