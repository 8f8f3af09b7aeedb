package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/roles/agent/publish/dest"
	"github.com/edgeplat/edgeplat/roles/agent/reconcile"
)

// targetDoc is a document with one Modbus endpoint (to a port nobody
// listens on: it runs and retries), a settings group and an MQTT
// destination with a subscription.
func targetDoc(port, poll int, endpoint string) string {
	return fmt.Sprintf(`{"schemaVersion":1,
		"settings":{"logging":{"level":"debug"}},
		"endpoints":[{"name":%q,"protocol":"modbus","poll_interval":%d,
			"connection":{"host":"127.0.0.1","port":%d,"unitId":1},
			"data_points":[{"name":"r0","register":"holding:0"}]}],
		"destinations":[{"name":"historian","type":"mqtt","config_json":{"url":"tcp://127.0.0.1:%d","username":"u","password":"s3cret"}}],
		"subscriptions":[{"destination":"historian","topics":["#"],"route_json":{"topic":"plant/a"}}]}`, endpoint, poll, port, port)
}

// since is the start time of a running endpoint, from its metrics.
func (r *running) since(name string) string {
	r.t.Helper()
	code, body := r.do("GET", "/v1/adapters/modbus/devices/"+name+"/metrics", "", nil)
	if code != 200 {
		r.t.Fatalf("metrics of %s: %d %s", name, code, body)
	}
	s, _ := decode(r.t, body)["since"].(string)
	if s == "" {
		r.t.Fatalf("metrics of %s have no since: %s", name, body)
	}
	return s
}

func (r *running) apply(version int64, doc string) error {
	st := r.agent.p.st.Load()
	return r.agent.p.cloud.target.Apply(context.Background(), st, version, json.RawMessage(doc), false)
}

