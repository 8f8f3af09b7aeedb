package logring

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
)

// seed fills a ring with entries whose Message is their index, cycling
// through levels and sources, with timestamps 1000, 1001, ...
func seed(r *Ring, n int) {
	levels := []string{LevelDebug, LevelInfo, LevelWarn, LevelError}
	sources := []string{SourceSystem, SourceContainer, SourceManager}
	for i := range n {
		r.Add(Entry{
			Level:     levels[i%len(levels)],
			Message:   fmt.Sprint(i),
			Timestamp: int64(1000 + i),
			Component: "c",
			Source:    sources[i%len(sources)],
		})
	}
}

func messages(es []Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Message
	}
	return out
}

func seq(from, to int, step int) []string {
	var out []string
	for i := from; i <= to; i += step {
		out = append(out, fmt.Sprint(i))
	}
	return out
}

func TestQuery(t *testing.T) {
	tests := []struct {
		name      string
		capacity  int
		added     int
		filter    Filter
		want      []string
		wantTotal int
	}{
		{name: "empty ring", capacity: 10, added: 0, filter: Filter{}, want: []string{}, wantTotal: 0},
		{name: "all", capacity: 10, added: 5, filter: Filter{}, want: seq(0, 4, 1), wantTotal: 5},
		{name: "min level warn", capacity: 20, added: 8, filter: Filter{Level: LevelWarn}, want: []string{"2", "3", "6", "7"}, wantTotal: 4},
		{name: "min level error", capacity: 20, added: 8, filter: Filter{Level: LevelError}, want: []string{"3", "7"}, wantTotal: 2},
		{name: "min level debug is all", capacity: 20, added: 8, filter: Filter{Level: LevelDebug}, want: seq(0, 7, 1), wantTotal: 8},
		{name: "unknown level matches nothing", capacity: 20, added: 8, filter: Filter{Level: "fatal"}, want: []string{}, wantTotal: 0},
		{name: "source", capacity: 20, added: 9, filter: Filter{Source: SourceContainer}, want: []string{"1", "4", "7"}, wantTotal: 3},
		{name: "since inclusive", capacity: 20, added: 9, filter: Filter{Since: 1006}, want: []string{"6", "7", "8"}, wantTotal: 3},
		{name: "since in future", capacity: 20, added: 9, filter: Filter{Since: 5000}, want: []string{}, wantTotal: 0},
		{name: "combined", capacity: 50, added: 30, filter: Filter{Level: LevelWarn, Source: SourceSystem, Since: 1010}, want: []string{"15", "18", "27"}, wantTotal: 3},
		{name: "limit keeps newest in order", capacity: 50, added: 30, filter: Filter{Limit: 3}, want: []string{"27", "28", "29"}, wantTotal: 30},
		{name: "default limit 200", capacity: 500, added: 300, filter: Filter{}, want: seq(100, 299, 1), wantTotal: 300},
		{name: "limit capped at 1000", capacity: 3000, added: 2500, filter: Filter{Limit: 5000}, want: seq(1500, 2499, 1), wantTotal: 2500},
		{name: "wrap-around keeps last capacity", capacity: 10, added: 25, filter: Filter{}, want: seq(15, 24, 1), wantTotal: 10},
		{name: "wrap-around exact multiple", capacity: 10, added: 20, filter: Filter{}, want: seq(10, 19, 1), wantTotal: 10},
		{name: "wrap-around with filter and limit", capacity: 10, added: 25, filter: Filter{Level: LevelInfo, Limit: 2}, want: []string{"22", "23"}, wantTotal: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(tt.capacity)
			seed(r, tt.added)
			got, total := r.Query(tt.filter)
			if total != tt.wantTotal {
				t.Errorf("total %d, want %d", total, tt.wantTotal)
			}
			if g := messages(got); !slices.Equal(g, tt.want) {
				t.Errorf("got %v, want %v", g, tt.want)
			}
		})
	}
}

func TestNewDefaults(t *testing.T) {
	if c := New(0).Cap(); c != DefaultCapacity {
		t.Errorf("capacity %d", c)
	}
	r := New(3)
	seed(r, 5)
	if r.Len() != 3 {
		t.Errorf("len %d", r.Len())
	}
}

func TestQueryResultIsACopy(t *testing.T) {
	r := New(4)
	seed(r, 2)
	got, _ := r.Query(Filter{})
	got[0].Message = "changed"
	again, _ := r.Query(Filter{})
	if again[0].Message != "0" {
		t.Error("Query exposed the ring's storage")
	}
}

func TestAddDoesNotAllocate(t *testing.T) {
	r := New(100)
	e := Entry{Level: LevelInfo, Message: "m", Component: "c", Source: SourceSystem}
	if n := testing.AllocsPerRun(1000, func() { r.Add(e) }); n != 0 {
		t.Errorf("Add allocates %v times", n)
	}
}

func TestEntryJSON(t *testing.T) {
	tests := []struct {
		e    Entry
		want string
	}{
		{Entry{Level: "info", Message: "m", Timestamp: 5, Component: "c", Source: "system"},
			`{"level":"info","message":"m","timestamp":5,"component":"c","appId":"","source":"system"}`},
		{Entry{Level: "warn", Message: "m", Timestamp: 5, Component: "c", AppID: "7", Source: "container"},
			`{"level":"warn","message":"m","timestamp":5,"component":"c","appId":"7","source":"container"}`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.e)
		if err != nil || string(b) != tt.want {
			t.Errorf("got %s (%v), want %s", b, err, tt.want)
		}
	}
}

func TestConcurrentAddQuery(t *testing.T) {
	r := New(256)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 2000 {
				r.Add(Entry{Level: LevelInfo, Message: fmt.Sprint(w, "-", i), Timestamp: int64(i), Source: SourceSystem})
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 500 {
				got, total := r.Query(Filter{Level: LevelInfo, Limit: 50})
				if len(got) > 50 || total > 256 || len(got) > total {
					t.Errorf("len %d total %d", len(got), total)
					return
				}
			}
		})
	}
	wg.Wait()
	if _, total := r.Query(Filter{}); total != 256 {
		t.Errorf("total after load %d", total)
	}
}
