package api

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/streamstore"
	memstore "github.com/edgeplat/edgeplat/core/streamstore/memory"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestHoldWhileStreamFull: without a spool, a message a full stream refused
// is retried in place while the stream drains, and acknowledged once it is
// appended; a stream that stays full past the hold leaves the message
// unacknowledged, and with a spool nothing is held: the message is spooled.
func TestHoldWhileStreamFull(t *testing.T) {
	tests := []struct {
		name      string
		spool     bool
		drainIn   time.Duration // 0: the stream stays full
		wantErr   bool
		wantHeld  bool
		wantSpool float64
	}{
		{name: "drained while held", drainIn: 150 * time.Millisecond, wantHeld: true},
		{name: "still full at the deadline", wantErr: true, wantHeld: true},
		{name: "spool instead of hold", spool: true, wantSpool: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store, err := memstore.New(memstore.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer store.Close()
			t.Setenv("STREAMSTORE_INGESTION_STREAM_MAXLEN", "2")
			if tt.spool {
				t.Setenv("DISK_SPOOL_ENABLED", "true")
				t.Setenv("DISK_SPOOL_PATH", t.TempDir())
			}
			pipe := newTestPipeline(t, store)
			pipe.holdFor = 600 * time.Millisecond
			ctx := context.Background()
			if tt.spool {
				if err := pipe.Start(ctx); err != nil {
					t.Fatal(err)
				}
				defer pipe.Stop(ctx)
			}
			tenant, agent := randomID(t), randomID(t)
			stream := telemetry.IngestionStream(tenant)
			var last string
			for range 2 {
				if last, err = store.Add(ctx, stream, map[string]string{"data": "{}"}, 0); err != nil {
					t.Fatal(err)
				}
			}
			if tt.drainIn > 0 {
				// What ingest's maintenance does once rows are committed.
				timer := time.AfterFunc(tt.drainIn, func() {
					id, _ := streamstore.ParseID(last)
					if _, err := store.TrimMinID(context.Background(), stream, id.Next().String()); err != nil {
						t.Error(err)
					}
				})
				defer timer.Stop()
			}
			raw, err := codec.Encode(envelopeFor(1, 42), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Now()
			errs := pipe.handleBatch(ctx, []mqttx.Message{{Topic: "i/" + tenant + "/a/" + agent + "/endpoints/modbus", Payload: raw, QoS: 1}})
			took := time.Since(t0)

			if tt.wantErr != (errs[0] != nil) {
				t.Fatalf("handleBatch error = %v, want error: %v", errs[0], tt.wantErr)
			}
			if tt.wantErr && !errors.Is(errs[0], streamstore.ErrStreamFull) {
				t.Errorf("error %v, want ErrStreamFull", errs[0])
			}
			if held := counterValue(t, pipe.m.held) > 0; held != tt.wantHeld {
				t.Errorf("held retries: %v, want %v", held, tt.wantHeld)
			}
			if tt.wantErr && took < pipe.holdFor/2 {
				t.Errorf("gave up after %s, before the hold (%s) was spent", took, pipe.holdFor)
			}
			if got := counterValue(t, pipe.m.spooled); got != tt.wantSpool {
				t.Errorf("spooled = %v, want %v", got, tt.wantSpool)
			}
			n, err := store.Len(ctx, stream)
			if err != nil {
				t.Fatal(err)
			}
			appended := counterValue(t, pipe.m.appended)
			wantLen := int64(2) // full, nothing appended
			if tt.drainIn > 0 {
				if appended == 0 {
					t.Fatal("the held message was not appended")
				}
				wantLen = int64(appended) // drained, then the held message's entries
			} else if appended != 0 {
				t.Errorf("appended = %v to a full stream", appended)
			}
			if n != wantLen {
				t.Errorf("stream length %d, want %d", n, wantLen)
			}
		})
	}
}
