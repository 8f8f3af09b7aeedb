package api

import (
	"context"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestFullStreamBackPressureIntegration: without a spool, on the real
// Mosquitto and Redis, a stream far shorter than the traffic (room for five
// messages) that a consumer drains every 100 ms. Every message lands exactly
// once, the subscriber holds the refused ones rather than leave them
// unacknowledged, and no reconnect is needed to get them redelivered.
func TestFullStreamBackPressureIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	brokerAddr := coretest.MQTTAddr(t)
	store, rdb := redisTestStore(t)
	ctx := context.Background()
	tenant, agent := randomID(t), randomID(t)
	stream := telemetry.IngestionStream(tenant)
	defer store.Delete(ctx, stream)
	defer deleteMatching(t, rdb, "tenant:"+tenant+":agent:*")

	t.Setenv("STREAMSTORE_INGESTION_STREAM_MAXLEN", "10") // two entries a message
	pipe := newTestPipeline(t, store)
	pipe.spoolOp = nil // whatever the environment says: this is the path without one
	r := pipe.rt
	_, stopSubscriber := runSubscriber(t, pipe, r, brokerAddr, "backpressure-test-"+agent, "i/"+tenant+"/a/+/endpoints/#")
	defer stopSubscriber()

	// The consumer: what ingest does, reduced to reading and trimming.
	var mu sync.Mutex
	seen := map[string]int{} // msgId/device -> times
	dctx, stopDrain := context.WithCancel(ctx)
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-dctx.Done():
				return
			case <-tick.C:
			}
			entries, err := store.Range(dctx, stream, "-", "+", 1000)
			if err != nil || len(entries) == 0 {
				continue
			}
			mu.Lock()
			for _, en := range entries {
				m, err := telemetry.ParseMessage([]byte(en.Values[telemetry.StreamField]))
				if err != nil {
					t.Errorf("entry %s: %v", en.ID, err)
					continue
				}
				seen[m.MsgID+"/"+m.DeviceName]++
			}
			mu.Unlock()
			last, _ := streamstore.ParseID(entries[len(entries)-1].ID)
			if _, err := store.TrimMinID(dctx, stream, last.Next().String()); err != nil && dctx.Err() == nil {
				t.Errorf("trim: %v", err)
			}
		}
	}()

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	const messages = 60
	topic := "i/" + tenant + "/a/" + agent + "/endpoints/modbus"
	var toks []paho.Token
	for seq := 1; seq <= messages; seq++ {
		raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, pub.Publish(topic, 1, false, raw))
	}
	for _, tok := range toks {
		if !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	coretest.Eventually(t, 30*time.Second, "every message's entries to be consumed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 2*messages
	})
	time.Sleep(300 * time.Millisecond) // let a wrong second copy show up
	stopDrain()
	<-drained

	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2*messages {
		t.Errorf("%d distinct entries consumed, want %d", len(seen), 2*messages)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s consumed %d times", k, n)
		}
	}
	if got := counter(t, r, "edgeplat_api_telemetry_held_retries_total"); got == 0 {
		t.Error("no message was held: the stream never filled, so the test tested nothing")
	}
	if got := counter(t, r, "edgeplat_api_telemetry_unacknowledged_total"); got != 0 {
		t.Errorf("%g messages left unacknowledged; held ones should have got in", got)
	}
	if got := counter(t, r, "edgeplat_mqtt_redelivery_reconnects_total"); got != 0 {
		t.Errorf("%g reconnects for redelivery", got)
	}
}
