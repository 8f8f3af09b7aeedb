package store

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// logCapture keeps the records a store logs.
type logCapture struct {
	mu   *sync.Mutex
	recs *[]slog.Record
}

func newLogCapture() logCapture { return logCapture{mu: new(sync.Mutex), recs: new([]slog.Record)} }

func (logCapture) Enabled(context.Context, slog.Level) bool { return true }
func (h logCapture) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	*h.recs = append(*h.recs, r.Clone())
	h.mu.Unlock()
	return nil
}
func (h logCapture) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logCapture) WithGroup(string) slog.Handler      { return h }

// find returns the records whose message starts with prefix.
func (h logCapture) find(prefix string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range *h.recs {
		if strings.HasPrefix(r.Message, prefix) {
			out = append(out, r)
		}
	}
	return out
}

func attr(r slog.Record, key string) slog.Value {
	var v slog.Value
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// fillQueue opens a store in dir and queues n records of 300 bytes for
// destination 1, with an identity and an endpoint beside them, then
// closes it (a checkpoint: everything is in agent.db).
func fillQueue(t *testing.T, dir string, n int) {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.SetMeta(ctx, "uuid", "agent-uuid-1"); err != nil {
		t.Fatal(err)
	}
	q, err := s.OfflineQueue(DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := q.Enqueue(ctx, 1, rec(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func rec(i int) Record {
	id := fmt.Sprintf("msg-%05d", i)
	return Record{MsgID: id, Topic: "t", Payload: []byte(id + strings.Repeat(".", 291))}
}

// scribble writes size bytes of (seeded, so repeatable) noise into path at
// offset.
func scribble(t *testing.T, path string, offset int64, size int) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	noise := make([]byte, size)
	r := rand.New(rand.NewPCG(16, uint64(offset)))
	for i := range noise {
		noise[i] = byte(r.Uint32())
	}
	if _, err := f.WriteAt(noise, offset); err != nil {
		t.Fatal(err)
	}
}

// TestCorruptStoreIsMovedAsideAndSalvaged (issue 16 item 11): a store with
// 16 KiB of noise in it is found at Open, moved aside with the time in its
// name, and the rows still readable go into a fresh store, counted in the
// log; the store reports itself unhealthy while the copy is kept.
func TestCorruptStoreIsMovedAsideAndSalvaged(t *testing.T) {
	const n = 3000
	tests := []struct {
		name string
		// offset of the noise as a share of the file, or the header
		offset     func(size int64) int64
		minSalvage int
		noise      int
	}{
		// 16 KiB is four pages of about 13 records each; the rest of the
		// queue must come through.
		{"noise past the header pages", func(size int64) int64 { return size / 2 / 4096 * 4096 }, n - 200, 16 << 10},
		// 16 KiB from the start destroy the schema's first page too:
		// nothing can be read, but the agent must still start, with the
		// file kept and the loss reported.
		{"noise over the first pages", func(int64) int64 { return 0 }, 0, 16 << 10},
		// A header alone is rewritten, and the rest read.
		{"noise over the header only", func(int64) int64 { return 0 }, n, 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			fillQueue(t, dir, n)
			path := filepath.Join(dir, FileName)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			scribble(t, path, tt.offset(fi.Size()), tt.noise)

			logs := newLogCapture()
			s, err := Open(ctx, dir, slog.New(logs))
			if err != nil {
				t.Fatalf("Open of a corrupt store: %v", err)
			}
			defer s.Close()
			r := s.Recovery()
			if r == nil {
				t.Fatal("corruption not detected: Recovery is nil")
			}
			copies := CorruptCopies(dir)
			if len(copies) != 1 || filepath.Join(dir, copies[0]) != r.MovedTo {
				t.Fatalf("corrupt copies %v, want the one Recovery names (%s)", copies, r.MovedTo)
			}
			moved, err := os.Stat(r.MovedTo)
			if err != nil || moved.Size() != fi.Size() {
				t.Fatalf("moved copy: %v, size %d, want the original's %d bytes", err, moved.Size(), fi.Size())
			}

			lines := logs.find("agent store was corrupt")
			if len(lines) != 1 {
				t.Fatalf("want one log line on the recovery, got %d", len(lines))
			}
			salvaged := attr(lines[0], "salvaged_offline_queue").Int64()
			if salvaged != r.Salvaged["offline_queue"] || salvaged < int64(tt.minSalvage) || salvaged > n {
				t.Fatalf("salvaged %d queued records (Recovery says %d), want %d..%d", salvaged, r.Salvaged["offline_queue"], tt.minSalvage, n)
			}
			t.Logf("salvaged %d of %d queued records; %s", salvaged, n, r)

			// What was salvaged is exactly what the queue holds and
			// counts, byte for byte as queued.
			q, err := s.OfflineQueue(DefaultQueueOptions())
			if err != nil {
				t.Fatal(err)
			}
			recs, err := q.Ready(ctx, 1, n+1, time.Now().Add(time.Hour))
			if err != nil {
				t.Fatal(err)
			}
			st, err := q.Stats(ctx, 1)
			if err != nil {
				t.Fatal(err)
			}
			if int64(len(recs)) != salvaged || st.Records != salvaged {
				t.Fatalf("queue holds %d records and counts %d, want the %d salvaged", len(recs), st.Records, salvaged)
			}
			for _, got := range recs {
				var i int
				if _, err := fmt.Sscanf(got.MsgID, "msg-%d", &i); err != nil || string(got.Payload) != string(rec(i).Payload) {
					t.Fatalf("salvaged record %q differs from the one queued", got.MsgID)
				}
			}
			if tt.minSalvage > 0 {
				if v, err := s.Meta(ctx, "uuid"); err != nil || v != "agent-uuid-1" {
					t.Fatalf("identity not salvaged: %q, %v", v, err)
				}
			}

			c := s.Condition(ctx)
			if c.Healthy || !strings.Contains(c.Reason, "corrupt") || !strings.Contains(c.Reason, copies[0]) {
				t.Fatalf("condition %+v, want unhealthy naming the corrupt copy", c)
			}
			// Removing the copy, once inspected, clears it.
			for _, sfx := range []string{"", "-wal", "-shm", headerSuffix} {
				_ = os.Remove(r.MovedTo + sfx)
			}
			if c := s.Condition(ctx); !c.Healthy {
				t.Fatalf("condition %+v after the copy was removed, want healthy", c)
			}
		})
	}
}

// TestSoundStoreIsNotRecovered: the check at Open leaves a sound store
// alone.
func TestSoundStoreIsNotRecovered(t *testing.T) {
	dir := t.TempDir()
	fillQueue(t, dir, 100)
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Recovery() != nil || len(CorruptCopies(dir)) != 0 {
		t.Fatalf("a sound store was recovered: %v, copies %v", s.Recovery(), CorruptCopies(dir))
	}
	if c := s.Condition(context.Background()); !c.Healthy {
		t.Fatalf("condition %+v, want healthy", c)
	}
}

// TestCorruptionWhileRunningIsConfirmedAndReported: a statement that
// meets a damaged page makes the store check itself, report the
// corruption and call its handler, instead of failing the same way every
// flush.
func TestCorruptionWhileRunningIsConfirmedAndReported(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	fillQueue(t, dir, 3000)
	s, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	reasons := make(chan string, 1)
	s.OnCorruption(func(reason string) { reasons <- reason })
	fi, err := os.Stat(s.Path())
	if err != nil {
		t.Fatal(err)
	}
	// The damage lands under the running store; a small cache makes the
	// next read go to the file.
	scribble(t, s.Path(), fi.Size()/3/4096*4096, 16<<10)
	for _, p := range []string{"PRAGMA cache_size = 1", "PRAGMA shrink_memory"} {
		if _, err := s.db.SQL().ExecContext(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	q, err := s.OfflineQueue(DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	_, err = q.Ready(ctx, 1, 5000, time.Now().Add(time.Hour))
	if !IsCorrupt(err) {
		t.Fatalf("Ready over a damaged page = %v, want a corruption error", err)
	}
	select {
	case reason := <-reasons:
		if !strings.Contains(reason, "corrupt") {
			t.Fatalf("handler reason %q", reason)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("corruption handler not called")
	}
	if c := s.Condition(ctx); c.Healthy || !strings.Contains(c.Reason, "corrupt") {
		t.Fatalf("condition %+v, want unhealthy: corrupt", c)
	}
}

// TestFullDiskKeepsQueueAndRecovers (issue 16 item 10): with the store's
// file at its size limit (SQLITE_FULL, as a full disk gives), a refused
// record does not cost the queued ones, delivered records can still be
// acked (the flush goes on), the store reports the full disk with one
// rate-limited log line, and it takes records again once space returns.
func TestFullDiskKeepsQueueAndRecovers(t *testing.T) {
	ctx := context.Background()
	logs := newLogCapture()
	s, err := Open(ctx, t.TempDir(), slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := s.OfflineQueue(DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	w := s.db.SQL()
	var pages int64
	if err := w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+20)); err != nil {
		t.Fatal(err)
	}
	var queued []string
	var fullErr error
	for i := 0; i < 10000 && fullErr == nil; i++ {
		if _, err := q.Enqueue(ctx, 1, rec(i)); err != nil {
			fullErr = err
			break
		}
		queued = append(queued, rec(i).MsgID)
	}
	if !IsFull(fullErr) || len(queued) == 0 {
		t.Fatalf("after %d records: %v, want SQLITE_FULL", len(queued), fullErr)
	}
	for i := range 50 {
		if _, err := q.Enqueue(ctx, 1, rec(20000+i)); !IsFull(err) {
			t.Fatalf("enqueue on a full disk: %v", err)
		}
	}
	if got := logs.find("agent store disk full"); len(got) != 1 {
		t.Fatalf("%d disk-full log lines for 51 refused writes, want 1", len(got))
	}
	c := s.Condition(ctx)
	if c.Healthy || !strings.Contains(c.Reason, "disk full") {
		t.Fatalf("condition %+v, want unhealthy: disk full", c)
	}

	// Nothing queued was lost, and the flush can go on: ack the first
	// ten while the disk is still full.
	recs, err := q.Ready(ctx, 1, 20000, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.MsgID)
	}
	if !slices.Equal(got, queued) {
		t.Fatalf("queue holds %d records, want the %d queued before the disk filled", len(got), len(queued))
	}
	if n, err := q.Ack(ctx, 1, []int64{recs[0].ID, recs[1].ID}); err != nil || n != 2 {
		t.Fatalf("ack on a full disk: %d, %v", n, err)
	}

	// Space returns.
	if _, err := w.ExecContext(ctx, "PRAGMA max_page_count = 1000000"); err != nil {
		t.Fatal(err)
	}
	if c := s.Condition(ctx); !c.Healthy {
		t.Fatalf("condition %+v once space returned, want healthy", c)
	}
	if len(logs.find("agent store can write again")) != 1 {
		t.Fatal("recovery from the full disk not logged")
	}
	if _, err := q.Enqueue(ctx, 1, rec(30000)); err != nil {
		t.Fatalf("enqueue once space returned: %v", err)
	}
	st, err := q.Stats(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	if st.Records != int64(len(queued))-2+1 {
		t.Fatalf("queue depth %d, want %d", st.Records, len(queued)-1)
	}
}

// TestTableWritesReportFullDisk: a write of any table group that meets
// SQLITE_FULL marks the store full, not only the offline queue's.
func TestTableWritesReportFullDisk(t *testing.T) {
	big := strings.Repeat("x", 64<<10)
	for name, write := range map[string]func(context.Context, *Store) error{
		"settings": func(ctx context.Context, s *Store) error { return s.SaveSettings(ctx, []byte(big)) },
		"meta":     func(ctx context.Context, s *Store) error { return s.SetMeta(ctx, "note", big) },
		"admins": func(ctx context.Context, s *Store) error {
			return s.Admins().Create(ctx, AdminUser{Username: "root", PasswordHash: big, Active: true})
		},
		"endpoints": func(ctx context.Context, s *Store) error {
			return s.Endpoints().Create(ctx, adapters.Endpoint{UUID: "u", Name: big, Protocol: "modbus"})
		},
		"publishing": func(ctx context.Context, s *Store) error {
			_, err := s.Publishing().CreateDestination(ctx, Destination{Name: "d", Type: "mqtt", Config: json.RawMessage(`"` + big + `"`)})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s, err := Open(ctx, t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			w := s.db.SQL()
			var pages int64
			if err := w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
				t.Fatal(err)
			}
			// Not a page to spare: the space probe of Condition fails too.
			if _, err := w.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
				t.Fatal(err)
			}
			if err := write(ctx, s); !IsFull(err) {
				t.Fatalf("write of %d bytes with no page left: %v, want SQLITE_FULL", len(big), err)
			}
			if c := s.Condition(ctx); c.Healthy || !strings.Contains(c.Reason, "disk full") {
				t.Fatalf("condition %+v, want unhealthy: disk full", c)
			}
		})
	}
}
