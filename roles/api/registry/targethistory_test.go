package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/apitest"
)

func TestHistoryPage(t *testing.T) {
	for _, tt := range []struct {
		limit, cursor string
		n             int
		before        int64
		bad           bool
	}{
		{"", "", DefaultHistoryLimit, 0, false},
		{"5", "17", 5, 17, false},
		{"100", "", 100, 0, false},
		{"0", "", 0, 0, true},
		{"101", "", 0, 0, true},
		{"x", "", 0, 0, true},
		{"", "0", 0, 0, true},
		{"", "-3", 0, 0, true},
		{"", "abc", 0, 0, true},
	} {
		n, before, err := historyPage(tt.limit, tt.cursor)
		if (err != nil) != tt.bad || (!tt.bad && (n != tt.n || before != tt.before)) {
			t.Errorf("historyPage(%q, %q) = %d, %d, %v", tt.limit, tt.cursor, n, before, err)
		}
	}
}

// TestTargetStateHistoryIntegration: every committed version is kept
// with its document, whichever path wrote it (create, replace, clear, a
// fleet's touch), newest first, paged, bounded to the last
// MaxTargetStateHistory versions, and scoped to the tenant.
func TestTargetStateHistoryIntegration(t *testing.T) {
	forEngines(t, func(t *testing.T, s *Store) {
		ctx := t.Context()
		a := mustCreate(t, s, tenantA, NewAgent{Name: "press"})
		if vs, next, err := s.TargetStateHistory(ctx, tenantA, a.UUID, 0, 10); err != nil || len(vs) != 0 || next != 0 {
			t.Fatalf("history of a new agent = %v, %d, %v", vs, next, err)
		}
		first := `{"schemaVersion":1,"endpoints":[{"name":"plc","protocol":"modbus"}]}`
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(first), adminA, true); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(`{"schemaVersion":1,"endpoints":[]}`), "", false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ClearTargetState(ctx, tenantA, a.UUID, adminA); err != nil {
			t.Fatal(err)
		}
		// Joining a fleet moves the version and keeps the document.
		f := mustFleet(t, s, tenantA, "line-1", nil)
		if _, err := s.AddFleetAgents(ctx, tenantA, f.ID, adminA, []string{a.UUID}); err != nil {
			t.Fatal(err)
		}
		cur, err := s.TargetState(ctx, tenantA, a.UUID)
		if err != nil || cur.Version != 4 {
			t.Fatalf("target state after joining a fleet = %+v, %v", cur, err)
		}
		vs, next, err := s.TargetStateHistory(ctx, tenantA, a.UUID, 0, 10)
		if err != nil || next != 0 || len(vs) != 4 {
			t.Fatalf("history = %+v, %d, %v", vs, next, err)
		}
		for i, want := range []struct {
			version int64
			by      string
			size    int
		}{{4, adminA, 2}, {3, adminA, 2}, {2, "", len(`{"schemaVersion":1,"endpoints":[]}`)}, {1, adminA, len(first)}} {
			if v := vs[i]; v.Version != want.version || v.UpdatedBy != want.by || v.Size != want.size || v.UpdatedAt.IsZero() {
				t.Errorf("history[%d] = %+v, want version %d by %q size %d", i, v, want.version, want.by, want.size)
			}
		}
		got, err := s.TargetStateAt(ctx, tenantA, a.UUID, 1)
		if err != nil || !sameJSON(got.State, []byte(first)) || got.Version != 1 || got.UpdatedBy != adminA || got.AgentUUID != a.UUID {
			t.Errorf("version 1 = %+v (%s), %v", got, got.State, err)
		}
		if got, err := s.TargetStateAt(ctx, tenantA, a.UUID, 3); err != nil || !sameJSON(got.State, []byte("{}")) {
			t.Errorf("version 3 (cleared) = %s, %v", got.State, err)
		}
		for _, tt := range []struct {
			name, tenant, agent string
			version             int64
		}{
			{"a version never written", tenantA, a.UUID, 5},
			{"another tenant's agent", tenantB, a.UUID, 1},
			{"an unknown agent", tenantA, unknownID, 1},
		} {
			if _, err := s.TargetStateAt(ctx, tt.tenant, tt.agent, tt.version); !errors.Is(err, ErrNotFound) {
				t.Errorf("TargetStateAt, %s: %v, want ErrNotFound", tt.name, err)
			}
		}
		if _, _, err := s.TargetStateHistory(ctx, tenantB, a.UUID, 0, 10); !errors.Is(err, ErrNotFound) {
			t.Errorf("another tenant's history: %v, want ErrNotFound", err)
		}
		if _, _, err := s.TargetStateHistory(ctx, tenantA, a.UUID, 0, MaxHistoryLimit+1); !errors.Is(err, ErrInvalid) {
			t.Errorf("a page over the limit: %v, want ErrInvalid", err)
		}

		// Past the bound, the oldest versions go.
		total := int64(MaxTargetStateHistory + 5)
		for v := cur.Version + 1; v <= total; v++ {
			doc := fmt.Sprintf(`{"schemaVersion":1,"endpoints":[{"name":"plc-%d","protocol":"modbus"}]}`, v)
			if _, err := s.SetTargetState(ctx, tenantA, a.UUID, json.RawMessage(doc), adminA, false); err != nil {
				t.Fatal(err)
			}
		}
		var all []TargetStateVersion
		before := int64(0)
		for pages := 0; ; pages++ {
			if pages > 10 {
				t.Fatal("paging does not end")
			}
			vs, next, err := s.TargetStateHistory(ctx, tenantA, a.UUID, before, 30)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, vs...)
			if next == 0 {
				break
			}
			before = next
		}
		if len(all) != MaxTargetStateHistory || all[0].Version != total || all[len(all)-1].Version != total-MaxTargetStateHistory+1 {
			t.Fatalf("history after %d versions: %d kept, %d..%d", total, len(all), all[len(all)-1].Version, all[0].Version)
		}
		for i := 1; i < len(all); i++ {
			if all[i].Version != all[i-1].Version-1 {
				t.Fatalf("pages skip or repeat: %d after %d", all[i].Version, all[i-1].Version)
			}
		}
		if _, err := s.TargetStateAt(ctx, tenantA, a.UUID, total-MaxTargetStateHistory); !errors.Is(err, ErrNotFound) {
			t.Errorf("a version past the bound: %v, want ErrNotFound", err)
		}
		want := fmt.Sprintf(`{"schemaVersion":1,"endpoints":[{"name":"plc-%d","protocol":"modbus"}]}`, total)
		if got, err := s.TargetStateAt(ctx, tenantA, a.UUID, total); err != nil || !sameJSON(got.State, []byte(want)) {
			t.Errorf("the newest version = %s, %v", got.State, err)
		}
	})
}

