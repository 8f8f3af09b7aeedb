package control

import (
	"encoding/json"
	"strings"
	"testing"
)

const goodDoc = `{"schemaVersion":1,
	"settings":{"logging":{"level":"debug"}},
	"endpoints":[{"name":"plc1","protocol":"modbus","connection":{"host":"10.0.0.5","port":502,"password":{"secretRef":"plc-pw"}},
		"poll_interval":1000,"data_points":[{"name":"t","register":"holding:0"}]}],
	"destinations":[{"name":"hist","type":"tsdb","config_json":{"url":"http://h:8086","token":{"secretRef":"influx"}},"enabled":true}],
	"subscriptions":[{"destination":"hist","topics":["#"],"route_json":{"topic":"x"}}]}`

func TestParseTargetState(t *testing.T) {
	d, err := ParseTargetState([]byte(goodDoc))
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Endpoints) != 1 || d.Endpoints[0].Name != "plc1" || *d.Endpoints[0].PollInterval != 1000 ||
		len(d.Destinations) != 1 || len(d.Subscriptions) != 1 || d.Settings["logging"] == nil {
		t.Fatalf("parsed %+v", d)
	}
	if got := strings.Join(d.SecretRefs(), ","); got != "influx,plc-pw" {
		t.Fatalf("SecretRefs = %s", got)
	}
	// The document round-trips through MarshalJSON.
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	d2, err := ParseTargetState(b)
	if err != nil {
		t.Fatalf("re-parse of %s: %v", b, err)
	}
	if b2, _ := json.Marshal(d2); string(b2) != string(b) {
		t.Fatalf("round trip changed the document:\n%s\n%s", b, b2)
	}
	// An empty managed list stays managed; an absent section stays absent.
	e, err := ParseTargetState([]byte(`{"schemaVersion":1,"endpoints":[]}`))
	if err != nil || e.Endpoints == nil || e.Destinations != nil {
		t.Fatalf("empty list: %+v %v", e, err)
	}
	if b, _ := json.Marshal(e); string(b) != `{"schemaVersion":1,"endpoints":[]}` {
		t.Fatalf("empty list marshals as %s", b)
	}
	if e, err := ParseTargetState([]byte(`{}`)); err != nil || !e.Empty() {
		t.Fatalf("idle document: %+v %v", e, err)
	}
}

func TestParseTargetStateErrorsNameTheField(t *testing.T) {
	tests := map[string]struct{ doc, path string }{
		"no version":       {`{"endpoints":[]}`, "schemaVersion: is required"},
		"future version":   {`{"schemaVersion":2}`, "schemaVersion: must be 1"},
		"unknown section":  {`{"schemaVersion":1,"widgets":{}}`, "widgets: unknown field"},
		"not an object":    {`[]`, "state: "},
		"trailing":         {`{"schemaVersion":1} {}`, "state: trailing data"},
		"endpoints object": {`{"schemaVersion":1,"endpoints":{}}`, "endpoints: must be an array"},
		"unnamed":          {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"modbus"},{"name":"b","protocol":"modbus"},{"protocol":"modbus"}]}`, "endpoints[2].name: is required"},
		"duplicate":        {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"m"},{"name":"a","protocol":"m"}]}`, `endpoints[1].name: an endpoint "a" is named already at index 0`},
		"slash":            {`{"schemaVersion":1,"endpoints":[{"name":"a/b","protocol":"m"}]}`, "endpoints[0].name: must not contain '/'"},
		"unknown field":    {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"m","uuid":"x"}]}`, "endpoints[0].uuid: unknown field"},
		"wrong type":       {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"m","poll_interval":"fast"}]}`, "endpoints[0].poll_interval: must be an integer"},
		"null":             {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"m","connection":null}]}`, "endpoints[0].connection: must not be null"},
		"data point":       {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"m","data_points":[{},3]}]}`, "endpoints[0].data_points[1]: "},
		"no protocol":      {`{"schemaVersion":1,"endpoints":[{"name":"a"}]}`, "endpoints[0].protocol: is required"},
		"secret value":     {`{"schemaVersion":1,"destinations":[{"name":"d","type":"mqtt","config_json":{"password":"hunter2"}}]}`, "destinations[0].config_json.password: a secret must be a reference"},
		"endpoint secret":  {`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"opcua","connection":{"password":"pw"}}]}`, "endpoints[0].connection.password: a secret must be a reference"},
		"bad ref":          {`{"schemaVersion":1,"destinations":[{"name":"d","type":"mqtt","config_json":{"token":{"secretRef":"a b"}}}]}`, "destinations[0].config_json.token.secretRef: must be"},
		"dangling sub":     {`{"schemaVersion":1,"destinations":[],"subscriptions":[{"destination":"x"}]}`, `subscriptions[0].destination: no destination "x"`},
		"settings group":   {`{"schemaVersion":1,"settings":{"logging":"debug"}}`, "settings.logging: must be an object"},
		"too large":        {`{"schemaVersion":1,"x":"` + strings.Repeat("a", MaxTargetStateBytes) + `"}`, "over the"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseTargetState([]byte(tt.doc))
			if err == nil || !strings.Contains(err.Error(), tt.path) {
				t.Fatalf("error %v, want one containing %q", err, tt.path)
			}
		})
	}
}

