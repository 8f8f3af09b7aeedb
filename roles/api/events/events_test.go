package events

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// The three versions of TestCompareAndReplayIntegration.
var (
	docV1 = `{"schemaVersion":1,"settings":{"logging":{"level":"info"},"runtime":{"maxMemoryMb":4096}}}`
	docV2 = `{"schemaVersion":1,"settings":{"logging":{"level":"debug"},"runtime":{"maxMemoryMb":4096}}}`
	docV3 = `{"schemaVersion":1,"runState":"stopped","settings":{"logging":{"level":"debug"},"runtime":{"maxMemoryMb":2048}}}`
)

// TestCompareAndReplayIntegration: after three target-state changes,
// compare of versions 1 and 3 names exactly the changed fields; a replay
// to version 2 is a dry run by default, and with apply writes version 2's
// content as a new version through the registry's one writer (whose
// observer is what tells the agent), audited as agent.target_state.
func TestCompareAndReplayIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		a := apitest.AgentA2
		for i, doc := range []string{docV1, docV2, docV3} {
			if v := h.setTarget(a, doc); v != int64(i+1) {
				t.Fatalf("version %d, want %d", v, i+1)
			}
		}
		r := h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a",
			map[string]any{"from": map[string]any{"version": 1}, "to": map[string]any{"version": 3}}).Expect(t, "compare", http.StatusOK)
		var got struct {
			Changes   []Change `json:"changes"`
			Identical bool     `json:"identical"`
			From, To  Snapshot
		}
		if err := json.Unmarshal([]byte(r.Raw), &got); err != nil {
			t.Fatal(err)
		}
		want := []Change{
			{Path: "/runState", Op: OpAdded, To: "stopped"},
			{Path: "/settings/logging/level", Op: OpChanged, From: "info", To: "debug"},
			{Path: "/settings/runtime/maxMemoryMb", Op: OpChanged, From: 4096.0, To: 2048.0},
		}
		if !reflect.DeepEqual(got.Changes, want) || got.Identical {
			t.Errorf("compare 1..3:\n got %v\nwant %v", got.Changes, want)
		}
		if got.From.Version != 1 || got.To.Version != 3 || got.From.EventID != "target_state:"+a+":1" {
			t.Errorf("compare points: from %+v to %+v", got.From, got.To)
		}
		// By event id, and "to" defaulting to the current state: the same.
		r = h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a",
			map[string]any{"from": map[string]any{"eventId": "target_state:" + a + ":1"}}).Expect(t, "compare by id", http.StatusOK)
		if n := len(r.List("changes")); n != 3 {
			t.Errorf("compare by event id to now: %d changes, want 3: %s", n, r.Raw)
		}

		// Dry run: version 2's document, nothing written.
		r = h.call(http.MethodPost, "/events/device/"+a+"/replay", "member-a",
			map[string]any{"to": map[string]any{"version": 2}}).Expect(t, "dry run", http.StatusOK)
		if r.Body["dryRun"] != true || r.Body["applied"] != nil {
			t.Errorf("dry run answered %s", r.Raw)
		}
		assertJSON(t, "dry-run state", r.Body["state"], docV2)
		if n := len(r.List("changes")); n != 2 {
			t.Errorf("dry run: %d changes from the current state, want 2 (runState, maxMemoryMb): %s", n, r.Raw)
		}
		if ts, _ := h.reg.TargetState(t.Context(), apitest.TenantA, a); ts.Version != 3 {
			t.Fatalf("a dry run moved the version to %d", ts.Version)
		}

		// A member may not apply, as it may not PUT the target state.
		h.call(http.MethodPost, "/events/device/"+a+"/replay", "member-a",
			map[string]any{"to": map[string]any{"version": 2}, "apply": true}).ExpectError(t, http.StatusForbidden, "forbidden")

		h.mu.Lock()
		before := len(h.changes)
		h.mu.Unlock()
		r = h.call(http.MethodPost, "/events/device/"+a+"/replay", "admin-a",
			map[string]any{"to": map[string]any{"version": 2}, "apply": true}).Expect(t, "apply", http.StatusOK)
		applied, _ := r.Body["applied"].(map[string]any)
		if v, _ := applied["version"].(float64); v != 4 {
			t.Fatalf("apply answered %s, want version 4", r.Raw)
		}
		ts, err := h.reg.TargetState(t.Context(), apitest.TenantA, a)
		if err != nil || ts.Version != 4 {
			t.Fatalf("target state after apply: %+v %v", ts, err)
		}
		assertJSON(t, "target state after apply", ts.State, docV2)
		h.mu.Lock()
		notices := slices.Clone(h.changes[before:])
		h.mu.Unlock()
		if len(notices) != 1 || notices[0].State.Version != 4 || notices[0].Tenant != apitest.TenantA {
			t.Errorf("the registry's observer heard %+v, want version 4 once", notices)
		}
		// The replay is audited as the target-state route's writes are,
		// and it is in the log.
		r = h.call(http.MethodGet, "/events/device/"+a+query("kind", "agent.target_state"), "admin-a", nil).Expect(t, "audit", http.StatusOK)
		evs := r.List("events")
		if len(evs) != 1 {
			t.Fatalf("agent.target_state events: %s", r.Raw)
		}
		if d := evs[0].(map[string]any)["detail"].(map[string]any); d["version"] != 4.0 || d["replayOf"] != 2.0 {
			t.Errorf("replay audit detail %v", d)
		}
		// And version 4 is a version like any: compare 2 and 4 is empty.
		r = h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a",
			map[string]any{"from": map[string]any{"version": 2}, "to": map[string]any{"version": 4}}).Expect(t, "compare 2..4", http.StatusOK)
		if r.Body["identical"] != true {
			t.Errorf("compare 2..4: %s", r.Raw)
		}
	})
}