// TestTargetStateApplyIsIdempotent applies documents to a running agent
// through the reconciler the pull calls: the first creates, the same
// content again changes nothing (no endpoint restart, same row ids), an
// invalid one is refused as a whole, and one that drops an endpoint
// removes it but leaves the local endpoint alone.
func TestTargetStateApplyIsIdempotent(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	port := coretest.FreePort(t)
	if code, body := r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"local-1","protocol":"modbus","poll_interval":60000,
		"connection":{"host":"127.0.0.1","port":%d},"data_points":[]}`, port), nil); code != 201 {
		t.Fatalf("local endpoint: %d %s", code, body)
	}
	localSince := r.since("local-1")

	if err := r.apply(1, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	st := r.agent.p.cloud.target.TargetStatus()
	if st.Version != 1 || st.AppliedAt == nil || st.Error != "" {
		t.Fatalf("status after v1: %+v", st)
	}
	if lvl := r.agent.p.settings.current().Logging.Level; lvl != "debug" {
		t.Fatalf("logging.level = %s, want debug", lvl)
	}
	since := r.since("plc1")
	_, dests := r.do("GET", "/v1/publish/destinations", "", nil)
	_, subs := r.do("GET", "/v1/publish/subscriptions", "", nil)
	if !strings.Contains(dests, `"name":"historian"`) || strings.Contains(dests, "s3cret") || !strings.Contains(subs, `"plant/a"`) {
		t.Fatalf("publishing after v1:\n%s\n%s", dests, subs)
	}

	// The same content under a new version: nothing restarts or is
	// rewritten.
	if err := r.apply(2, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	if got := r.since("plc1"); got != since {
		t.Fatalf("plc1 restarted by an identical document: since %s, was %s", got, since)
	}
	_, dests2 := r.do("GET", "/v1/publish/destinations", "", nil)
	_, subs2 := r.do("GET", "/v1/publish/subscriptions", "", nil)
	if dests2 != dests || subs2 != subs {
		t.Fatalf("publishing rewritten by an identical document:\n%s\n%s", dests2, subs2)
	}
	if st := r.agent.p.cloud.target.TargetStatus(); st.Version != 2 {
		t.Fatalf("status after v2: %+v", st)
	}

	// An invalid document (a poll interval under the minimum, a bad
	// setting) is refused whole: nothing changes, the error names both
	// fields.
	bad := strings.Replace(targetDoc(port, 5, "plc1"), `"level":"debug"`, `"level":"loud"`, 1)
	err := r.apply(3, bad)
	if err == nil || !strings.Contains(err.Error(), "endpoints[0].poll_interval") || !strings.Contains(err.Error(), "settings.logging.level") {
		t.Fatalf("invalid document: %v", err)
	}
	st = r.agent.p.cloud.target.TargetStatus()
	if st.Version != 2 || st.Refused != 3 || !strings.Contains(st.Error, "poll_interval") {
		t.Fatalf("status after the refusal: %+v", st)
	}
	if got := r.since("plc1"); got != since {
		t.Fatal("a refused document restarted the endpoint")
	}
	// The refused version is not retried until a new one comes.
	if err := r.apply(3, bad); err != nil {
		t.Fatalf("the refused version was applied again: %v", err)
	}

	// A changed endpoint restarts; a dropped one goes; the local one is
	// not the document's business.
	if err := r.apply(4, targetDoc(port, 2000, "plc2")); err != nil {
		t.Fatal(err)
	}
	if code, body := r.do("GET", "/v1/adapters/modbus/devices/plc1/metrics", "", nil); code != 404 {
		t.Fatalf("plc1 after it left the document: %d %s", code, body)
	}
	r.since("plc2")
	if got := r.since("local-1"); got != localSince {
		t.Fatal("reconciliation restarted an unmanaged local endpoint")
	}
	if st := r.agent.p.cloud.target.TargetStatus(); st.Version != 4 || st.Refused != 0 || st.Error != "" {
		t.Fatalf("status after v4: %+v", st)
	}
	if v, ok := r.agent.p.cloud.target.Managed(reconcile.KindEndpoint, "plc2"); !ok || v != 4 {
		t.Fatalf("plc2 managed = %v %d", ok, v)
	}
	if _, ok := r.agent.p.cloud.target.Managed(reconcile.KindEndpoint, "local-1"); ok {
		t.Fatal("the local endpoint counts as managed")
	}

	// The idle document ends what the cloud managed.
	if err := r.apply(5, `{}`); err != nil {
		t.Fatal(err)
	}
	_, eps := r.do("GET", "/v1/endpoints", "", nil)
	_, dests = r.do("GET", "/v1/publish/destinations", "", nil)
	if strings.Contains(eps, "plc2") || !strings.Contains(eps, "local-1") || strings.Contains(dests, "historian") {
		t.Fatalf("after the idle document:\n%s\n%s", eps, dests)
	}
}

// TestManagedItemsAnswer409 marks the agent provisioned and applies a
// document: local changes to what it names answer 409 naming the item,
// others pass; unprovisioned, nothing is guarded.
func TestManagedItemsAnswer409(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	port := coretest.FreePort(t)
	if err := r.apply(7, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	// Standalone: the local API is in charge.
	if code, body := r.do("PATCH", "/v1/endpoints/plc1", `{"poll_interval":3000}`, nil); code != 200 {
		t.Fatalf("standalone patch: %d %s", code, body)
	}
	st := r.agent.p.st.Load()
	if err := st.SetMeta(context.Background(), metaProvisioned, "true"); err != nil {
		t.Fatal(err)
	}
	_, dests := r.do("GET", "/v1/publish/destinations", "", nil)
	var dl struct {
		Publishers []struct {
			ID   int64  `json:"id"`
			Name string `json:"name"`
		} `json:"publishers"`
	}
	if err := json.Unmarshal([]byte(dests), &dl); err != nil || len(dl.Publishers) != 1 {
		t.Fatalf("destinations: %s %v", dests, err)
	}
	id := dl.Publishers[0].ID
	_, subs := r.do("GET", "/v1/publish/subscriptions", "", nil)
	var sl struct {
		Subscriptions []struct {
			ID int64 `json:"id"`
		} `json:"subscriptions"`
	}
	_ = json.Unmarshal([]byte(subs), &sl)
	if len(sl.Subscriptions) != 1 {
		t.Fatalf("subscriptions: %s", subs)
	}
	conflicts := []struct{ method, path, body, want string }{
		{"PATCH", "/v1/endpoints/plc1", `{"poll_interval":3000}`, `endpoint "plc1" is managed by the cloud's target state (version 7)`},
		{"DELETE", "/v1/endpoints/plc1", ``, `endpoint "plc1"`},
		{"DELETE", "/v1/endpoints", ``, `endpoint "plc1"`},
		{"POST", "/v1/endpoints", fmt.Sprintf(`{"name":"plc1","protocol":"modbus","connection":{"host":"127.0.0.1","port":%d}}`, port), `endpoint "plc1"`},
		{"PATCH", "/v1/settings", `{"logging":{"level":"info"}}`, `setting "logging.level" is managed`},
		{"PATCH", fmt.Sprintf("/v1/publish/destinations/%d", id), `{"enabled":false}`, `destination "historian"`},
		{"DELETE", fmt.Sprintf("/v1/publish/destinations/%d", id), ``, `destination "historian"`},
		{"POST", "/v1/publish/destinations", `{"name":"historian","type":"mqtt","config_json":{"url":"tcp://h:1883"}}`, `destination "historian"`},
		{"DELETE", fmt.Sprintf("/v1/publish/subscriptions/%d", sl.Subscriptions[0].ID), ``, `destination "historian"`},
		{"POST", "/v1/publish/subscriptions", fmt.Sprintf(`{"publish_destination_id":%d,"topics":["a"],"route_json":{"topic":"x"}}`, id), `destination "historian"`},
	}
	for _, c := range conflicts {
		code, body := r.do(c.method, c.path, c.body, nil)
		if code != 409 || !strings.Contains(errorOf(t, body), c.want) {
			t.Errorf("%s %s: %d %s, want 409 with %q", c.method, c.path, code, body, c.want)
		}
	}
	// What the document does not name stays the local API's.
	if code, body := r.do("PATCH", "/v1/settings", `{"intervals":{"statePollMs":5000}}`, nil); code != 200 {
		t.Fatalf("unmanaged setting: %d %s", code, body)
	}
	if code, body := r.do("POST", "/v1/endpoints", fmt.Sprintf(`{"name":"local-2","protocol":"modbus","connection":{"host":"127.0.0.1","port":%d}}`, port), nil); code != 201 {
		t.Fatalf("unmanaged endpoint: %d %s", code, body)
	}
	if code, body := r.do("PATCH", "/v1/endpoints/local-2", `{"name":"plc1"}`, nil); code != 409 {
		t.Fatalf("renaming onto a managed name: %d %s", code, body)
	}
	// The next document restores what the standalone patch changed.
	if err := r.apply(8, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	_, eps := r.do("GET", "/v1/endpoints?protocol=modbus", "", nil)
	if !strings.Contains(eps, `"poll_interval":1000`) {
		t.Fatalf("plc1 not reconciled: %s", eps)
	}
}

