package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/agent/store"
)

// TestCorruptStoreIsReportedUnhealthy (issue 16 item 11): an agent whose
// store was damaged starts with the store moved aside and salvaged, and
// says so in /v1/healthy, /health and the health report instead of
// starting healthy.
func TestCorruptStoreIsReportedUnhealthy(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	q, err := st.OfflineQueue(store.DefaultQueueOptions())
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2000 {
		body := fmt.Appendf(nil, "%06d%0300d", i, 0)
		if _, err := q.Enqueue(ctx, 7, store.Record{MsgID: fmt.Sprint(i), Topic: "t", Payload: body}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, store.FileName)
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	noise := make([]byte, 16<<10)
	for i := range noise {
		noise[i] = byte(i*131 + i/7)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(noise, fi.Size()/2/4096*4096); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	r := startAgent(t, dir, true, nil)
	for _, p := range []string{"/v1/healthy", "/health"} {
		code, body := r.do("GET", p, "", nil)
		m := decode(t, body)
		subs, _ := m["unhealthySubsystems"].([]any)
		if code != 500 || m["status"] != "unhealthy" || !slices.Contains(subs, any("store")) {
			t.Fatalf("GET %s = %d %s, want 500 unhealthy with the store", p, code, body)
		}
	}
	code, body := r.do("GET", "/v1/health/report", "", nil)
	if code != 200 || !strings.Contains(body, "store was corrupt") || !strings.Contains(body, store.FileName+".corrupt-") {
		t.Fatalf("health report %d %s, want the store's corruption and its copy", code, body)
	}
	if copies := store.CorruptCopies(dir); len(copies) != 1 {
		t.Fatalf("corrupt copies %v, want one", copies)
	}
}

// TestStoreCorruptionWhileRunningReopensTheStore: the store's corruption
// handler soft-reboots the agent, so the store is opened again (and, if
// damaged, moved aside and salvaged) instead of failing every flush.
func TestStoreCorruptionWhileRunningReopensTheStore(t *testing.T) {
	r := startAgent(t, t.TempDir(), true, nil)
	before := r.agent.p.st.Load()
	r.agent.storeCorrupt("corrupt: test")
	eventually(t, 15*time.Second, "the store reopened", func() bool {
		s := r.agent.p.st.Load()
		state, _ := r.agent.snapshot()
		return s != nil && s != before && state == StateRunning
	})
}
