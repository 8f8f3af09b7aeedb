//go:build linux

package store

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
)

// TestFullTmpfsKeepsQueueAndRecovers (issue 16 item 10) fills a real
// 512 KiB tmpfs under the store, so the failure is the file system's
// ENOSPC through SQLite, WAL included, and then grows it. Mounting needs
// root; elsewhere TestFullDiskKeepsQueueAndRecovers covers the same with
// SQLite's page limit.
func TestFullTmpfsKeepsQueueAndRecovers(t *testing.T) {
	dir := coretest.SmallFS(t, 512<<10)
	ctx := context.Background()
	logs := newLogCapture()
	s, err := Open(ctx, dir, slog.New(logs))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	q, err := s.OfflineQueue(DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	queued := 0
	var fullErr error
	for i := range 100000 {
		if _, err := q.Enqueue(ctx, 1, rec(i)); err != nil {
			fullErr = err
			break
		}
		queued++
	}
	if !IsFull(fullErr) {
		t.Fatalf("after %d records on a 512 KiB tmpfs: %v, want a full-disk error", queued, fullErr)
	}
	t.Logf("%d records queued before the disk filled: %v", queued, fullErr)
	if got := logs.find("agent store disk full"); len(got) != 1 {
		t.Fatalf("%d disk-full log lines, want 1", len(got))
	}
	if c := s.Condition(ctx); c.Healthy || !strings.Contains(c.Reason, "disk full") {
		t.Fatalf("condition %+v, want unhealthy: disk full", c)
	}
	recs, err := q.Ready(ctx, 1, queued+1, time.Now().Add(time.Hour))
	if err != nil || len(recs) != queued {
		t.Fatalf("queue holds %d records (%v), want the %d queued", len(recs), err, queued)
	}

	// Acking may need WAL space too; when it cannot, the worker keeps
	// the ids and acks them later (TestFailedAckIsRetriedNotResent).
	if _, err := q.Ack(ctx, 1, []int64{recs[0].ID}); err != nil && !IsFull(err) {
		t.Fatalf("ack on a full disk: %v, want success or a full-disk error", err)
	} else {
		t.Logf("ack on the full tmpfs: %v", err)
	}
	coretest.ResizeFS(t, dir, 8<<20)
	if c := s.Condition(ctx); !c.Healthy {
		t.Fatalf("condition %+v once the disk grew, want healthy", c)
	}
	if _, err := q.Enqueue(ctx, 1, rec(queued)); err != nil {
		t.Fatalf("enqueue once the disk grew: %v", err)
	}
	if _, err := q.Ack(ctx, 1, []int64{recs[0].ID, recs[1].ID}); err != nil {
		t.Fatalf("ack once the disk grew: %v", err)
	}
}
