package api

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/spool"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
)

// TestFullSpoolTripsBreakerOnlyForStoreFailures: with the spool's disk
// full, a message the store failed to take opens the breaker (direct writes
// wait for the spool to drain), but a refusal of one message (a copy in
// flight, one tenant's full stream) leaves it closed, so every other
// tenant's messages still go direct.
func TestFullSpoolTripsBreakerOnlyForStoreFailures(t *testing.T) {
	for _, tt := range []struct {
		name  string
		cause error
		trips bool
	}{
		{"store failure", errors.New("dial tcp 127.0.0.1:6379: connect: connection refused"), true},
		{"copy in flight", streamstore.ErrCopyInFlight, false},
		{"stream full", streamstore.ErrStreamFull, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fs := coretest.SmallFS(t, 256<<10)
			store, err := memory.New(memory.Options{})
			if err != nil {
				t.Fatal(err)
			}
			pipe := newTestPipeline(t, store)
			sp, err := spool.Open(spool.Options{Dir: filepath.Join(fs, "spool"), MaxBytes: 1 << 20})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sp.Close() })
			pipe.spool = sp
			coretest.FillFS(t, fs)
			if err := pipe.spoolBatch("i/t/a/a/endpoints/e", envelope.Batch{}, tt.cause); !spool.IsNoSpace(err) {
				t.Fatalf("spoolBatch on a full disk: %v, want a no-space error", err)
			}
			if open := !pipe.breaker.Allow(); open != tt.trips {
				t.Fatalf("breaker open %v, want %v", open, tt.trips)
			}
		})
	}
}