func assertJSON(t *testing.T, what string, got any, want string) {
	t.Helper()
	var g, w any
	raw, ok := got.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		raw = b
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %s, want %s", what, raw, want)
	}
}

// TestStateSnapshotsIntegration: a state report is kept only when what
// the agent reports changed (times and counters aside), and a compare of
// two reported states names only what changed.
func TestStateSnapshotsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		a := apitest.AgentA1
		t0 := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Millisecond)
		rep := func(runState string, polls int, at time.Time) map[string]any {
			return map[string]any{"timestamp": at.UnixMilli(), "uuid": a, "state": "RUNNING", "runState": runState,
				"targetState": map[string]any{"version": 2},
				"endpoints":   []any{map[string]any{"name": "plc1", "protocol": "modbus", "status": "connected", "polls": polls, "lastPoll": at.Format(time.RFC3339Nano)}}}
		}
		h.report(a, rep("running", 1, t0), t0)
		h.report(a, rep("running", 7, t0.Add(time.Minute)), t0.Add(time.Minute))
		h.report(a, rep("running", 9, t0.Add(2*time.Minute)), t0.Add(2*time.Minute))
		if n := h.count(`SELECT COUNT(*) FROM agent_state_snapshots WHERE agent_uuid = $1`, a); n != 1 {
			t.Fatalf("%d snapshots of one unchanged state, want 1", n)
		}
		h.report(a, rep("stopped", 12, t0.Add(3*time.Minute)), t0.Add(3*time.Minute))
		// A fresh writer (another replica, a restart) reads the last hash.
		h.snaps = NewSnapshots(h.d, NewMetrics(nil))
		h.report(a, rep("stopped", 13, t0.Add(4*time.Minute)), t0.Add(4*time.Minute))
		if n := h.count(`SELECT COUNT(*) FROM agent_state_snapshots WHERE agent_uuid = $1`, a); n != 2 {
			t.Fatalf("%d snapshots after one change, want 2", n)
		}
		// An agent of no registry is not kept.
		h.reportIn(apitest.TenantA, "c0000000-0000-4000-8000-000000000009", rep("running", 1, t0), t0)
		if n := h.count(`SELECT COUNT(*) FROM agent_state_snapshots`); n != 2 {
			t.Errorf("%d snapshots in all, want 2", n)
		}

		r := h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a", map[string]any{"state": "reported",
			"from": map[string]any{"at": t0.Add(90 * time.Second).Format(time.RFC3339Nano)}}).Expect(t, "compare reported", http.StatusOK)
		var got struct{ Changes []Change }
		if err := json.Unmarshal([]byte(r.Raw), &got); err != nil {
			t.Fatal(err)
		}
		want := []Change{{Path: "/runState", Op: OpChanged, From: "running", To: "stopped"}}
		if !reflect.DeepEqual(got.Changes, want) {
			t.Errorf("reported compare: %v, want %v", got.Changes, want)
		}
		// The timeline shows the two snapshots with what the agent ran.
		r = h.call(http.MethodGet, "/events/device/"+a+"/timeline"+query("kind", KindStateReport), "member-a", nil).Expect(t, "timeline", http.StatusOK)
		evs := r.List("events")
		if len(evs) != 2 {
			t.Fatalf("timeline: %s", r.Raw)
		}
		d := evs[1].(map[string]any)["detail"].(map[string]any)
		if d["runState"] != "stopped" || d["targetVersion"] != 2.0 {
			t.Errorf("second snapshot detail %v", d)
		}
		// A reported state has no version to name.
		h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a", map[string]any{"state": "reported",
			"from": map[string]any{"version": 1}}).ExpectError(t, http.StatusBadRequest, "invalid_parameter")
	})
}

