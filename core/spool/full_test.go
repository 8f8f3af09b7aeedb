package spool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestReplayProgressSurvivesUnwritablePosition injects ENOSPC into every
// write of the replay position, as on a spool disk filled by the spool
// itself: replay must still hand each entry over exactly once, across
// replays that a failing consumer interrupts, and delete the file, which
// is what frees the disk.
func TestReplayProgressSurvivesUnwritablePosition(t *testing.T) {
	tests := []struct {
		name   string
		failAt int // the consumer fails its nth call once; 0 never
	}{
		{"one replay", 0},
		{"interrupted replay resumes", 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, 1<<20, 1<<20)
			defer s.Close()
			full := fmt.Errorf("write replay.pos.tmp: %w", syscall.ENOSPC)
			s.writeFile = func(string, []byte, os.FileMode) error { return full }
			const n = 250
			for i := range n {
				if err := s.Append(entry(i)); err != nil {
					t.Fatal(err)
				}
			}
			seen := make(map[int]int)
			calls := 0
			down := errors.New("store down")
			fn := func(_ context.Context, es []Entry) error {
				calls++
				if calls == tc.failAt {
					return down
				}
				for _, e := range es {
					seen[seqOf(t, e)]++
				}
				return nil
			}
			for attempt := 0; !s.Empty(); attempt++ {
				if attempt == 5 {
					t.Fatalf("spool not drained after %d replays; %d of %d entries seen", attempt, len(seen), n)
				}
				if _, err := s.Replay(context.Background(), 100, fn); err != nil && !errors.Is(err, down) {
					t.Fatalf("replay: %v", err)
				}
				if st := s.Stats(); !s.Empty() && !st.PositionUnsaved {
					t.Errorf("stats say the position is saved while every write of it fails")
				}
			}
			for i := range n {
				if seen[i] != 1 {
					t.Fatalf("entry %d handed over %d times, want exactly once", i, seen[i])
				}
			}
			if files := spoolFiles(t, dir); len(files) != 0 {
				t.Errorf("spool files left after a full replay: %v", files)
			}
			if _, err := os.Stat(filepath.Join(dir, posFile+".tmp")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("temporary position file left behind: %v", err)
			}
		})
	}
}

// TestFullFileSystem fills a real small file system with the spool
// itself: Append fails for space and says so, no entry whose Append
// succeeded is lost to a torn line, and replay drains it all on the full
// disk (where not even the position can be written) and frees the space.
func TestFullFileSystem(t *testing.T) {
	dir := coretest.SmallFS(t, 64<<10)
	s := open(t, dir, 1<<30, 1<<20)
	defer s.Close()
	var stored []int
	big := func(i int) Entry {
		e := entry(i)
		e.Source = fmt.Sprintf("%0900d", i) // ~1 KB lines fill it fast
		return e
	}
	var appendErr error
	for i := 0; i < 1000; i++ {
		if appendErr = s.Append(big(i)); appendErr != nil {
			break
		}
		stored = append(stored, i)
	}
	if !IsNoSpace(appendErr) {
		t.Fatalf("append on a full 64 KiB file system: %v, want ENOSPC", appendErr)
	}
	if !s.Stats().DiskFull {
		t.Error("Stats().DiskFull false after an append failed for space")
	}
	// Further appends fail alike and must not leave torn bytes between
	// the stored lines.
	for i := 1000; i < 1005; i++ {
		if err := s.Append(big(i)); err == nil {
			stored = append(stored, i)
		}
	}
	var got []int
	if _, err := s.Replay(context.Background(), 10, func(_ context.Context, es []Entry) error {
		for _, e := range es {
			got = append(got, seqOf(t, e))
		}
		return nil
	}); err != nil {
		t.Fatalf("replay on the full disk: %v", err)
	}
	if fmt.Sprint(got) != fmt.Sprint(stored) {
		t.Fatalf("replayed %d entries, want the %d stored, in order\ngot  %v\nwant %v", len(got), len(stored), got, stored)
	}
	if st := s.Stats(); st.DiskFull || st.SkippedLines != 0 {
		t.Errorf("after the replay freed the disk: %+v, want not full and nothing skipped", st)
	}
	if err := s.Append(big(2000)); err != nil {
		t.Errorf("append after the replay freed the disk: %v", err)
	}
}