func TestResolveSecrets(t *testing.T) {
	vals := map[string]string{"influx": "tok-1"}
	out, err := ResolveSecrets(json.RawMessage(goodDoc), func(n string) (string, bool) { v, ok := vals[n]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"token":"tok-1"`) || !strings.Contains(string(out), `"password":{"secretRef":"plc-pw"}`) {
		t.Fatalf("resolved: %s", out)
	}
	// The agent refuses the reference the cloud could not resolve, naming it.
	_, err = ParseResolvedTargetState(out)
	if err == nil || !strings.Contains(err.Error(), `endpoints[0].connection.password: secret "plc-pw" is not set on the cloud`) {
		t.Fatalf("resolved parse: %v", err)
	}
	vals["plc-pw"] = "pw"
	out, _ = ResolveSecrets(json.RawMessage(goodDoc), func(n string) (string, bool) { v, ok := vals[n]; return v, ok })
	if _, err := ParseResolvedTargetState(out); err != nil {
		t.Fatalf("fully resolved document refused: %v", err)
	}
	// A user cannot write a value; the agent reads one.
	if _, err := ParseTargetState(out); err == nil {
		t.Fatal("a document with secret values was accepted as user input")
	}
}

func FuzzParseTargetState(f *testing.F) {
	f.Add([]byte(goodDoc))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"schemaVersion":1,"endpoints":[],"subscriptions":[{"destination":"x"}]}`))
	f.Add([]byte(`{"schemaVersion":1,"settings":{"a":{}},"destinations":[{"name":"d","type":"t","config_json":{"token":{"secretRef":"s"}}}]}`))
	f.Add([]byte(`{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[{"serviceName":"s","imageName":"localhost/busybox:test","config":{"ports":["8080:80/udp"],"environment":{"A":"1"},"volumes":["data:/data:ro"]}}]}]}`))
	f.Add([]byte(`{"schemaVersion":1,"apps":[{"appId":1,"appName":"0","services":[]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, parse := range []func([]byte) (TargetStateDoc, error){ParseTargetState, ParseResolvedTargetState} {
			d, err := parse(b)
			if err != nil {
				return
			}
			// An accepted document re-encodes to one the parser accepts
			// and that encodes the same: the cloud stores what it parsed.
			out, err := json.Marshal(d)
			if err != nil {
				t.Fatalf("marshal accepted %q: %v", b, err)
			}
			d2, err := parse(out)
			if err != nil {
				t.Fatalf("re-parse of %s (from %q): %v", out, b, err)
			}
			if out2, _ := json.Marshal(d2); string(out2) != string(out) {
				t.Fatalf("not stable: %s vs %s", out, out2)
			}
		}
	})
}
