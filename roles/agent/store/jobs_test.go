package store

import (
	"context"
	"errors"
	"testing"
)

// TestJobsOnce: a jobId is received once, ends once, and a tombstone
// keeps a later dispatch of it out.
func TestJobsOnce(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	jobs := s.Jobs()
	steps := []struct {
		name string
		do   func() (bool, error)
		want bool
	}{
		{"first receive", func() (bool, error) { return jobs.Receive(ctx, Job{JobID: "a", Handler: "sync"}) }, true},
		{"second receive", func() (bool, error) { return jobs.Receive(ctx, Job{JobID: "a", Handler: "sync"}) }, false},
		{"other receive", func() (bool, error) {
			return jobs.Receive(ctx, Job{JobID: "b", Handler: "shell", Params: `{"command":"id"}`})
		}, true},
		{"first end", func() (bool, error) { return jobs.End(ctx, "a", JobEnd{Status: "succeeded", Result: "ok"}, false) }, true},
		{"second end", func() (bool, error) { return jobs.End(ctx, "a", JobEnd{Status: "failed"}, false) }, false},
		{"tombstone then receive", func() (bool, error) {
			if err := jobs.Tombstone(ctx, "c", JobEnd{Status: "cancelled", Reason: "cancelled"}); err != nil {
				return false, err
			}
			return jobs.Receive(ctx, Job{JobID: "c", Handler: "sync"})
		}, false},
	}
	for _, st := range steps {
		got, err := st.do()
		if err != nil || got != st.want {
			t.Fatalf("%s: %v %v, want %v", st.name, got, err, st.want)
		}
	}
	if n, err := jobs.Queued(ctx); err != nil || n != 1 {
		t.Fatalf("queued %d %v", n, err)
	}
	if j, err := jobs.Next(ctx); err != nil || j.JobID != "b" || j.Params != `{"command":"id"}` {
		t.Fatalf("next %+v %v", j, err)
	}
	if err := jobs.SetState(ctx, "b", JobRunning); err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.Next(ctx); !errors.Is(err, ErrNotFound) {
		t.Fatalf("next with none queued: %v", err)
	}
	open, err := jobs.Open(ctx)
	if err != nil || len(open) != 2 || open[0].JobID != "a" || open[1].JobID != "b" || open[1].StartedAt.IsZero() {
		t.Fatalf("open %+v %v", open, err)
	}
	if err := jobs.MarkReported(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if j, err := jobs.Get(ctx, "a"); err != nil || !j.Reported || j.Status != "succeeded" || j.Result != "ok" || j.EndedAt.IsZero() {
		t.Fatalf("a %+v %v", j, err)
	}
	list, err := jobs.List(ctx, 10)
	if err != nil || len(list) != 3 || list[0].JobID != "c" || list[2].JobID != "a" {
		t.Fatalf("list %+v %v", list, err)
	}
	if _, err := jobs.Get(ctx, "zz"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
}
