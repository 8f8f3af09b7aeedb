package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func driftEvent(i int, protocol, kind, field string) DriftEvent {
	id := fmt.Sprintf("e%d", i)
	return DriftEvent{ID: id, Protocol: protocol, Kind: kind, Field: field, At: int64(1000 * i),
		Event: json.RawMessage(fmt.Sprintf(`{"id":%q}`, id))}
}

// ids renders a list as "e5 e4 ...".
func ids(t *testing.T, list []json.RawMessage) string {
	t.Helper()
	var out []string
	for _, raw := range list {
		var e struct{ ID string }
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatal(err)
		}
		out = append(out, e.ID)
	}
	return strings.Join(out, " ")
}

func TestDriftEvents(t *testing.T) {
	s := open(t, t.TempDir())
	ctx := t.Context()
	d := s.Drift()
	var batch []DriftEvent
	for i := 1; i <= 6; i++ {
		kind, protocol := "missing_field", "mqtt"
		if i%2 == 0 {
			kind, protocol = "new_field", "modbus"
		}
		batch = append(batch, driftEvent(i, protocol, kind, fmt.Sprintf("f%d", i%3)))
	}
	// keep 5 drops e1; e3..e6 again are stored once.
	for _, b := range [][]DriftEvent{batch, batch[2:]} {
		if err := d.Add(ctx, b, 5); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		f     DriftFilter
		want  string
		total int
	}{
		{DriftFilter{Limit: 10}, "e6 e5 e4 e3 e2", 5},
		{DriftFilter{Limit: 2}, "e6 e5", 5},
		{DriftFilter{Protocol: "mqtt", Limit: 10}, "e5 e3", 2},
		{DriftFilter{Kind: "new_field", Limit: 10}, "e6 e4 e2", 3},
		{DriftFilter{Field: "f0", Limit: 10}, "e6 e3", 2},
		{DriftFilter{Since: 4000, Limit: 10}, "e6 e5 e4", 3},
		{DriftFilter{Protocol: "mqtt", Kind: "new_field", Limit: 10}, "", 0},
	}
	for _, tc := range cases {
		list, total, err := d.List(ctx, tc.f)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(t, list); got != tc.want || total != tc.total {
			t.Errorf("%+v: %q total %d, want %q total %d", tc.f, got, total, tc.want, tc.total)
		}
	}
	if n, err := d.Clear(ctx); err != nil || n != 5 {
		t.Fatalf("clear = %d, %v", n, err)
	}
	if list, total, err := d.List(ctx, DriftFilter{Limit: 10}); err != nil || len(list) != 0 || total != 0 {
		t.Fatalf("after clear: %v %d %v", list, total, err)
	}
}
