//go:build linux

package ingest

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestSpoolDiskFullFault runs ingest with its spool on a 512 KiB tmpfs and
// stops PostgreSQL under 200 msg/s until the spool's disk is full. When
// PostgreSQL is back, with the disk still full, ingestion resumes (the
// breaker closes although the spool cannot drain); when space returns, the
// spool drains and the rows are exact, with nothing dead-lettered. Before,
// the breaker waited for an empty spool, so ingestion stopped for good.
func TestSpoolDiskFullFault(t *testing.T) {
	srv := coretest.PrivatePostgres(t)
	h := faultHarness(t, srv.Config())
	dir := coretest.SmallFS(t, 512<<10)
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
	coretest.ResizeFS(t, dir, 64<<20)
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
