package ingest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestRedisClusterIntegration runs ingestion's end-to-end path on a
// 3-master Redis Cluster started for it: messages appended the Cloud
// API's way (ProduceBatch with msgId marks, a repeat among them), found
// through the registry, written and acknowledged by the workers, garbage
// dead-lettered, the stream trimmed. The tenant's stream, DLQ and marks
// are on one slot under tagged names.
func TestRedisClusterIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	cluster := coretest.StartRedisCluster(t, 3)
	dbc := coretest.Postgres(t)
	store, err := redisstore.New(redisstore.Options{Addrs: cluster.Addrs()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, dbc, store)
	ctx := context.Background()

	const n, readings = 200, 5
	base := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	scope := "tenant:" + h.tenant + ":agent:" + h.agent
	var reqs []streamstore.ProduceRequest
	for i := range n {
		reqs = append(reqs, streamstore.ProduceRequest{
			DedupKey: fmt.Sprintf("%s:msgid:v2_k_%d", scope, i), DedupTTL: time.Hour,
			Stream: h.stream(), MaxLen: 10_000,
			Entries: []map[string]string{{telemetry.StreamField: h.message(fmt.Sprintf("dev%d", i%4), readings, base.Add(time.Duration(i)*time.Second), float64(i))}},
		})
	}
	reqs = append(reqs, reqs[7]) // a redelivery
	reqs = append(reqs, streamstore.ProduceRequest{Stream: h.stream(), Entries: []map[string]string{{telemetry.StreamField: "{not json"}}})
	h.start()
	for from := 0; from < len(reqs); from += 50 {
		chunk := reqs[from:min(from+50, len(reqs))]
		results, errs := store.ProduceBatch(ctx, chunk)
		for i, err := range errs {
			if err != nil {
				t.Fatalf("ProduceBatch: request %d: %v", from+i, err)
			}
			if want := from+i == n; results[i].Duplicate != want {
				t.Errorf("request %d: duplicate %v, want %v", from+i, results[i].Duplicate, want)
			}
		}
	}
	h.drained(60 * time.Second)
	coretest.Eventually(t, 30*time.Second, "the dead letter", func() bool { return len(h.dlq()) == 1 })
	coretest.Eventually(t, 30*time.Second, "the stream trimmed", func() bool {
		l, err := store.Len(ctx, h.stream())
		return err == nil && l == 0
	})
	h.stop()
	if got, want := h.rowCount(), int64(n*readings); got != want {
		t.Errorf("rows = %d, want exactly %d", got, want)
	}

	addr := cluster.Addrs()[0]
	tagged := func(name string) string {
		return strings.Replace(name, "tenant:"+h.tenant+":", "tenant:{"+h.tenant+"}:", 1)
	}
	slot := cluster.CLI(t, addr, "cluster", "keyslot", tagged(h.stream()))
	for _, name := range []string{h.stream(), telemetry.DLQStream(h.tenant), reqs[0].DedupKey} {
		if got := cluster.CLI(t, addr, "-c", "exists", tagged(name)); got != "1" {
			t.Errorf("EXISTS %s = %s, want the tagged key", tagged(name), got)
		}
		if got := cluster.CLI(t, addr, "cluster", "keyslot", tagged(name)); got != slot {
			t.Errorf("%s on slot %s, the stream on %s", tagged(name), got, slot)
		}
	}
}
