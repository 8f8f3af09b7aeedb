package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

// TestClaimLostInRedisKillFaultIntegration kills a private Redis (AOF,
// everysec) between ProduceBatch's two round trips, so the claims of the
// first come back with the server while their transactions never ran.
// Once Redis is back, the same messages must append at once: each refusal
// with ErrCopyInFlight, for the claims' 30 s, used to cost the Cloud API
// an MQTT reconnect.
func TestClaimLostInRedisKillFaultIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("fault test needs redis-server; -short given")
	}
	tests := []struct {
		name string
		req  streamstore.ProduceRequest
	}{
		{"key mark", streamstore.ProduceRequest{DedupKey: "t:a:msgid:1"}},
		{"bit mark", streamstore.ProduceRequest{DedupKey: "t:a:seq:k:0", DedupBitmap: true, DedupBit: 7}},
	}
	srv := coretest.PrivateRedisWith(t, coretest.RedisOptions{AppendFsync: "everysec"})
	st, err := New(Options{Addrs: []string{srv.Addr()}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req := tc.req
			req.Stream = "claims-test-" + string(rune('a'+i))
			req.Entries = []map[string]string{{"data": "x"}}
			req.DedupTTL = time.Minute
			st.afterClaims = func() { srv.Kill() }
			if _, err := st.Produce(ctx, req); err == nil {
				t.Fatal("produce succeeded with Redis killed between its round trips")
			}
			st.afterClaims = nil
			srv.Start()
			if n, err := st.client.Exists(ctx, claimKey(req)).Result(); err != nil || n != 1 {
				t.Fatalf("claim after the restart: exists=%d, %v; the test needs it back from the AOF", n, err)
			}
			res, err := st.Produce(ctx, req)
			if errors.Is(err, streamstore.ErrCopyInFlight) {
				t.Fatalf("the message's own lost claim still refuses it: %v", err)
			}
			if err != nil || len(res.IDs) != 1 || res.Duplicate {
				t.Fatalf("produce after the restart = %+v, %v; want one entry appended", res, err)
			}
			if n, _ := st.client.XLen(ctx, req.Stream).Result(); n != 1 {
				t.Errorf("stream has %d entries, want 1", n)
			}
		})
	}
}

// TestReleaseKeepsAnotherProducersClaim: a lost claim that expired and was
// taken by another producer since is that producer's, and stays.
func TestReleaseKeepsAnotherProducersClaimIntegration(t *testing.T) {
	st := newStore(t, Options{})
	other := newStore(t, Options{})
	ctx := context.Background()
	key := "claims-test:" + t.Name() + ":" + other.claims.token() + ":claim"
	defer st.client.Del(ctx, key)
	if err := other.client.Set(ctx, key, other.claims.token(), time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	st.claims.lost([]orphan{{key: key, token: st.claims.token(), at: time.Now()}})
	st.releaseOrphans(ctx)
	if n, _ := st.client.Exists(ctx, key).Result(); n != 1 {
		t.Fatal("releasing a lost claim deleted another producer's claim on the same key")
	}
	if left := st.claims.take(time.Now()); len(left) != 0 {
		t.Errorf("a release Redis answered is kept for retry: %v", left)
	}
}

func TestClaimsTakeDropsExpired(t *testing.T) {
	c := newClaims()
	now := time.Now()
	c.lost([]orphan{{key: "old", at: now.Add(-claimTTL - time.Second)}, {key: "new", at: now}})
	got := c.take(now)
	if len(got) != 1 || got[0].key != "new" {
		t.Fatalf("take = %v, want only the claim younger than claimTTL", got)
	}
	if again := c.take(now); len(again) != 0 {
		t.Errorf("take left %v behind", again)
	}
	if a, b := c.token(), c.token(); a == b {
		t.Errorf("two claims got the same token %q", a)
	}
}
