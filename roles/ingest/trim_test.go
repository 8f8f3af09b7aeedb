package ingest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestNoUnacknowledgedEntryIsTrimmedIntegration: with the workers stopped,
// producers keep adding until the stream is at its max length and then get
// ErrStreamFull; nothing unacknowledged is trimmed meanwhile, and once the
// workers are back every accepted message becomes rows.
func TestNoUnacknowledgedEntryIsTrimmedIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		ctx := context.Background()
		const maxLen = 120
		h.cfg.StreamStore.IngestionStreamMaxLen = maxLen
		base := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
		accepted := 0
		add := func(i int) error {
			_, err := h.store.Add(ctx, h.stream(), map[string]string{telemetry.StreamField: h.message("d", 2, base.Add(time.Duration(i)*time.Millisecond), 1)}, maxLen)
			if err == nil {
				accepted++
			}
			return err
		}
		h.start()
		for i := range 50 {
			if err := add(i); err != nil {
				t.Fatal(err)
			}
		}
		h.drained(30 * time.Second)
		// Let maintenance trim what was acknowledged.
		time.Sleep(3 * testIntervals.maintain)
		h.stop()

		full := false
		for i := 50; i < 1000; i++ {
			err := add(i)
			if errors.Is(err, streamstore.ErrStreamFull) {
				full = true
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !full {
			t.Fatal("the stream never reported full")
		}
		// Unacknowledged entries are all still there.
		entries, err := h.store.Range(ctx, h.stream(), "-", "+", 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) > maxLen {
			t.Errorf("stream holds %d entries, over its max length %d", len(entries), maxLen)
		}
		h.start()
		h.drained(30 * time.Second)
		h.stop()
		if got, want := h.rowCount(), int64(accepted*2); got != want {
			t.Errorf("rows = %d, want %d (every accepted message)", got, want)
		}
		if n, _ := h.store.Len(ctx, h.stream()); n > maxLen {
			t.Errorf("stream length %d after draining", n)
		}
	})
}
