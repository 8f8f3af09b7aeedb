//go:build linux

package ingest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"syscall"
)

// smallTmpfs mounts a tmpfs of size (mount's syntax: "512k") on a new
// directory and returns the directory and a function that resizes it. It
// needs root; without it the test is skipped, or failed under CI.
func smallTmpfs(t *testing.T, size string) (dir string, resize func(size string)) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "spool")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("edgeplat-test", dir, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		coretest.Unavailable(t, "tmpfs mount (needs root)", dir, err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir, func(size string) {
		if err := syscall.Mount("edgeplat-test", dir, "tmpfs", syscall.MS_REMOUNT, "size="+size+",mode=0700"); err != nil {
			t.Fatalf("resize tmpfs: %v", err)
		}
	}
}

// TestSpoolDiskFullFault runs ingest with its spool on a 512 KiB tmpfs and
// stops PostgreSQL under 200 msg/s until the spool's disk is full. When
// PostgreSQL is back, with the disk still full, ingestion resumes (the
// breaker closes although the spool cannot drain); when space returns, the
// spool drains and the rows are exact, with nothing dead-lettered. Before,
// the breaker waited for an empty spool, so ingestion stopped for good.
func TestSpoolDiskFullFault(t *testing.T) {
	srv := coretest.PrivatePostgres(t)
	h := faultHarness(t, srv.Config())
	dir, resize := smallTmpfs(t, "512k")
	h.cfg.Spool.Enabled = true
	h.cfg.Spool.Path = dir
	h.cfg.Spool.MaxSizeMB = 100 // the file system, not the budget, is what fills
	h.cfg.Ingest.ReclaimIdleMS = 2000
	h.start()
	t0 := time.Now()
	base := time.Now().UTC().Truncate(time.Millisecond)
	l := startLoad(h, 200, func(i int) (string, int) { return h.good(base, i) })

	time.Sleep(time.Second)
	srv.Stop()
	coretest.Eventually(t, 60*time.Second, "the spool's disk to fill", func() bool { return h.eng.spoolFailing.Load() })
	if body := healthBody(h); body["spool"] == nil {
		t.Errorf("/health while the spool's disk is full = %v, want a spool field saying so", body)
	}
	time.Sleep(3 * time.Second) // redeliveries meanwhile
	srv.Start()
	rowsAtReturn := h.rowCount()
	coretest.Eventually(t, 30*time.Second, "ingestion to resume with the spool's disk still full", func() bool {
		return h.eng.breaker.Allow() && h.rowCount() > rowsAtReturn+1000
	})
	if h.eng.spool.Empty() {
		t.Error("the spool drained on a full disk; the test did not hold the fault")
	}
	resize("64m")
	time.Sleep(time.Second)
	sent, valid, _ := l.end()

	coretest.Eventually(t, 60*time.Second, "the spool to drain", func() bool { return h.eng.spool.Empty() })
	h.drained(60 * time.Second)
	if got := h.rowCount(); got != valid {
		t.Errorf("rows = %d, want exactly %d (%d messages of 5 readings)", got, valid, sent)
	}
	if n := h.dlqLen(); n != 0 {
		t.Errorf("dead letters after a full spool disk: %d, want none; first: %v", n, h.dlq()[0].Values["reason"])
	}
	t.Logf("spool disk full while PostgreSQL was down: %d messages, %d of %d rows, %d dead letters, %s in all",
		sent, h.rowCount(), valid, h.dlqLen(), time.Since(t0).Round(time.Second))
}