// TestFiltersIntegration: search by kind (exact and family), agent, time
// range and text; stats by kind and bucket; the timeline oldest first and
// paged by its cursor; recent newest first, paged without repeats or
// gaps over events that share a time.
func TestFiltersIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		base := time.Now().UTC().Add(-3 * time.Hour).Truncate(time.Hour)
		at := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
		a1, a2 := apitest.AgentA1, apitest.AgentA2
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: at(1), Kind: "agent.status", Actor: "edgeplat-api", ActorKind: "system", Target: a1,
			Detail: map[string]any{"from": "online", "to": "offline"}})
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: at(2), Kind: "job.execution.succeeded", Target: a1, Detail: map[string]any{"jobId": "j-1"}})
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: at(3), Kind: "broker.denied", Actor: "fp", Target: "i/x/a/y/cmd/z", Outcome: "failure",
			Detail: map[string]any{"agentUuid": a2, "reason": "topic outside the agent's tree"}})
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: at(70), Kind: "agent.status", Target: a2, Detail: map[string]any{"from": "offline", "to": "online"}})
		h.audit(accounts.Event{Tenant: apitest.TenantB, At: at(4), Kind: "agent.status", Target: apitest.AgentB1})
		apitest.Exec(t, h.d, `INSERT INTO anomaly_incidents (id, tenant_uuid, rule_key, rule_name, rule_type, severity, agent_uuid, metric, value, score, peak_score, opened_at, closed_at, close_reason)
			VALUES ($1, $2, $3, 'hot press', 'threshold', 'critical', $4, 'plc1.temp', 91.5, 3.2, 4.1, $5, $6, 'recovered')`,
			"d1000000-0000-4000-8000-000000000001", apitest.TenantA, "e1000000-0000-4000-8000-000000000001", a1,
			h.d.Dialect().TimeArg(at(5)), h.d.Dialect().TimeArg(at(75)))

		search := func(who string, kv ...string) apitest.Reply {
			t.Helper()
			return h.call(http.MethodGet, "/events/search"+query(kv...), who, nil).Expect(t, "search "+strings.Join(kv, " "), http.StatusOK)
		}
		from, to := at(0).Format(time.RFC3339), at(120).Format(time.RFC3339)
		if got := kinds(search("member-a", "from", from, "to", to)); !slices.Equal(got, []string{KindIncidentClosed, "agent.status",
			KindIncidentOpened, "broker.denied", "job.execution.succeeded", "agent.status"}) {
			t.Errorf("search all: %v", got)
		}
		if got := kinds(search("admin-b", "from", from, "to", to)); !slices.Equal(got, []string{"agent.status"}) {
			t.Errorf("tenant B sees %v", got)
		}
		if got := kinds(search("member-a", "from", from, "to", to, "kind", "agent.status,anomaly_incident.*")); !slices.Equal(got,
			[]string{KindIncidentClosed, "agent.status", KindIncidentOpened, "agent.status"}) {
			t.Errorf("kind filter: %v", got)
		}
		if got := kinds(search("member-a", "from", from, "to", to, "kind", "job.*")); !slices.Equal(got, []string{"job.execution.succeeded"}) {
			t.Errorf("kind family job.*: %v", got)
		}
		// agent: the target, or the agent the detail names (broker.denied).
		if got := kinds(search("member-a", "from", from, "to", to, "agent", a2)); !slices.Equal(got, []string{"agent.status", "broker.denied"}) {
			t.Errorf("agent filter: %v", got)
		}
		if got := kinds(search("member-a", "from", at(2).Format(time.RFC3339), "to", at(5).Format(time.RFC3339))); !slices.Equal(got,
			[]string{"broker.denied", "job.execution.succeeded"}) {
			t.Errorf("time range [2m, 5m): %v", got)
		}
		if got := kinds(search("member-a", "from", from, "to", to, "q", "OUTSIDE the AGENT")); !slices.Equal(got, []string{"broker.denied"}) {
			t.Errorf("text in the detail: %v", got)
		}
		if got := kinds(search("member-a", "from", from, "to", to, "q", "hot press")); !slices.Equal(got, []string{KindIncidentOpened}) {
			t.Errorf("text in the rule name: %v", got)
		}
		if got := kinds(search("member-a", "from", from, "to", to, "q", "100%")); len(got) != 0 {
			t.Errorf("a %% in the text is no wildcard: %v", got)
		}

		// Stats: by hour, per kind.
		r := h.call(http.MethodGet, "/events/stats"+query("from", from, "to", to, "bucket", "1h"), "member-a", nil).Expect(t, "stats", http.StatusOK)
		var st struct {
			Buckets []Bucket
			Totals  map[string]int64
			Total   int64
		}
		if err := json.Unmarshal([]byte(r.Raw), &st); err != nil {
			t.Fatal(err)
		}
		wantB := []Bucket{
			{Start: base, Kind: "agent.status", Count: 1}, {Start: base, Kind: KindIncidentOpened, Count: 1},
			{Start: base, Kind: "broker.denied", Count: 1}, {Start: base, Kind: "job.execution.succeeded", Count: 1},
			{Start: base.Add(time.Hour), Kind: "agent.status", Count: 1}, {Start: base.Add(time.Hour), Kind: KindIncidentClosed, Count: 1},
		}
		slices.SortFunc(st.Buckets, func(x, y Bucket) int {
			if c := x.Start.Compare(y.Start); c != 0 {
				return c
			}
			return strings.Compare(x.Kind, y.Kind)
		})
		for i := range st.Buckets {
			st.Buckets[i].Start = st.Buckets[i].Start.UTC()
		}
		if !reflect.DeepEqual(st.Buckets, wantB) || st.Total != 6 || st.Totals["agent.status"] != 2 {
			t.Errorf("stats:\n got %+v %v %d\nwant %+v", st.Buckets, st.Totals, st.Total, wantB)
		}
		r = h.call(http.MethodGet, "/events/stats"+query("from", from, "to", to, "bucket", "30m", "kind", "agent.status"), "member-a", nil).Expect(t, "stats 30m", http.StatusOK)
		if err := json.Unmarshal([]byte(r.Raw), &st); err != nil {
			t.Fatal(err)
		}
		if len(st.Buckets) != 2 || st.Total != 2 || !st.Buckets[1].Start.Equal(base.Add(time.Hour)) {
			t.Errorf("stats of agent.status by 30m: %s", r.Raw)
		}

		// Timeline of a1, oldest first, two to a page.
		var seen []string
		cur := ""
		for page := 0; page < 5; page++ {
			kv := []string{"from", from, "to", to, "limit", "2"}
			if cur != "" {
				kv = append(kv, "cursor", cur)
			}
			r := h.call(http.MethodGet, "/events/device/"+a1+"/timeline"+query(kv...), "member-a", nil).Expect(t, "timeline", http.StatusOK)
			seen = append(seen, kinds(r)...)
			cur = r.Str("nextCursor")
			if cur == "" {
				break
			}
		}
		if !slices.Equal(seen, []string{"agent.status", "job.execution.succeeded", KindIncidentOpened, KindIncidentClosed}) {
			t.Errorf("timeline of a1: %v", seen)
		}

		// Many events at one time: pages of 3 neither repeat nor skip.
		same := at(100)
		for i := 0; i < 7; i++ {
			h.audit(accounts.Event{Tenant: apitest.TenantA, At: same, Kind: "agent.updated", Target: a1})
		}
		ids := map[string]bool{}
		cur, n := "", 0
		for page := 0; page < 10; page++ {
			kv := []string{"limit", "3"}
			if cur != "" {
				kv = append(kv, "cursor", cur)
			}
			r := h.call(http.MethodGet, "/events/recent"+query(kv...), "member-a", nil).Expect(t, "recent", http.StatusOK)
			for _, e := range r.List("events") {
				id := e.(map[string]any)["id"].(string)
				if ids[id] {
					t.Errorf("event %s on two pages", id)
				}
				ids[id] = true
				n++
			}
			if cur = r.Str("nextCursor"); cur == "" {
				break
			}
		}
		if n != 13 {
			t.Errorf("recent paged through %d events, want 13", n)
		}
	})
}

