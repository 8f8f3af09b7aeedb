package health

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	tests := []struct {
		name    string
		checks  map[string]Check
		healthy bool
		failing []string
	}{
		{name: "no checks is healthy", healthy: true},
		{name: "all pass", checks: map[string]Check{"db": func(context.Context) error { return nil }}, healthy: true},
		{name: "one fails", checks: map[string]Check{
			"db":          func(context.Context) error { return nil },
			"streamstore": func(context.Context) error { return errors.New("connection refused") },
		}, failing: []string{"streamstore"}},
		{name: "a hung check times out", checks: map[string]Check{
			"mqtt": func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
		}, failing: []string{"mqtt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := New(50 * time.Millisecond)
			for n, c := range tt.checks {
				r.Register(n, c)
			}
			rep := r.Report(context.Background())
			if rep.Healthy != tt.healthy {
				t.Errorf("healthy = %v, want %v (%+v)", rep.Healthy, tt.healthy, rep)
			}
			for _, n := range tt.failing {
				if st := rep.Components[n]; st.Healthy || st.Error == "" {
					t.Errorf("%s = %+v, want unhealthy with an error", n, st)
				}
			}
			if len(rep.Components) != len(tt.checks) {
				t.Errorf("components = %d, want %d", len(rep.Components), len(tt.checks))
			}
		})
	}
}

func TestUnregister(t *testing.T) {
	r := New(time.Second)
	r.Register("x", func(context.Context) error { return errors.New("down") })
	r.Unregister("x")
	if rep := r.Report(context.Background()); !rep.Healthy || len(r.Names()) != 0 {
		t.Errorf("unregistered check still reported: %+v", rep)
	}
}
