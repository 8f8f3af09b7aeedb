package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/core/httpx"
	"github.com/edgeplat/edgeplat/roles/api/accounts/accountstest"
	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

// TestMain fails the run if a test leaves a goroutine behind.
func TestMain(m *testing.M) {
	gin.SetMode(gin.ReleaseMode)
	goleak.VerifyTestMain(m)
}

type harness struct {
	t     *testing.T
	d     *db.DB
	e     *gin.Engine
	audit accountstest.AuditLog
}

func newHarness(t *testing.T, engine string) *harness {
	t.Helper()
	start := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	h := &harness{t: t, d: apitest.SeededDB(t, engine, start, apitest.AgentA1, apitest.AgentA2, apitest.AgentB1)}
	h.e = httpx.NewEngine(httpx.EngineOptions{WriteError: apitest.WriteError})
	Register(h.e.Group("/api/v1"), Deps{
		DB:         h.d,
		Caller:     accountstest.Caller,
		WriteError: apitest.WriteError,
		Audit:      h.audit.Audit,
		// Each reading moves the clock on, so that no two writes share a time.
		Now: apitest.NewTickingClock(start, time.Second).Now,
		Log: slog.New(slog.NewTextHandler(t.Output(), nil)),
	})
	return h
}

func (h *harness) call(method, path, who string, body any) apitest.Reply {
	h.t.Helper()
	return apitest.Call(h.t, h.e, method, "/api/v1"+path, who, body)
}

