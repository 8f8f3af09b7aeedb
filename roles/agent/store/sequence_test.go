package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

func newSeq(t *testing.T, s *Store, block int) *Sequence {
	t.Helper()
	q, err := s.NewSequence(context.Background(), "msg_sequence", block)
	if err != nil {
		t.Fatal(err)
	}
	return q
}

func take(t *testing.T, q *Sequence, n int) []uint64 {
	t.Helper()
	out := make([]uint64, n)
	for i := range out {
		v, err := q.Next(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		out[i] = v
	}
	return out
}

func TestSequenceIncreasesAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	first := take(t, newSeq(t, s, 10), 25)
	for i, v := range first {
		if v != uint64(i+1) {
			t.Fatalf("first run number %d = %d, want %d", i, v, i+1)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir)
	second := take(t, newSeq(t, s, 10), 25)
	last := first[len(first)-1]
	for _, v := range second {
		if v <= last {
			t.Fatalf("after reopen %d follows %d", v, last)
		}
		last = v
	}
	// 25 taken of blocks of 10: the third block (21..30) was reserved, so
	// the reopened sequence starts above it.
	if second[0] != 31 {
		t.Errorf("after reopen first number %d, want 31", second[0])
	}
}

// TestSequenceNoReuseWithoutShutdown opens the database again while the
// first handle is still open and never closed: what a restart after a crash
// sees, with WAL frames the first handle never checkpointed.
func TestSequenceNoReuseWithoutShutdown(t *testing.T) {
	dir := t.TempDir()
	crashed, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crashed.Close() })
	before := take(t, newSeq(t, crashed, 1000), 1500)

	restarted := open(t, dir)
	after := take(t, newSeq(t, restarted, 1000), 10)
	if after[0] <= before[len(before)-1] {
		t.Fatalf("after the crash %d, before it up to %d", after[0], before[len(before)-1])
	}
}

// TestSequenceSurvivesKill hands out numbers in a child process, kills it
// with SIGKILL mid-stream, and checks the next start begins above every
// number the child reported.
func TestSequenceSurvivesKill(t *testing.T) {
	if dir := killChildDir("TestSequenceSurvivesKill"); dir != "" {
		seqKillChild(dir)
		return
	}
	dir := t.TempDir()
	highest := runAndKill(t, "TestSequenceSurvivesKill", dir, 2500)
	next := take(t, newSeq(t, open(t, dir), 100), 1)[0]
	if next <= highest {
		t.Fatalf("after SIGKILL the sequence restarts at %d, child had handed out %d", next, highest)
	}
}

func seqKillChild(dir string) {
	ctx := context.Background()
	s, err := Open(ctx, dir, nil)
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(1)
	}
	// Small blocks: many reservations happen while the parent reads.
	q, err := s.NewSequence(ctx, "msg_sequence", 100)
	if err != nil {
		fmt.Println("sequence:", err)
		os.Exit(1)
	}
	for {
		n, err := q.Next(ctx)
		if err != nil {
			fmt.Println("next:", err)
			os.Exit(1)
		}
		fmt.Println(n)
	}
}

func TestSequenceConcurrent(t *testing.T) {
	s := open(t, t.TempDir())
	// Two Sequences on one key share the stored mark, as two publishers
	// of one agent might.
	qs := []*Sequence{newSeq(t, s, 7), newSeq(t, s, 13)}
	const workers, each = 8, 200
	got := make([][]uint64, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			q := qs[w%len(qs)]
			var last uint64
			for range each {
				v, err := q.Next(context.Background())
				if err != nil {
					t.Error(err)
					return
				}
				if v <= last {
					t.Errorf("worker %d: %d after %d", w, v, last)
				}
				last = v
				got[w] = append(got[w], v)
			}
		})
	}
	wg.Wait()
	seen := map[uint64]bool{}
	for _, vs := range got {
		for _, v := range vs {
			if seen[v] {
				t.Fatalf("%d handed out twice", v)
			}
			seen[v] = true
		}
	}
	if len(seen) != workers*each {
		t.Fatalf("%d distinct numbers, want %d", len(seen), workers*each)
	}
}

func TestSequenceErrors(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	if _, err := s.NewSequence(ctx, "", 10); err == nil {
		t.Error("empty key accepted")
	}
	if _, err := s.NewSequence(ctx, "k", maxSequenceBlock+1); err == nil {
		t.Error("huge block accepted")
	}
	for _, bad := range []string{"x12", "", "-5", "12.5", "9999999999999999999"} {
		if err := s.SetMeta(ctx, "bad", bad); err != nil {
			t.Fatal(err)
		}
		if _, err := s.NewSequence(ctx, "bad", 10); !errors.Is(err, ErrSequenceCorrupt) {
			t.Errorf("mark %q: NewSequence err = %v", bad, err)
		}
	}
	// A mark spoiled after the sequence was opened is caught at the next
	// reservation rather than read as 0.
	q := newSeq(t, s, 2)
	take(t, q, 2)
	if err := s.SetMeta(ctx, "msg_sequence", "oops"); err != nil {
		t.Fatal(err)
	}
	if _, err := q.Next(ctx); !errors.Is(err, ErrSequenceCorrupt) {
		t.Errorf("Next on a corrupt mark: %v", err)
	}
	if v, _ := s.Meta(ctx, "msg_sequence"); v != "oops" {
		t.Errorf("corrupt mark overwritten with %q", v)
	}
}
