package spool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
)

func entry(i int) Entry {
	return Entry{Source: "i/t/a/a/endpoints/modbus", Data: json.RawMessage(fmt.Sprintf(`[{"seq":%d}]`, i))}
}

func seqOf(t *testing.T, e Entry) int {
	t.Helper()
	var v []struct{ Seq int }
	if err := json.Unmarshal(e.Data, &v); err != nil || len(v) != 1 {
		t.Fatalf("bad entry %s: %v", e.Data, err)
	}
	return v[0].Seq
}

func open(t *testing.T, dir string, max, fileBytes int64) *Spool {
	t.Helper()
	s, err := Open(Options{Dir: dir, MaxBytes: max, FileBytes: fileBytes})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func collect(t *testing.T, s *Spool) []int {
	t.Helper()
	var got []int
	_, err := s.Replay(context.Background(), 7, func(_ context.Context, es []Entry) error {
		for _, e := range es {
			got = append(got, seqOf(t, e))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func spoolFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(dir, "spool-*.ndjson"))
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	sort.Strings(m)
	return m
}

func TestAppendReplayInOrderAndRotation(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20, 256) // ~8 lines per file
	for i := range 50 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Stats(); st.Files < 5 {
		t.Errorf("files = %d, want rotation at the 256-byte cap", st.Files)
	}
	got := collect(t, s)
	if len(got) != 50 {
		t.Fatalf("replayed %d entries, want 50", len(got))
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("replay out of order at %d: %v", i, got)
		}
	}
	if !s.Empty() || len(spoolFiles(t, dir)) != 0 {
		t.Errorf("replayed files not deleted: %v", spoolFiles(t, dir))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestNumberingContinuesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20, 100)
	for i := range 6 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	before := spoolFiles(t, dir)
	s = open(t, dir, 1<<20, 100)
	if err := s.Append(entry(6)); err != nil {
		t.Fatal(err)
	}
	after := spoolFiles(t, dir)
	want := fmt.Sprintf("spool-%d.ndjson", len(before)+1)
	if len(after) != len(before)+1 || after[len(after)-1] != want && !contains(after, want) {
		t.Errorf("before %v, after %v: want new file %s", before, after, want)
	}
	if got := collect(t, s); len(got) != 7 || got[6] != 6 {
		t.Errorf("replay after restart = %v", got)
	}
	s.Close()
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestMaxSizeDeletesOldestFile(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 600, 200)
	for i := range 40 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	if st.Bytes > 600+200 || st.DroppedFiles == 0 {
		t.Errorf("stats %+v: want the total kept near 600 bytes by dropping old files", st)
	}
	got := collect(t, s)
	if len(got) == 0 || got[len(got)-1] != 39 || got[0] == 0 {
		t.Errorf("want the newest entries kept and the oldest dropped, got %v", got)
	}
	s.Close()
}

func TestTornAndCorruptLinesAreSkipped(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20, 1<<20)
	for i := range 3 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// A corrupt line in the middle and a torn line at the end, as a crash
	// during a write would leave.
	f, err := os.OpenFile(filepath.Join(dir, "spool-1.ndjson"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprint(f, "{not json}\n")
	b, _ := json.Marshal(entry(3))
	f.Write(append(b, '\n'))
	f.Write([]byte(`{"source":"x","data":[{"seq":4`))
	f.Close()

	s = open(t, dir, 1<<20, 1<<20)
	got := collect(t, s)
	if fmt.Sprint(got) != "[0 1 2 3]" {
		t.Errorf("replayed %v, want [0 1 2 3]", got)
	}
	if st := s.Stats(); st.SkippedLines != 2 {
		t.Errorf("skipped = %d, want 2", st.SkippedLines)
	}
	s.Close()
}

// TestReplayFailureKeepsDataAndResumes: a failing consumer leaves its batch
// spooled; a restart resumes after the last accepted batch.
func TestReplayFailureKeepsDataAndResumes(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20, 1<<20)
	for i := range 30 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	down := errors.New("database down")
	var first []int
	calls := 0
	n, err := s.Replay(context.Background(), 10, func(_ context.Context, es []Entry) error {
		calls++
		if calls == 2 {
			return down
		}
		for _, e := range es {
			first = append(first, seqOf(t, e))
		}
		return nil
	})
	if !errors.Is(err, down) || n != 10 {
		t.Fatalf("Replay = %d, %v; want 10 accepted then the consumer's error", n, err)
	}
	s.Close()

	s = open(t, dir, 1<<20, 1<<20)
	rest := collect(t, s)
	all := append(first, rest...)
	if len(all) != 30 {
		t.Fatalf("got %d entries across the restart, want exactly 30: %v", len(all), all)
	}
	for i, v := range all {
		if v != i {
			t.Fatalf("entry %d = %d: %v", i, v, all)
		}
	}
	s.Close()
}

func TestAppendDuringReplay(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<30, 4096)
	for i := range 200 {
		if err := s.Append(entry(i)); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 200; i < 400; i++ {
			if err := s.Append(entry(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	seen := map[int]bool{}
	for len(seen) < 400 {
		_, err := s.Replay(context.Background(), 25, func(_ context.Context, es []Entry) error {
			for _, e := range es {
				v := seqOf(t, e)
				if seen[v] {
					t.Errorf("entry %d replayed twice", v)
				}
				seen[v] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(seen) < 400 && s.Empty() {
			wg.Wait()
		}
	}
	wg.Wait()
	if !s.Empty() {
		t.Error("spool not empty after replaying everything")
	}
	s.Close()
}

func TestPermissionsAndValidation(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "spool")
	s := open(t, dir, 1<<20, 1<<20)
	if err := s.Append(entry(1)); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(dir); fi.Mode().Perm() != 0o700 {
		t.Errorf("dir mode %v", fi.Mode().Perm())
	}
	if fi, _ := os.Stat(filepath.Join(dir, "spool-1.ndjson")); fi.Mode().Perm() != 0o600 {
		t.Errorf("file mode %v", fi.Mode().Perm())
	}
	if err := s.Append(Entry{Source: "x", Data: json.RawMessage("{broken")}); err == nil {
		t.Error("invalid JSON data accepted")
	}
	s.Close()
	if _, err := Open(Options{Dir: dir}); err == nil {
		t.Error("Open without a maximum size accepted")
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte(`{"source":"a","data":[1,2]}` + "\n"))
	f.Add([]byte(`{"source":"a","data":null}`))
	f.Add([]byte(`{"source":"a","data":[{"x":1}],"extra":1}`))
	f.Add([]byte(`{}{}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			return
		}
		if !json.Valid(e.Data) {
			t.Fatalf("accepted invalid data %q", e.Data)
		}
	})
}

// TestCloseIsFinal: an Append after Close must fail and open no file. A
// spool that reopened its writer after Close would hold a descriptor that
// nobody closes, and data that the next run cannot count on.
func TestCloseIsFinal(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20, 1<<16)
	if err := s.Append(entry(1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := spoolFiles(t, dir)
	if err := s.Append(entry(2)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close = %v, want ErrClosed", err)
	}
	if _, err := s.Replay(context.Background(), 10, func(context.Context, []Entry) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Replay after Close = %v, want ErrClosed", err)
	}
	if after := spoolFiles(t, dir); !slices.Equal(before, after) {
		t.Fatalf("files after Close changed from %v to %v", before, after)
	}
	if s.w != nil {
		t.Fatal("Append after Close opened a writer")
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close = %v", err)
	}
	if got := collect(t, open(t, dir, 1<<20, 1<<16)); !slices.Equal(got, []int{1}) {
		t.Fatalf("next run replays %v, want [1]", got)
	}
}
