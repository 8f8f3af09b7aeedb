package breaker

import (
	"errors"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestBreaker(t *testing.T) {
	fail := errors.New("insert failed")
	tests := []struct {
		name  string
		steps func(b *Breaker, c *clock)
		want  State
	}{
		{"stays closed on success", func(b *Breaker, _ *clock) {
			for range 100 {
				b.Record(nil)
			}
		}, Closed},
		{"too few outcomes never open", func(b *Breaker, _ *clock) {
			for range 4 {
				b.Record(fail)
			}
		}, Closed},
		{"opens at the failure ratio", func(b *Breaker, _ *clock) {
			for range 3 {
				b.Record(nil)
			}
			for range 3 {
				b.Record(fail)
			}
		}, Open},
		{"below the ratio stays closed", func(b *Breaker, _ *clock) {
			for range 10 {
				b.Record(nil)
			}
			for range 4 {
				b.Record(fail)
			}
		}, Closed},
		{"old failures fall out of the window", func(b *Breaker, c *clock) {
			for range 4 {
				b.Record(fail)
			}
			c.advance(31 * time.Second)
			b.Record(fail) // only one failure in the window now
		}, Closed},
		{"successes do not close an open breaker", func(b *Breaker, _ *clock) {
			b.Trip()
			for range 50 {
				b.Record(nil)
			}
		}, Open},
		{"reset closes and forgets", func(b *Breaker, _ *clock) {
			for range 5 {
				b.Record(fail)
			}
			b.Reset()
			b.Record(fail)
		}, Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1_700_000_000, 0)}
			b, err := New(Options{Now: c.now})
			if err != nil {
				t.Fatal(err)
			}
			tt.steps(b, c)
			if got := b.State(); got != tt.want {
				t.Errorf("state = %s, want %s", got, tt.want)
			}
			if b.Allow() != (tt.want == Closed) {
				t.Error("Allow disagrees with State")
			}
		})
	}
}

func TestOnChange(t *testing.T) {
	var changes []string
	b, _ := New(Options{MinRequests: 1, OnChange: func(from, to State) { changes = append(changes, from.String()+"->"+to.String()) }})
	b.Record(errors.New("x"))
	b.Record(errors.New("x"))
	b.Reset()
	if len(changes) != 2 || changes[0] != "closed->open" || changes[1] != "open->closed" {
		t.Errorf("changes = %v", changes)
	}
	if b.OpenedAt().IsZero() {
		t.Error("OpenedAt not recorded")
	}
}

func TestInvalidOptions(t *testing.T) {
	for _, o := range []Options{{FailureRatio: 1.5}, {Buckets: -1}, {MinRequests: -2}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) should fail", o)
		}
	}
}
