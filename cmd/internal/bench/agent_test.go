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

func TestCompareAnomaly(t *testing.T) {
	good := agentReport{Pass: true, CPUPercent: 1.0, RSSMaxMB: 28}
	tests := []struct {
		name      string
		off, on   agentReport
		wantRatio float64
		wantPass  bool
	}{
		{"within 10 %", good, agentReport{Pass: true, CPUPercent: 1.08, RSSMaxMB: 29.5}, 1.08, true},
		{"over 10 %", good, agentReport{Pass: true, CPUPercent: 1.2, RSSMaxMB: 29}, 1.2, false},
		{"the agent with detection over its own targets", good, agentReport{Pass: false, CPUPercent: 1.0, RSSMaxMB: 31}, 1, false},
		{"no CPU measured without detection", agentReport{Pass: true}, good, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := compareAnomaly(tt.off, tt.on)
			if diff := c.CPURatio - tt.wantRatio; diff > 1e-9 || diff < -1e-9 || c.Pass != tt.wantPass {
				t.Fatalf("ratio %v pass %v, want %v %v", c.CPURatio, c.Pass, tt.wantRatio, tt.wantPass)
			}
			if c.RSSMaxDeltaMB != tt.on.RSSMaxMB-tt.off.RSSMaxMB {
				t.Fatalf("RSS delta %v", c.RSSMaxDeltaMB)
			}
		})
	}
}