// TestTenancyIntegration: every route naming a device answers 404 for
// another tenant's agent, as for an unknown one; the tenant-wide routes
// never show another tenant's events.
func TestTenancyIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		h.setTarget(apitest.AgentB1, docV1)
		h.setTarget(apitest.AgentB1, docV2)
		for _, agent := range []string{apitest.AgentB1, "c0000000-0000-4000-8000-000000000009"} {
			for _, rt := range []struct {
				method, path string
				body         any
			}{
				{http.MethodGet, "/events/device/" + agent, nil},
				{http.MethodGet, "/events/device/" + agent + "/timeline", nil},
				{http.MethodPost, "/events/device/" + agent + "/compare", map[string]any{"from": map[string]any{"version": 1}}},
				{http.MethodPost, "/events/device/" + agent + "/replay", map[string]any{"to": map[string]any{"version": 1}}},
				{http.MethodPost, "/events/device/" + agent + "/replay", map[string]any{"to": map[string]any{"version": 1}, "apply": true}},
			} {
				h.call(rt.method, rt.path, "admin-a", rt.body).ExpectError(t, http.StatusNotFound, "not_found")
			}
		}
		// Tenant A's event ids name nothing for tenant B's admin.
		h.setTarget(apitest.AgentA2, docV1)
		h.call(http.MethodPost, "/events/device/"+apitest.AgentB1+"/compare", "admin-b",
			map[string]any{"from": map[string]any{"eventId": "target_state:" + apitest.AgentA2 + ":1"}}).ExpectError(t, http.StatusNotFound, "not_found")
		for _, p := range []string{"/events/recent", "/events/search", "/events/stats"} {
			r := h.call(http.MethodGet, p, "admin-a", nil).Expect(t, p, http.StatusOK)
			if strings.Contains(r.Raw, apitest.AgentB1) {
				t.Errorf("%s for tenant A names tenant B's agent: %s", p, r.Raw)
			}
		}
		r := h.call(http.MethodGet, "/events/search"+query("agent", apitest.AgentB1), "admin-a", nil).Expect(t, "search B's agent", http.StatusOK)
		if n := len(r.List("events")); n != 0 {
			t.Errorf("tenant A searching tenant B's agent found %d events", n)
		}
		// No credential: 401.
		h.call(http.MethodGet, "/events/recent", "", nil).ExpectError(t, http.StatusUnauthorized, "unauthorized")
	})
}

