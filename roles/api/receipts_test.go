package api

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/receipts"
)

// receiptBox is the receipts' Sender: it keeps each decoded receipt by
// agent.
type receiptBox struct {
	mu  sync.Mutex
	got map[codec.UUID][]control.Receipts
}

func (b *receiptBox) Send(_, agent codec.UUID, payload []byte) {
	r, err := control.DecodeReceipts(payload)
	if err != nil {
		panic(err)
	}
	b.mu.Lock()
	b.got[agent] = append(b.got[agent], r)
	b.mu.Unlock()
}

// covered returns the sequences of kid the agent's receipts cover.
func (b *receiptBox) covered(agent codec.UUID, kid string) []control.Range {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []control.Range
	for _, r := range b.got[agent] {
		for _, k := range r.Keys {
			if k.KID != kid {
				continue
			}
			for _, rg := range k.Ranges {
				for s := rg.First; s <= rg.Last; s++ {
					out = control.AddSeq(out, s)
				}
			}
		}
	}
	return out
}

// TestReceiptsIntegration: messages the pipeline appended to the real
// Redis stream, and repeats of those it holds, are receipted to their
// agent; a message the stream does not hold is not.
func TestReceiptsIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	store, rdb := redisTestStore(t)
	ctx := context.Background()
	tenant, agent := randomID(t), randomID(t)
	defer store.Delete(ctx, telemetry.IngestionStream(tenant))
	defer deleteMatching(t, rdb, "tenant:"+tenant+":agent:*")
	_, r, pipe := testAPIPipeline(t, "", store)
	box := &receiptBox{got: map[codec.UUID][]control.Receipts{}}
	tr, err := receipts.New(receipts.Options{Sender: box, Tick: 20 * time.Millisecond, Registerer: r.Metrics})
	if err != nil {
		t.Fatal(err)
	}
	pipe.receipts = tr
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tr.Run(rctx) }()
	defer func() { cancel(); <-done }()

	topic := "i/" + tenant + "/a/" + agent + "/endpoints/modbus"
	msg := func(seq int) mqttx.Message {
		raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpack, Compact: true})
		if err != nil {
			t.Fatal(err)
		}
		return mqttx.Message{Topic: topic, Payload: raw, QoS: 1}
	}
	handle := func(seqs ...int) {
		t.Helper()
		msgs := make([]mqttx.Message, len(seqs))
		for i, s := range seqs {
			msgs[i] = msg(s)
		}
		for i, err := range pipe.handleBatch(ctx, msgs) {
			if err != nil {
				t.Fatalf("message %d: %v", seqs[i], err)
			}
		}
	}
	agentID, err := codec.DecodeID(agent)
	if err != nil {
		t.Fatal(err)
	}
	handle(1, 2, 3, 5)
	want := []control.Range{{First: 1, Last: 3}, {First: 5, Last: 5}}
	coretest.Eventually(t, 5*time.Second, "receipts for 1-3 and 5", func() bool {
		return slices.Equal(box.covered(agentID, "Ab12Cd34"), want)
	})
	if n, _ := store.Len(ctx, telemetry.IngestionStream(tenant)); n != 8 {
		t.Fatalf("stream holds %d entries, want 8", n)
	}
	// A re-sent message (the agent's receipt wait ran out) is a repeat
	// the stream holds: it is receipted again, and not appended.
	box.mu.Lock()
	box.got = map[codec.UUID][]control.Receipts{}
	box.mu.Unlock()
	handle(2, 4)
	coretest.Eventually(t, 5*time.Second, "receipts for 2 and 4", func() bool {
		return slices.Equal(box.covered(agentID, "Ab12Cd34"), []control.Range{{First: 2, Last: 2}, {First: 4, Last: 4}})
	})
	if n, _ := store.Len(ctx, telemetry.IngestionStream(tenant)); n != 10 {
		t.Fatalf("stream holds %d entries, want 10", n)
	}

	// A message the store did not take (the breaker open, no spool: it
	// stays unacknowledged at the broker) is not receipted; the next one
	// that lands is.
	box.mu.Lock()
	box.got = map[codec.UUID][]control.Receipts{}
	box.mu.Unlock()
	pipe.holdFor = 10 * time.Millisecond
	pipe.breaker.Trip()
	if errs := pipe.handleBatch(ctx, []mqttx.Message{msg(9)}); errs[0] == nil {
		t.Fatal("message 9 acknowledged with the breaker open and no spool")
	}
	pipe.breaker.Reset()
	handle(10)
	coretest.Eventually(t, 5*time.Second, "a receipt for 10 only", func() bool {
		return slices.Equal(box.covered(agentID, "Ab12Cd34"), []control.Range{{First: 10, Last: 10}})
	})
	if got := counter(t, r, "edgeplat_api_telemetry_duplicates_total"); got != 1 {
		t.Errorf("duplicates %g, want 1", got)
	}
	if got := counter(t, r, "edgeplat_api_receipts_sent_total"); got != 3 {
		t.Errorf("receipts sent %g, want 3", got)
	}
}

// TestDeliveryReceiptsSetting: api.delivery_receipts on gives the pipeline
// a receipt tracker, run as a service of the role; off, nothing records
// or sends receipts.
func TestDeliveryReceiptsSetting(t *testing.T) {
	for _, on := range []bool{true, false} {
		_, _, pipe, svcs := roleServices(t, dbtest.Migrated(t, "sqlite"), testLicence(t, 0), func(c *config.Config) { c.API.DeliveryReceipts = on })
		trackers := 0
		for _, s := range svcs {
			if _, ok := s.(*receipts.Tracker); ok {
				trackers++
			}
		}
		if on && (trackers != 1 || pipe.receipts == nil) {
			t.Fatalf("receipts on: %d trackers among the services, pipeline recorder %v", trackers, pipe.receipts)
		}
		if !on && (trackers != 0 || pipe.receipts != nil) {
			t.Fatalf("receipts off: %d trackers among the services, pipeline recorder %v", trackers, pipe.receipts)
		}
	}
}
