package discovery

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// TestPlanOptions: each scanner names the field of a bad option and
// enforces its caps.
func TestPlanOptions(t *testing.T) {
	known := []json.RawMessage{json.RawMessage(`{"host":"10.0.0.5","port":5020,"unitId":3}`)}
	for _, tc := range []struct {
		name  string
		sc    Scanner
		opts  string
		known []json.RawMessage
		want  []string // fields of the errors; none = valid
	}{
		{"modbus /24", ModbusScanner{}, `{"network":"127.0.0.0/24","ports":[1502]}`, nil, nil},
		{"modbus /23 too large", ModbusScanner{}, `{"network":"10.0.0.0/23"}`, nil, []string{"network"}},
		{"modbus bad cidr", ModbusScanner{}, `{"network":"10.0.0.0"}`, nil, []string{"network"}},
		{"modbus unknown key", ModbusScanner{}, `{"netwrk":"10.0.0.0/24"}`, nil, []string{"netwrk"}},
		{"modbus wrong type", ModbusScanner{}, `{"ports":"502"}`, nil, []string{"ports"}},
		{"modbus caps", ModbusScanner{}, `{"hosts":["a"],"ports":[1,2,3,4,5,6,7,8,9],"unitIds":[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17],"rate":501,"concurrency":-1,"timeoutMs":20}`,
			nil, []string{"concurrency", "ports", "rate", "timeoutMs", "unitIds"}},
		{"modbus too slow", ModbusScanner{}, `{"network":"10.0.0.0/24","ports":[1,2,3,4],"rate":1}`, nil, []string{"rate"}},
		{"modbus no target", ModbusScanner{}, `{}`, nil, []string{"network"}},
		{"modbus known hosts", ModbusScanner{}, `{}`, known, nil},
		{"opcua endpoint", OPCUAScanner{}, `{"endpointUrls":["opc.tcp://plc:4840"]}`, nil, nil},
		{"opcua bad url", OPCUAScanner{}, `{"endpointUrls":["http://plc"]}`, nil, []string{"endpointUrls[0]"}},
		{"opcua ports without hosts", OPCUAScanner{}, `{"ports":[4841]}`, nil, []string{"endpointUrls", "hosts"}},
		{"mqtt", MQTTScanner{}, `{"brokerUrl":"tcp://127.0.0.1:1883","topics":["a/#"],"durationMs":200}`, nil, nil},
		{"mqtt caps", MQTTScanner{}, `{"brokerUrl":"tcp://b:1883","durationMs":60001,"maxTopics":501,"topics":["a/#/b"]}`, nil,
			[]string{"durationMs", "maxTopics", "topics[0]"}},
		{"mqtt no broker", MQTTScanner{}, `{}`, nil, []string{"brokerUrl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.sc.Plan(json.RawMessage(tc.opts), tc.known)
			got := adapters.FieldsOf(err)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Plan(%s) fields %v (%v), want %v", tc.opts, got, err, tc.want)
			}
		})
	}
}

// TestModbusKnownTargets: without a target the configured endpoints'
// hosts, ports and unit ids are scanned.
func TestModbusKnownTargets(t *testing.T) {
	pl, err := ModbusScanner{}.Plan(nil, []json.RawMessage{json.RawMessage(`{"host":"10.0.0.5","port":5020,"unitId":3}`),
		json.RawMessage(`{"transport":"rtu","serialPort":"/dev/ttyS0"}`)})
	if err != nil {
		t.Fatal(err)
	}
	p := pl.(*modbusPlan)
	if !slices.Equal(p.hosts, []string{"10.0.0.5"}) || !slices.Equal(p.ports, []int{5020}) || !slices.Equal(p.units, []int{3}) {
		t.Fatalf("plan %+v", p)
	}
}

// TestCovers: identity per protocol decides whether an endpoint reaches
// a found device.
func TestCovers(t *testing.T) {
	mb := Device{Identity: modbusTarget{host: "10.0.0.5", port: 502, unit: 1}.identity()}
	op := Device{Identity: opcuaIdentity("opc.tcp://PLC:4840/ua/")}
	mq := Device{Identity: mqttIdentity("tcp://b:1883", "plant/a/temp"), Details: map[string]any{"topic": "plant/a/temp"}}
	for _, tc := range []struct {
		sc   Scanner
		conn string
		d    Device
		want bool
	}{
		{ModbusScanner{}, `{"host":"10.0.0.5"}`, mb, true},
		{ModbusScanner{}, `{"host":"10.0.0.5","unitId":2}`, mb, false},
		{ModbusScanner{}, `{"host":"10.0.0.5","port":503}`, mb, false},
		{OPCUAScanner{}, `{"endpointUrl":"opc.tcp://plc:4840/ua"}`, op, true},
		{OPCUAScanner{}, `{"endpointUrl":"opc.tcp://plc:4841/ua"}`, op, false},
		{MQTTScanner{}, `{"brokerUrl":"tcp://B:1883","topics":["plant/+/temp"]}`, mq, true},
		{MQTTScanner{}, `{"brokerUrl":"tcp://b:1883","topics":["plant/b/#"]}`, mq, false},
		{MQTTScanner{}, `{"brokerUrl":"tcp://c:1883","topics":["#"]}`, mq, false},
	} {
		if got := tc.sc.Covers(json.RawMessage(tc.conn), tc.d); got != tc.want {
			t.Errorf("%s Covers(%s, %s) = %v, want %v", tc.sc.Protocol(), tc.conn, tc.d.Identity, got, tc.want)
		}
	}
}

// TestEndpointDef: the template's connection is merged under the
// device's, its name is a prefix, and enabled defaults to true.
func TestEndpointDef(t *testing.T) {
	d := Device{Protocol: "modbus", Name: "modbus-h-502-unit1", Connection: json.RawMessage(`{"host":"h","port":502,"unitId":1}`)}
	got, err := endpointDef(json.RawMessage(`{"name":"auto-","poll_interval":500,"connection":{"timeoutMs":300,"host":"x"}}`), d)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"connection":{"host":"h","port":502,"timeoutMs":300,"unitId":1},"enabled":true,"name":"auto-modbus-h-502-unit1","poll_interval":500,"protocol":"modbus"}`
	if string(got) != want {
		t.Fatalf("def\n got %s\nwant %s", got, want)
	}
}