func decode(t *testing.T, r apitest.Reply, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(r.Raw), v); err != nil {
		t.Fatalf("decode %s: %v", r.Raw, err)
	}
}

func TestTargetStateHistoryRoutesIntegration(t *testing.T) {
	h := newHarness(t, "sqlite", nil)
	a := mustCreate(t, h.store, tenantA, NewAgent{Name: "press"})
	for i := range 3 {
		doc := map[string]any{"schemaVersion": 1, "endpoints": []any{map[string]any{"name": fmt.Sprintf("plc-%d", i), "protocol": "modbus"}}}
		h.call("PUT", "/agents/"+a.UUID+"/target-state", "admin-a", map[string]any{"state": doc}).Expect(t, "put target state", http.StatusOK)
	}
	base := "/agents/" + a.UUID + "/target-state/history"
	var page struct {
		Versions   []TargetStateVersion `json:"versions"`
		NextCursor *string              `json:"nextCursor"`
	}
	decode(t, h.call("GET", base+"?limit=2", "member-a", nil).Expect(t, "first page", http.StatusOK), &page)
	if len(page.Versions) != 2 || page.Versions[0].Version != 3 || page.NextCursor == nil || *page.NextCursor != "2" {
		t.Fatalf("first page = %+v", page)
	}
	next := page.NextCursor
	page.NextCursor = nil
	decode(t, h.call("GET", base+"?limit=2&cursor="+*next, "member-a", nil).Expect(t, "second page", http.StatusOK), &page)
	if len(page.Versions) != 1 || page.Versions[0].Version != 1 || page.NextCursor != nil {
		t.Fatalf("second page = %+v", page)
	}
	var ts TargetState
	decode(t, h.call("GET", base+"/2", "member-a", nil).Expect(t, "version 2", http.StatusOK), &ts)
	if ts.Version != 2 || string(ts.State) != `{"schemaVersion":1,"endpoints":[{"name":"plc-1","protocol":"modbus"}]}` || ts.UpdatedBy != adminA {
		t.Errorf("version 2 = %+v (%s)", ts, ts.State)
	}
	for _, tt := range []struct {
		name, path, who string
		status          int
		code            string
	}{
		{"no credential", base, "", 401, "unauthorized"},
		{"bad limit", base + "?limit=0", "member-a", 400, "invalid_parameter"},
		{"bad cursor", base + "?cursor=x", "member-a", 400, "invalid_parameter"},
		{"bad version", base + "/x", "member-a", 400, "invalid_parameter"},
		{"version 0", base + "/0", "member-a", 400, "invalid_parameter"},
		{"unknown version", base + "/9", "member-a", 404, "not_found"},
		{"another tenant", base + "/1", "admin-b", 404, "not_found"},
		{"another tenant's list", base, "admin-b", 404, "not_found"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h.call("GET", tt.path, tt.who, nil).ExpectError(t, tt.status, tt.code)
		})
	}
}
