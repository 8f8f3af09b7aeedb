package control

import (
	"encoding/json"
	"testing"
)

func TestMergeTargetState(t *testing.T) {
	tests := []struct {
		name, template, own, want string
	}{
		{"no template", `{}`, `{"schemaVersion":1,"endpoints":[]}`, `{"schemaVersion":1,"endpoints":[]}`},
		{"no own document", `{"schemaVersion":1,"settings":{"logging":{"level":"info"}}}`, `{}`,
			`{"schemaVersion":1,"settings":{"logging":{"level":"info"}}}`},
		{"settings merge key by key",
			`{"schemaVersion":1,"settings":{"logging":{"level":"info","cloud":true},"intervals":{"statePollMs":30000}}}`,
			`{"schemaVersion":1,"settings":{"logging":{"level":"debug"},"runtime":{"x":[1]}}}`,
			`{"schemaVersion":1,"settings":{"intervals":{"statePollMs":30000},"logging":{"cloud":true,"level":"debug"},"runtime":{"x":[1]}}}`},
		{"endpoints replaced by name in place, own extras after",
			`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"modbus"},{"name":"b","protocol":"modbus"}]}`,
			`{"schemaVersion":1,"endpoints":[{"name":"c","protocol":"opcua"},{"name":"a","protocol":"modbus","poll_interval":500}]}`,
			`{"schemaVersion":1,"endpoints":[{"name":"a","protocol":"modbus","poll_interval":500},{"name":"b","protocol":"modbus"},{"name":"c","protocol":"opcua"}]}`},
		{"subscriptions of a destination the member routes are the member's",
			`{"schemaVersion":1,"destinations":[{"name":"d","type":"mqtt"},{"name":"e","type":"mqtt"}],"subscriptions":[{"destination":"d","topics":["#"]},{"destination":"e","topics":["#"]}]}`,
			`{"schemaVersion":1,"subscriptions":[{"destination":"d","topics":["a/#"]}]}`,
			`{"schemaVersion":1,"destinations":[{"name":"d","type":"mqtt"},{"name":"e","type":"mqtt"}],"subscriptions":[{"destination":"e","topics":["#"]},{"destination":"d","topics":["a/#"]}]}`},
		{"stopped wins", `{"schemaVersion":1,"runState":"stopped"}`, `{"schemaVersion":1,"runState":"running"}`,
			`{"schemaVersion":1,"runState":"stopped"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tmpl, err := ParseTargetStatePart([]byte(tt.template))
			if err != nil {
				t.Fatal(err)
			}
			own, err := ParseTargetStatePart([]byte(tt.own))
			if err != nil {
				t.Fatal(err)
			}
			got, err := json.Marshal(MergeTargetState(tmpl, own))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("merged\n got %s\nwant %s", got, tt.want)
			}
			// The merged document is whole: it parses as one.
			if _, err := ParseTargetState(got); err != nil {
				t.Fatalf("merged document does not parse: %v", err)
			}
		})
	}
}

func TestParseTargetStatePart(t *testing.T) {
	doc := `{"schemaVersion":1,"subscriptions":[{"destination":"fleet-dest","topics":["#"]}]}`
	if _, err := ParseTargetState([]byte(doc)); err == nil {
		t.Fatal("a whole document naming a destination it lacks was accepted")
	}
	if _, err := ParseTargetStatePart([]byte(doc)); err != nil {
		t.Fatalf("a part naming its fleet's destination was refused: %v", err)
	}
	if _, err := ParseTargetStatePart([]byte(`{"schemaVersion":1,"runState":"paused"}`)); err == nil {
		t.Fatal("an unknown runState was accepted")
	}
}
