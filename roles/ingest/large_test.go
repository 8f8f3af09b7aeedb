package ingest

import (
	"testing"
	"time"
)

// TestLargeMessageIntegration: a 60,000-reading message, valid and within
// what the API accepts (4 MiB payloads), is written like any other. Its
// entry is over 1 MiB, the limit ingest once had, which dead-lettered it.
func TestLargeMessageIntegration(t *testing.T) {
	forEachPair(t, func(t *testing.T, h *harness) {
		const readings = 60000
		data := h.message("big", readings, time.Now().UTC().Truncate(time.Millisecond), 1)
		if len(data) <= 1<<20 {
			t.Fatalf("entry of %d bytes does not exceed the old 1 MiB limit", len(data))
		}
		h.add(data)
		// One entry of 60,000 rows, where a batch usually has a few
		// thousand: on a loaded test machine under -race, SQLite (a Go
		// library, instrumented too) took over a minute for it.
		h.every.processTO = 4 * time.Minute
		h.start()
		h.drained(4 * time.Minute)
		if n := h.dlqLen(); n != 0 {
			t.Fatalf("dead letters = %d (%v), want none", n, h.dlq()[0].Values["reason"])
		}
		if got := h.rowCount(); got != readings {
			t.Errorf("rows = %d, want %d", got, readings)
		}
		t.Logf("entry of %d bytes: %d rows", len(data), readings)
		h.stop()
	})
}
