package api

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/mqttx"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestCopyInFlightIntegration: a message whose copy another API replica is
// appending at that instant (its claim is held) is spooled without counting
// against the write-path breaker, nothing is appended for it, and the
// spool's replay appends it once the claim is gone; the broker's next
// copy is then a duplicate.
func TestCopyInFlightIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	store, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	tenant, agent := randomID(t), randomID(t)
	stream := telemetry.IngestionStream(tenant)
	// More copies than the breaker needs to judge the store (5 outcomes).
	const n = 8
	var msgs []mqttx.Message
	var claims []string
	pipe, r := spooledPipeline(t, store)
	if err := pipe.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer pipe.Stop(ctx)
	for seq := 1; seq <= n; seq++ {
		raw, err := codec.Encode(envelopeFor(seq, 21.5), codec.EncodeOptions{Format: codec.FormatMsgpackDeflate})
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, mqttx.Message{Topic: "i/" + tenant + "/a/" + agent + "/endpoints/modbus", Payload: raw, QoS: 1})
		mark := "tenant:" + tenant + ":agent:" + agent + ":msgid:v2_Ab12Cd34_" + strconv.Itoa(seq)
		claims = append(claims, mark+":claim")
		defer store.Delete(ctx, mark)
	}
	defer store.Delete(ctx, append(claims, stream)...)

	// Another replica holds the messages' claims.
	for _, c := range claims {
		if ok, err := store.SetNX(ctx, c, "1", time.Minute); !ok || err != nil {
			t.Fatalf("claim: %v %v", ok, err)
		}
	}
	for i, err := range pipe.handleBatch(ctx, msgs) {
		if err != nil {
			t.Fatalf("message %d: handleBatch = %v, want it spooled", i+1, err)
		}
	}
	if got := counter(t, r, "edgeplat_api_telemetry_spooled_total"); got != n {
		t.Errorf("spooled = %v, want %d", got, n)
	}
	if !pipe.breaker.Allow() {
		t.Error("copies in flight opened the write-path breaker")
	}
	if n, _ := store.Len(ctx, stream); n != 0 {
		t.Fatalf("stream holds %d entries while the claims are held elsewhere", n)
	}
	// While the claims are held the replay leaves the lines in the spool.
	pipe.recover(ctx)
	if n, _ := store.Len(ctx, stream); n != 0 || pipe.spool.Empty() {
		t.Fatalf("replay with the claims held: %d entries, spool empty %v", n, pipe.spool.Empty())
	}

	// The other replica went away without appending: its claims end.
	if _, err := store.Delete(ctx, claims...); err != nil {
		t.Fatal(err)
	}
	pipe.recover(ctx)
	if got, _ := store.Len(ctx, stream); got != 2*n { // one entry per device
		t.Fatalf("after the replay the stream holds %d entries, want %d", got, 2*n)
	}
	if got := counter(t, r, "edgeplat_api_telemetry_replayed_total"); got != n {
		t.Errorf("replayed = %v, want %d", got, n)
	}
	if errs := pipe.handleBatch(ctx, msgs[:1]); errs[0] != nil {
		t.Fatal(errs[0])
	}
	if got := counter(t, r, "edgeplat_api_telemetry_duplicates_total"); got != 1 {
		t.Errorf("duplicates = %v after the broker's next copy, want 1", got)
	}
	if got, _ := store.Len(ctx, stream); got != 2*n {
		t.Errorf("stream holds %d entries after a duplicate, want %d", got, 2*n)
	}
}