// TestSecretKeysMatchTheDestinations keeps the document's secret keys a
// superset of the keys the destinations hold secrets in.
func TestSecretKeysMatchTheDestinations(t *testing.T) {
	for _, k := range append([]string{connectionPassword}, dest.SecretKeys...) {
		found := false
		for _, c := range control.SecretKeys {
			found = found || c == k
		}
		if !found {
			t.Errorf("control.SecretKeys lacks %q", k)
		}
	}
}

// TestTargetStateContentChangeAndStart: a version whose content changed
// (a secret value the cloud resolved anew) is applied again, a refused
// version is retried once its content changes, and a provisioned agent
// applies its cached target state at start.
func TestTargetStateContentChangeAndStart(t *testing.T) {
	dir := t.TempDir()
	r := startAgent(t, dir, true, nil)
	port := coretest.FreePort(t)
	if err := r.apply(1, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	stored := func() string {
		st := r.agent.p.st.Load()
		ds, err := st.Publishing().Destinations(context.Background(), true)
		if err != nil || len(ds) != 1 {
			t.Fatalf("destinations: %v %v", ds, err)
		}
		return string(ds[0].Config)
	}
	if !strings.Contains(stored(), `"s3cret"`) {
		t.Fatalf("destination config: %s", stored())
	}
	if err := r.apply(1, strings.Replace(targetDoc(port, 1000, "plc1"), "s3cret", "rotated", 1)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stored(), `"rotated"`) {
		t.Fatalf("a changed secret of the same version was not applied: %s", stored())
	}
	// Refused for a missing secret, then the same version resolved.
	unresolved := strings.Replace(targetDoc(port, 1000, "plc1"), `"s3cret"`, `{"secretRef":"pw"}`, 1)
	if err := r.apply(2, unresolved); err == nil || !strings.Contains(err.Error(), `secret "pw" is not set on the cloud`) {
		t.Fatalf("unresolved secret: %v", err)
	}
	if err := r.apply(2, targetDoc(port, 1000, "plc1")); err != nil {
		t.Fatal(err)
	}
	if st := r.agent.p.cloud.target.TargetStatus(); st.Version != 2 || st.Error != "" {
		t.Fatalf("status after the resolved retry: %+v", st)
	}
	if !strings.Contains(stored(), `"s3cret"`) {
		t.Fatalf("destination after the resolved retry: %s", stored())
	}

	// A provisioned agent with a cached target state it never applied
	// (an older build cached it, or it arrived at provisioning) applies
	// it at start.
	st := r.agent.p.st.Load()
	cached, _ := json.Marshal(map[string]any{"version": 9, "state": json.RawMessage(targetDoc(port, 1000, "plc9")), "updatedAt": "2026-11-29T10:00:00Z"})
	for k, v := range map[string]string{metaProvisioned: "true", metaTargetState: string(cached)} {
		if err := st.SetMeta(context.Background(), k, v); err != nil {
			t.Fatal(err)
		}
	}
	r.stop()
	r = startAgent(t, dir, true, nil)
	if st := r.agent.p.cloud.target.TargetStatus(); st.Version != 9 || st.Error != "" {
		t.Fatalf("status after start: %+v", st)
	}
	r.since("plc9")
	if code, _ := r.do("GET", "/v1/adapters/modbus/devices/plc1/metrics", "", nil); code != 404 {
		t.Fatalf("plc1 of the previous document still runs after start: %d", code)
	}
}
