package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/control"
)

// TestTargetStateAppsIntegration: target-state writes carry apps; bad ones
// are refused naming the field; a fleet's template apps merge into each
// member's document by appName, the member's app of a name replacing the
// template's whole.
func TestTargetStateAppsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		lone := mustCreate(t, s, tenantA, NewAgent{Name: "lone"})
		own := `{"schemaVersion":1,"apps":[{"appId":1,"appName":"web","services":[{"serviceName":"main","imageName":"localhost/ticker:test",` +
			`"config":{"ports":["8080:80"],"environment":{"MODE":"edge"},"volumes":["data:/data"]}}]}]}`
		if _, err := s.SetTargetState(ctx, tenantA, lone.UUID, json.RawMessage(own), adminA, false); err != nil {
			t.Fatal(err)
		}
		doc, v := effective(t, s, lone.UUID)
		if v != 1 || len(doc.Apps) != 1 || doc.Apps[0].Services[0].Config.Environment["MODE"] != "edge" ||
			doc.Apps[0].Services[0].State != control.ServiceRunning || doc.Apps[0].Services[0].Config.Restart != "unless-stopped" {
			t.Fatalf("stored apps at %d: %+v", v, doc.Apps)
		}
		for _, tt := range []struct{ name, doc, field string }{
			{"bad port", `{"schemaVersion":1,"apps":[{"appId":1,"appName":"web","services":[{"serviceName":"main","imageName":"busybox","config":{"ports":["http"]}}]}]}`,
				"apps[0].services[0].config.ports[0]"},
			{"no services", `{"schemaVersion":1,"apps":[{"appId":1,"appName":"web"}]}`, "apps[0].services"},
			{"duplicate id", `{"schemaVersion":1,"apps":[{"appId":1,"appName":"a","services":[{"serviceName":"s","imageName":"busybox"}]},` +
				`{"appId":1,"appName":"b","services":[{"serviceName":"s","imageName":"busybox"}]}]}`, "apps[1].appId"},
		} {
			_, err := s.SetTargetState(ctx, tenantA, lone.UUID, json.RawMessage(tt.doc), adminA, false)
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("%s: %v, want ErrInvalid naming %s", tt.name, err, tt.field)
			}
		}
		if _, v := effective(t, s, lone.UUID); v != 1 {
			t.Errorf("refused writes moved the version to %d", v)
		}

		template := `{"schemaVersion":1,"apps":[` +
			`{"appId":1,"appName":"web","services":[{"serviceName":"main","imageName":"localhost/busybox:test"}]},` +
			`{"appId":2,"appName":"metrics","services":[{"serviceName":"agent","imageName":"localhost/ticker:test","state":"stopped"}]}]}`
		f := mustFleet(t, s, tenantA, "apps-fleet", json.RawMessage(template))
		member := mustCreate(t, s, tenantA, NewAgent{Name: "member", Fleet: f.ID, By: adminA})
		plain := mustCreate(t, s, tenantA, NewAgent{Name: "plain", Fleet: f.ID, By: adminA})
		memberOwn := `{"schemaVersion":1,"apps":[` +
			`{"appId":1,"appName":"web","services":[{"serviceName":"main","imageName":"localhost/ticker:test"},{"serviceName":"side","imageName":"localhost/busybox:test"}]},` +
			`{"appId":3,"appName":"local","services":[{"serviceName":"main","imageName":"localhost/busybox:test"}]}]}`
		if _, err := s.SetTargetState(ctx, tenantA, member.UUID, json.RawMessage(memberOwn), adminA, false); err != nil {
			t.Fatal(err)
		}
		doc, _ = effective(t, s, member.UUID)
		var names []string
		for _, a := range doc.Apps {
			names = append(names, a.AppName)
		}
		if strings.Join(names, ",") != "web,metrics,local" || len(doc.Apps[0].Services) != 2 || doc.Apps[0].Services[0].ImageName != "localhost/ticker:test" ||
			doc.Apps[1].Services[0].State != control.ServiceStopped {
			t.Errorf("member's merged apps %v: %+v", names, doc.Apps)
		}
		if doc, _ := effective(t, s, plain.UUID); len(doc.Apps) != 2 || doc.Apps[0].Services[0].ImageName != "localhost/busybox:test" {
			t.Errorf("the template's apps alone: %+v", doc.Apps)
		}
		// A member's app of another name reusing a template app's id makes
		// the merged document invalid.
		clash := `{"schemaVersion":1,"apps":[{"appId":2,"appName":"other","services":[{"serviceName":"main","imageName":"localhost/busybox:test"}]}]}`
		if _, err := s.SetTargetState(ctx, tenantA, plain.UUID, json.RawMessage(clash), adminA, false); !errors.Is(err, ErrInvalid) ||
			!strings.Contains(err.Error(), "appId") {
			t.Errorf("a member's app reusing the template's id: %v, want ErrInvalid naming appId", err)
		}
	})
}