// TestBadInputIntegration: a bad time, an unknown kind, a limit out of
// range and the like answer 400 naming the field.
func TestBadInputIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		a := apitest.AgentA2
		h.setTarget(a, docV1)
		for _, c := range []struct{ path, field string }{
			{"/events/search?from=yesterday", "from"},
			{"/events/search?to=2026-13-01T00:00:00Z", "to"},
			{"/events/search?from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z", "to"},
			{"/events/search?kind=agent.exploded", "kind"},
			{"/events/search?kind=nothing.*", "kind"},
			{"/events/search?kind=job.execution.%25", "kind"},
			{"/events/search?limit=0", "limit"},
			{"/events/search?limit=1001", "limit"},
			{"/events/recent?limit=abc", "limit"},
			{"/events/recent?cursor=bm90IGEgY3Vyc29y", "cursor"},
			{"/events/search?agent=press-7", "agent"},
			{"/events/search?q=" + strings.Repeat("x", MaxText+1), "q"},
			{"/events/search?colour=red", "colour"},
			{"/events/stats?bucket=7s", "bucket"},
			{"/events/stats?bucket=1m&from=2020-01-01T00:00:00Z&to=2026-01-01T00:00:00Z", "bucket"},
			{"/events/device/not-a-uuid", "deviceUuid"},
			{"/events/device/" + a + "/timeline?from=-", "from"},
			{"/events/device/" + a + "?agent=" + a, "agent"},
		} {
			r := h.call(http.MethodGet, c.path, "member-a", nil)
			r.ExpectError(t, http.StatusBadRequest, "invalid_parameter")
			if msg := r.Str("error", "message"); !strings.HasPrefix(msg, c.field) {
				t.Errorf("%s: message %q does not name %s", c.path, msg, c.field)
			}
		}
		for _, c := range []struct {
			body  any
			field string
		}{
			{map[string]any{}, "from"},
			{map[string]any{"from": map[string]any{}}, "from"},
			{map[string]any{"from": map[string]any{"version": 1, "at": "2026-01-01T00:00:00Z"}}, "from"},
			{map[string]any{"from": map[string]any{"at": "noon"}}, "from.at"},
			{map[string]any{"from": map[string]any{"version": -1}}, "from.version"},
			{map[string]any{"from": map[string]any{"eventId": "nope:1"}}, "from.eventId"},
			{map[string]any{"from": map[string]any{"version": 1}, "to": map[string]any{"eventId": "audit:x"}}, "to.eventId"},
			{map[string]any{"state": "wished", "from": map[string]any{"version": 1}}, "state"},
		} {
			r := h.call(http.MethodPost, "/events/device/"+a+"/compare", "member-a", c.body)
			r.ExpectError(t, http.StatusBadRequest, "invalid_parameter")
			if msg := r.Str("error", "message"); !strings.HasPrefix(msg, c.field) {
				t.Errorf("compare %v: message %q does not name %s", c.body, msg, c.field)
			}
		}
		h.call(http.MethodPost, "/events/device/"+a+"/replay", "member-a", map[string]any{"to": map[string]any{"version": 9}}).
			ExpectError(t, http.StatusNotFound, "not_found")
		h.call(http.MethodPost, "/events/device/"+a+"/replay", "member-a", map[string]any{"to": map[string]any{"version": 1}, "extra": 1}).
			ExpectError(t, http.StatusBadRequest, "invalid_body")
	})
}