// reading stores one reading of agent.
func (h *harness) reading(agent, metric, device, unit string, at time.Time) {
	h.t.Helper()
	var dev, u any
	if device != "" {
		dev = device
	}
	if unit != "" {
		u = unit
	}
	tu, err := codec.ParseUUID(apitest.TenantOf(agent))
	if err != nil {
		h.t.Fatal(err)
	}
	apitest.Exec(h.t, h.d, `INSERT INTO readings (time, agent_uuid, metric_name, value, protocol, unit, quality, device_name, tenant_id)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, h.d.Dialect().TimeArg(at), agent, metric, 1.5, "modbus", u, "GOOD", dev,
		codec.EncodeID(tu))
}

func forEngines(t *testing.T, fn func(t *testing.T, h *harness)) {
	apitest.ForEngines(t, func(t *testing.T, engine string) { fn(t, newHarness(t, engine)) })
}

// layoutDoc is a valid layout with one line widget per title.
func layoutDoc(titles ...string) map[string]any {
	ws := []map[string]any{}
	for i, title := range titles {
		ws = append(ws, map[string]any{"id": "w" + title, "type": "line", "title": title, "x": 0, "y": i * 4, "w": 6, "h": 4,
			"source": map[string]any{"deviceName": "plc-01", "metric": title}})
	}
	return map[string]any{"schemaVersion": 1, "widgets": ws}
}

func num(r apitest.Reply, key string) int64 {
	f, _ := r.Body[key].(float64)
	return int64(f)
}

func isDefault(r apitest.Reply) bool { b, _ := r.Body["isDefault"].(bool); return b }

func TestGeneratedDefaultIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		r := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "member-a", nil).Expect(t, "no readings", 200)
		if r.Body["id"] != nil || r.Body["generated"] != true || !isDefault(r) || r.Body["createdAt"] != nil ||
			len(r.Body["layout"].(map[string]any)["widgets"].([]any)) != 0 {
			t.Errorf("generated layout without readings: %s", r.Raw)
		}
		at := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
		for i, m := range []string{"temp", "flow", "a.level", "b", "c", "d", "e"} {
			h.reading(apitest.AgentA1, m, "plc-01", "°C", at.Add(time.Duration(i)*time.Minute))
		}
		// The newest reading names the device and unit.
		h.reading(apitest.AgentA1, "flow", "", "", at.Add(time.Hour))
		// Another agent's and another tenant's readings stay out.
		h.reading(apitest.AgentA2, "aaa", "x", "", at)
		h.reading(apitest.AgentB1, "aa", "x", "", at)
		r = h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "viewer-a", nil).Expect(t, "readings", 200)
		var d Dashboard
		if err := json.Unmarshal([]byte(r.Raw), &d); err != nil {
			t.Fatal(err)
		}
		if err := d.Layout.Validate(); err != nil {
			t.Errorf("generated layout invalid: %v", err)
		}
		var got []string
		for _, w := range d.Layout.Widgets {
			got = append(got, w.Source.Metric+"@"+w.Source.DeviceName+"/"+w.Options.Unit)
		}
		want := []string{"a.level@plc-01/°C", "b@plc-01/°C", "c@plc-01/°C", "d@plc-01/°C", "e@plc-01/°C", "flow@agent-a1/"}
		if !slices.Equal(got, want) {
			t.Errorf("generated widgets %v, want %v", got, want)
		}
		if r.Raw != "" && strings.Contains(r.Raw, `"version":1`) {
			t.Errorf("a generated layout has no version: %s", r.Raw)
		}
		h.call("GET", "/dashboard-layouts/"+apitest.AgentB1, "member-a", nil).ExpectError(t, 404, "not_found")
	})
}

func TestLayoutsIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		main := h.call("POST", "/dashboard-layouts/"+apitest.AgentA1, "member-a", map[string]any{"name": " Main ", "layout": layoutDoc("temp")}).
			Expect(t, "create first", 201)
		if main.Str("name") != "Main" || !isDefault(main) || num(main, "version") != 1 || main.Str("deviceUuid") != apitest.AgentA1 || main.Body["generated"] != nil {
			t.Errorf("first layout %s", main.Raw)
		}
		mainID := main.Str("id")
		second := h.call("POST", "/dashboard-layouts", "admin-a", map[string]any{"deviceUuid": strings.ToUpper(apitest.AgentA1), "name": "Second",
			"layout": layoutDoc("flow", "level"), "isDefault": false}).Expect(t, "create second", 201)
		secondID := second.Str("id")
		if isDefault(second) {
			t.Errorf("second layout took the default: %s", second.Raw)
		}
		r := h.call("POST", "/dashboard-layouts/"+apitest.AgentA1, "member-a", map[string]any{"name": "Main", "layout": layoutDoc()})
		r.ExpectError(t, 409, "conflict")
		if !strings.Contains(r.Raw, `\"Main\"`) {
			t.Errorf("conflict does not name the name: %s", r.Raw)
		}
		// The same name on another device is fine.
		h.call("POST", "/dashboard-layouts/"+apitest.AgentA2, "member-a", map[string]any{"name": "Main", "layout": layoutDoc()}).Expect(t, "other device", 201)

		if got := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "viewer-a", nil).Expect(t, "default", 200).Str("id"); got != mainID {
			t.Errorf("default is %s, want the first layout %s", got, mainID)
		}
		// Default switching: in one transaction, the old one loses it.
		r = h.call("PUT", "/dashboard-layouts/"+secondID, "member-a", map[string]any{"isDefault": true, "version": 1}).Expect(t, "make default", 200)
		if !isDefault(r) || num(r, "version") != 2 {
			t.Errorf("after making it the default: %s", r.Raw)
		}
		if got := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "member-a", nil).Str("id"); got != secondID {
			t.Errorf("default is %s, want %s", got, secondID)
		}
		all := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1+"/all", "viewer-a", nil).Expect(t, "all", 200).List("layouts")
		defaults := 0
		for _, l := range all {
			if l.(map[string]any)["isDefault"] == true {
				defaults++
			}
		}
		if len(all) != 2 || defaults != 1 {
			t.Errorf("%d layouts, %d defaults", len(all), defaults)
		}
		h.call("PUT", "/dashboard-layouts/"+secondID, "member-a", map[string]any{"isDefault": false}).ExpectError(t, 422, "validation_failed")

		// Versions: the flag moved off Main without changing its version.
		r = h.call("PUT", "/dashboard-layouts/"+mainID, "member-a", map[string]any{"name": "Main 2", "version": 1}).Expect(t, "rename", 200)
		if num(r, "version") != 2 || r.Str("name") != "Main 2" || isDefault(r) {
			t.Errorf("after rename: %s", r.Raw)
		}
		stale := h.call("PUT", "/dashboard-layouts/"+mainID, "member-a", map[string]any{"name": "Lost", "version": 1})
		stale.ExpectError(t, 409, "version_conflict")
		if cur := stale.Body["error"].(map[string]any)["currentVersion"]; cur != 2.0 {
			t.Errorf("version conflict carries currentVersion %v: %s", cur, stale.Raw)
		}
		req := apitest.Call(t, h.e, "GET", "/api/v1/dashboard-layouts/"+apitest.AgentA2, "member-a", nil)
		if req.Status != 200 {
			t.Fatal(req.Raw)
		}
		// If-Match carries the version too.
		rec := serveWith(t, h.e, "PUT", "/api/v1/dashboard-layouts/"+mainID, "member-a", map[string]any{"layout": layoutDoc("a", "b")}, `"1"`)
		if rec.Status != 409 {
			t.Errorf("stale If-Match: %d %s", rec.Status, rec.Raw)
		}
		rec = serveWith(t, h.e, "PUT", "/api/v1/dashboard-layouts/"+mainID, "member-a", map[string]any{"layout": layoutDoc("a", "b")}, `"2"`)
		if rec.Status != 200 || rec.etag != `"3"` {
			t.Errorf("If-Match of the current version: %d %s, ETag %s", rec.Status, rec.Raw, rec.etag)
		}
		h.call("PUT", "/dashboard-layouts/"+mainID, "member-a", map[string]any{"name": "Second"}).ExpectError(t, 409, "conflict")
		h.call("PUT", "/dashboard-layouts/"+mainID, "member-a", map[string]any{}).ExpectError(t, 422, "validation_failed")

		// Deleting the default promotes the most recently updated one:
		// Third is newer than Main 2 until Main 2 is updated again.
		third := h.call("POST", "/dashboard-layouts/"+apitest.AgentA1, "member-a", map[string]any{"name": "Third", "layout": layoutDoc()}).Expect(t, "third", 201).Str("id")
		h.call("PUT", "/dashboard-layouts/"+mainID, "member-a", map[string]any{"name": "Main 3"}).Expect(t, "touch main", 200)
		if r := h.call("DELETE", "/dashboard-layouts/"+secondID, "member-a", nil); r.Status != 204 {
			t.Fatalf("delete default: %d %s", r.Status, r.Raw)
		}
		if got := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "member-a", nil).Str("id"); got != mainID {
			t.Errorf("default after deleting it is %s, want the most recently updated %s", got, mainID)
		}
		h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "member-a", nil)
		for _, id := range []string{mainID, third} {
			if r := h.call("DELETE", "/dashboard-layouts/"+id, "admin-a", nil); r.Status != 204 {
				t.Fatalf("delete %s: %d %s", id, r.Status, r.Raw)
			}
		}
		if r := h.call("GET", "/dashboard-layouts/"+apitest.AgentA1, "member-a", nil); r.Body["generated"] != true {
			t.Errorf("no layouts left, want a generated default: %s", r.Raw)
		}
		h.call("DELETE", "/dashboard-layouts/"+mainID, "admin-a", nil).ExpectError(t, 404, "not_found")

		want := []string{AuditCreated, AuditCreated, AuditCreated, AuditCreated, AuditDeleted, AuditDeleted, AuditDeleted,
			AuditUpdated, AuditUpdated, AuditUpdated, AuditUpdated}
		if got := h.audit.Kinds(); !slices.Equal(got, want) {
			t.Errorf("audit kinds %v, want %v", got, want)
		}
	})
}

func TestLayoutValidationIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		bad := layoutDoc("a", "b")
		bad["widgets"].([]map[string]any)[1]["w"] = 13
		bad["widgets"].([]map[string]any)[0]["options"] = map[string]any{"rows": 3}
		for _, tc := range []struct {
			name   string
			path   string
			body   any
			status int
			code   string
			says   []string
		}{
			{"paths", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "x", "layout": bad}, 422, "validation_failed",
				[]string{"layout.widgets[1].w: must be 1..12, got 13", "layout.widgets[0].options.rows: unknown key"}},
			{"all at once", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "", "version": 3, "layout": map[string]any{"schemaVersion": 9}}, 422, "validation_failed",
				[]string{"version:", "name: must be 1..100", "layout.schemaVersion: unsupported version 9 (supported: 1)"}},
			{"name long", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": strings.Repeat("n", 101), "layout": layoutDoc()}, 422, "validation_failed", []string{"name:"}},
			{"no layout", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "x"}, 422, "validation_failed", []string{"layout: is required"}},
			{"layout not an object", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "x", "layout": []int{1}}, 422, "validation_failed", []string{"layout: must be an object"}},
			{"no device", "/dashboard-layouts", map[string]any{"name": "x", "layout": layoutDoc()}, 422, "validation_failed", []string{"deviceUuid: is required"}},
			{"other device in body", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"deviceUuid": apitest.AgentA2, "name": "x", "layout": layoutDoc()}, 422, "validation_failed", []string{"deviceUuid"}},
			{"unknown field", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "x", "layout": layoutDoc(), "colour": 1}, 400, "invalid_body", []string{"colour"}},
			{"too big", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": "x", "layout": map[string]any{"schemaVersion": 1, "pad": strings.Repeat("p", MaxLayoutBytes)}}, 422, "validation_failed",
				[]string{"layout: 65"}},
			{"far too big", "/dashboard-layouts/" + apitest.AgentA1, map[string]any{"name": strings.Repeat("p", maxBody)}, 413, "body_too_large", nil},
			{"unknown device", "/dashboard-layouts/" + apitest.AgentB1, map[string]any{"name": "x", "layout": layoutDoc()}, 404, "not_found", []string{apitest.AgentB1}},
			{"unknown device in body", "/dashboard-layouts", map[string]any{"deviceUuid": apitest.AgentB1, "name": "x", "layout": layoutDoc()}, 404, "not_found", nil},
			{"malformed device", "/dashboard-layouts/nope", map[string]any{"name": "x", "layout": layoutDoc()}, 404, "not_found", nil},
		} {
			r := h.call("POST", tc.path, "member-a", tc.body)
			if r.Status != tc.status || r.ErrorCode(t) != tc.code {
				t.Errorf("%s: %d %s, want %d %s", tc.name, r.Status, r.Raw, tc.status, tc.code)
				continue
			}
			for _, s := range tc.says {
				if !strings.Contains(r.Raw, s) {
					t.Errorf("%s: %s does not say %q", tc.name, r.Raw, s)
				}
			}
		}
		if n := len(h.call("GET", "/dashboard-layouts", "member-a", nil).List("layouts")); n != 0 {
			t.Errorf("%d layouts stored by refused requests", n)
		}
		if got := h.audit.Kinds(); got != nil {
			t.Errorf("refused requests audited: %v", got)
		}
	})
}

func TestTenantsAndRolesIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		idB := h.call("POST", "/dashboard-layouts/"+apitest.AgentB1, "admin-b", map[string]any{"name": "B", "layout": layoutDoc("x")}).Expect(t, "B's layout", 201).Str("id")
		idA := h.call("POST", "/dashboard-layouts/"+apitest.AgentA1, "member-a", map[string]any{"name": "A", "layout": layoutDoc("x")}).Expect(t, "A's layout", 201).Str("id")
		for _, tc := range []struct{ method, path string }{
			{"GET", "/dashboard-layouts/" + apitest.AgentB1}, {"GET", "/dashboard-layouts/" + apitest.AgentB1 + "/all"},
			{"POST", "/dashboard-layouts/" + apitest.AgentB1}, {"PUT", "/dashboard-layouts/" + idB}, {"DELETE", "/dashboard-layouts/" + idB},
			{"PUT", "/dashboard-layouts/not-a-uuid"}, {"GET", "/dashboard-layouts/not-a-uuid/all"},
		} {
			r := h.call(tc.method, tc.path, "admin-a", map[string]any{"name": "stolen", "layout": layoutDoc()})
			r.ExpectError(t, 404, "not_found")
			if strings.Contains(r.Raw, "agent-b1") || strings.Contains(r.Raw, `"B"`) {
				t.Errorf("%s %s reveals tenant B: %s", tc.method, tc.path, r.Raw)
			}
		}
		list := h.call("GET", "/dashboard-layouts", "admin-a", nil).Expect(t, "list A", 200)
		if l := list.List("layouts"); len(l) != 1 || strings.Contains(list.Raw, idB) {
			t.Errorf("tenant A's list: %s", list.Raw)
		}
		h.call("GET", "/dashboard-layouts?deviceUuid="+apitest.AgentB1, "admin-a", nil).Expect(t, "filter on B's device", 200)
		if r := h.call("GET", "/dashboard-layouts/"+apitest.AgentB1, "admin-b", nil).Expect(t, "B reads its own", 200); r.Str("id") != idB {
			t.Errorf("B's default: %s", r.Raw)
		}
		// Roles: a read-only role reads, never writes.
		h.call("GET", "/dashboard-layouts/"+apitest.AgentA1+"/all", "viewer-a", nil).Expect(t, "viewer reads", 200)
		for _, tc := range []struct{ method, path string }{
			{"POST", "/dashboard-layouts/" + apitest.AgentA1}, {"POST", "/dashboard-layouts"}, {"PUT", "/dashboard-layouts/" + idA}, {"DELETE", "/dashboard-layouts/" + idA},
		} {
			h.call(tc.method, tc.path, "viewer-a", map[string]any{"name": "v", "layout": layoutDoc()}).ExpectError(t, 403, "forbidden")
		}
		h.call("GET", "/dashboard-layouts", "", nil).ExpectError(t, 401, "unauthorized")
		h.call("POST", "/dashboard-layouts", "", nil).ExpectError(t, 401, "unauthorized")
		// A layout goes with its agent.
		apitest.Exec(h.t, h.d, `DELETE FROM agents WHERE uuid = $1`, apitest.AgentA1)
		if l := h.call("GET", "/dashboard-layouts", "admin-a", nil).List("layouts"); len(l) != 0 {
			t.Errorf("layouts of a deleted agent: %v", l)
		}
	})
}

func TestListPagingIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, h *harness) {
		want := map[string]bool{}
		for _, a := range []string{apitest.AgentA2, apitest.AgentA1} {
			for _, n := range []string{"b", "A", "a", "é"} {
				id := h.call("POST", "/dashboard-layouts/"+a, "member-a", map[string]any{"name": n, "layout": layoutDoc()}).Expect(t, "create", 201).Str("id")
				want[id] = true
			}
		}
		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 8 {
				t.Fatal("paging does not end")
			}
			path := "/dashboard-layouts?limit=3"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := h.call("GET", path, "viewer-a", nil).Expect(t, "page", 200)
			for _, l := range r.List("layouts") {
				m := l.(map[string]any)
				seen = append(seen, m["deviceUuid"].(string)[:2]+"/"+m["name"].(string))
				if !want[m["id"].(string)] {
					t.Errorf("unexpected or repeated layout %v", m)
				}
				delete(want, m["id"].(string))
			}
			next, _ := r.Body["nextCursor"].(string)
			if next == "" {
				break
			}
			cursor = next
		}
		if order := []string{"a1/A", "a1/a", "a1/b", "a1/é", "a2/A", "a2/a", "a2/b", "a2/é"}; !slices.Equal(seen, order) {
			t.Errorf("listed %v, want %v", seen, order)
		}
		if r := h.call("GET", "/dashboard-layouts?deviceUuid="+apitest.AgentA2, "member-a", nil); len(r.List("layouts")) != 4 || r.Body["nextCursor"] != nil {
			t.Errorf("device filter: %s", r.Raw)
		}
		// An agent's layouts are bounded, so /all answers them in one piece.
		for i := 4; i < MaxPerDevice; i++ {
			h.call("POST", "/dashboard-layouts/"+apitest.AgentA2, "member-a", map[string]any{"name": fmt.Sprintf("n%03d", i), "layout": layoutDoc()}).Expect(t, "fill", 201)
		}
		h.call("POST", "/dashboard-layouts/"+apitest.AgentA2, "member-a", map[string]any{"name": "one more", "layout": layoutDoc()}).ExpectError(t, 422, "limit_exceeded")
		if n := len(h.call("GET", "/dashboard-layouts/"+apitest.AgentA2+"/all", "member-a", nil).List("layouts")); n != MaxPerDevice {
			t.Errorf("/all answers %d layouts, want %d", n, MaxPerDevice)
		}
		for _, q := range []string{"limit=0", "limit=1001", "limit=x", "cursor=%21", "deviceUuid=x"} {
			h.call("GET", "/dashboard-layouts?"+q, "member-a", nil).ExpectError(t, 400, "invalid_parameter")
		}
	})
}

// etagReply is an answer with its ETag.
type etagReply struct {
	apitest.Reply
	etag string
}

// serveWith sends a request with If-Match.
func serveWith(t *testing.T, h *gin.Engine, method, path, who string, body any, ifMatch string) etagReply {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+who)
	req.Header.Set("If-Match", ifMatch)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	r := etagReply{Reply: apitest.Reply{Status: rec.Code, Raw: rec.Body.String()}, etag: rec.Header().Get("ETag")}
	if err := json.Unmarshal(rec.Body.Bytes(), &r.Body); err != nil {
		t.Fatalf("%s %s: %q: %v", method, path, r.Raw, err)
	}
	return r
}
