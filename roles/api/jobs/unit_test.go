package jobs

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

func TestResolve(t *testing.T) {
	declared := []Parameter{{Name: "ep", Required: true}, {Name: "reg", Default: json.RawMessage(`40001`)}, {Name: "note"}}
	for _, tt := range []struct {
		name, params, values, want, err string
	}{
		{"whole string keeps the type", `{"endpoint":"{{ep}}","register":"{{reg}}"}`, `{"ep":{"host":"plc"}}`, `{"endpoint":{"host":"plc"},"register":40001}`, ""},
		{"inside a string", `{"endpoint":"plc-{{ep}}:{{reg}}"}`, `{"ep":"3"}`, `{"endpoint":"plc-3:40001"}`, ""},
		{"value over default", `{"r":"{{ reg }}"}`, `{"ep":1,"reg":7}`, `{"r":7}`, ""},
		{"optional without default", `{"n":"{{note}}","l":["{{ep}}"]}`, `{"ep":true}`, `{"l":[true],"n":""}`, ""},
		{"required missing", `{}`, `{}`, "", "parameters.ep"},
		{"unknown", `{}`, `{"ep":1,"speed":2}`, "", "parameters.speed"},
	} {
		var values map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tt.values), &values); err != nil {
			t.Fatal(err)
		}
		got, err := resolve(json.RawMessage(tt.params), declared, values)
		if tt.err != "" {
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.err)
			}
			continue
		}
		if err != nil || canon(got) != tt.want {
			t.Errorf("%s: %s %v, want %s", tt.name, got, err, tt.want)
		}
	}
}

func TestShouldAbort(t *testing.T) {
	for _, tt := range []struct {
		pct, minExec, failed, finished int
		want                           bool
	}{
		{50, 2, 1, 1, false}, // under minExecuted
		{50, 2, 1, 2, false}, // 50 % is not more than 50 %
		{50, 2, 2, 2, true},
		{50, 2, 2, 3, true},
		{0, 1, 5, 5, false}, // off
		{100, 1, 5, 5, false},
		{10, 0, 1, 1, true}, // minExecuted 0 counts as 1
	} {
		if got := ShouldAbort(tt.pct, tt.minExec, tt.failed, tt.finished); got != tt.want {
			t.Errorf("ShouldAbort(%d, %d, %d, %d) = %v", tt.pct, tt.minExec, tt.failed, tt.finished, got)
		}
	}
}

func TestTemplateCheck(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   TemplateInput
		err  string
	}{
		{"ok", TemplateInput{Name: "a", Handler: "shell", Params: json.RawMessage(`{"command":"{{c}}"}`), Parameters: []Parameter{{Name: "c"}}}, ""},
		{"no params is {}", TemplateInput{Name: "a", Handler: "sync"}, ""},
		{"name", TemplateInput{Name: " ", Handler: "sync"}, "name"},
		{"parameter name", TemplateInput{Name: "a", Handler: "sync", Parameters: []Parameter{{Name: "1x"}}}, "parameters[0].name"},
		{"twice", TemplateInput{Name: "a", Handler: "sync", Parameters: []Parameter{{Name: "x"}, {Name: "x"}}}, "parameters[1].name"},
		{"bad default", TemplateInput{Name: "a", Handler: "sync", Parameters: []Parameter{{Name: "x", Default: json.RawMessage(`{`)}}}, "parameters[0].default"},
		{"undeclared", TemplateInput{Name: "a", Handler: "sync", Params: json.RawMessage(`{"a":"{{b}}"}`)}, "{{b}}"},
		{"params too large", TemplateInput{Name: "a", Handler: "sync", Params: json.RawMessage(`{"a":"` + strings.Repeat("x", 17<<10) + `"}`)}, "params"},
	} {
		err := tt.in.check()
		if tt.err == "" {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.err) {
			t.Errorf("%s: %v, want an error naming %s", tt.name, err, tt.err)
		}
	}
}

func TestParseFilter(t *testing.T) {
	f, err := parseFilter(apitest.TenantA, "failed", "A1000000-0000-4000-8000-000000000001", "", "5", "2s")
	if err != nil || f.status != "failed" || f.agent != apitest.AgentA1 || f.limit != 5 || f.after != 100 {
		t.Fatalf("parseFilter = %+v %v", f, err)
	}
	if f, err := parseFilter(apitest.TenantA, "", "", "", "", ""); err != nil || f.limit != DefaultLimit {
		t.Fatalf("defaults = %+v %v", f, err)
	}
}