// TestPruneIntegration: the pruner deletes snapshots and audit records
// older than the retention, but keeps each agent's newest snapshot.
func TestPruneIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		now := time.Now().UTC()
		old := now.Add(-100 * 24 * time.Hour)
		for i, rs := range []string{"running", "stopped", "running"} {
			h.report(apitest.AgentA1, map[string]any{"runState": rs}, old.Add(time.Duration(i)*time.Minute))
		}
		h.report(apitest.AgentA2, map[string]any{"runState": "running"}, old)
		h.report(apitest.AgentA2, map[string]any{"runState": "stopped"}, now)
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: old, Kind: "agent.status", Target: apitest.AgentA1})
		h.audit(accounts.Event{Tenant: apitest.TenantA, At: now, Kind: "agent.status", Target: apitest.AgentA1})
		p := NewPruner(h.d, DefaultRetention, 0, h.snaps, NewMetrics(nil), nil)
		got, err := p.Prune(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if got["agent_state_snapshots"] != 3 || got["audit_events"] != 1 {
			t.Errorf("pruned %v, want 3 snapshots (A1's two older, A2's old one) and 1 audit record", got)
		}
		if n := h.count(`SELECT COUNT(*) FROM agent_state_snapshots WHERE agent_uuid = $1`, apitest.AgentA1); n != 1 {
			t.Errorf("A1 keeps %d snapshots, want its newest", n)
		}
		if n := h.count(`SELECT COUNT(*) FROM audit_events`); n != 1 {
			t.Errorf("%d audit records left, want 1", n)
		}
	})
}
