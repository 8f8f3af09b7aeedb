package redis

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/storetest"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// TestClusterIntegration runs on one 3-master Redis Cluster started for
// it: the contract suite, then what is particular to Cluster.
func TestClusterIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test needs redis-server; skipped in -short mode")
	}
	start := time.Now()
	cluster := coretest.StartRedisCluster(t, 3)
	t.Logf("3-master cluster up in %s", time.Since(start).Round(time.Millisecond))
	newClusterStore := func(t *testing.T) *Store {
		st, err := New(Options{Addrs: cluster.Addrs(), BlockSlice: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}
	t.Run("Contract", func(t *testing.T) {
		start := time.Now()
		storetest.Run(t, func(t *testing.T) streamstore.Store { return newClusterStore(t) })
		t.Cleanup(func() { t.Logf("contract suite on the cluster: %s", time.Since(start).Round(time.Millisecond)) })
	})
	t.Run("TenantKeys", func(t *testing.T) { testClusterTenantKeys(t, newClusterStore(t)) })
	t.Run("ProduceBatch", func(t *testing.T) { testClusterProduceBatch(t, newClusterStore(t)) })
	t.Run("XInfoRouting", func(t *testing.T) { testClusterXInfoRouting(t, newClusterStore(t)) })
}

// testClusterTenantKeys: a tenant's stream, DLQ and marks are written
// with the tenant's id as hash tag, on one slot, and never under the
// plain names; a repeat is a duplicate (simultaneous copies are the
// suite's ProduceConcurrentDuplicates, whose keys share a tag the same
// way); discovery and Delete speak the plain names.
func testClusterTenantKeys(t *testing.T, st *Store) {
	ctx := t.Context()
	tenant := "T" + strings.ReplaceAll(uniqueName(t), "/", "_")
	agent := "agent-1"
	stream, dlq := telemetry.IngestionStream(tenant), telemetry.DLQStream(tenant)
	mark := "tenant:" + tenant + ":agent:" + agent + ":msgid:v2_k_1"
	bitmap := "tenant:" + tenant + ":agent:" + agent + ":seq:k:0"
	t.Cleanup(func() { _, _ = st.Delete(context.Background(), stream, dlq, mark, bitmap) })

	for _, req := range []streamstore.ProduceRequest{
		{DedupKey: mark, DedupTTL: time.Hour, Stream: stream, Entries: []map[string]string{{"data": "k"}}},
		{DedupKey: bitmap, DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 77, Stream: stream, Entries: []map[string]string{{"data": "b"}}},
	} {
		if res, err := st.Produce(ctx, req); err != nil || len(res.IDs) != 1 {
			t.Errorf("%s: Produce = %+v, %v; want appended", req.DedupKey, res, err)
		}
		if res, err := st.Produce(ctx, req); err != nil || !res.Duplicate {
			t.Errorf("%s: Produce again = %+v, %v; want a duplicate", req.DedupKey, res, err)
		}
	}
	if _, err := st.AddBatch(ctx, dlq, []map[string]string{{"reason": "r"}}, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureGroup(ctx, stream, telemetry.WriterGroup(tenant), "0"); err != nil {
		t.Fatal(err)
	}

	raw := st.client.(*goredis.ClusterClient)
	wantSlot := int64(-1)
	for _, name := range []string{stream, dlq, mark, bitmap} {
		key := strings.Replace(name, "tenant:"+tenant+":", "tenant:{"+tenant+"}:", 1)
		if n, err := raw.Exists(ctx, key).Result(); err != nil || n != 1 {
			t.Errorf("%s: EXISTS %s = %d, %v; want the tagged key", name, key, n, err)
		}
		if n, err := raw.Exists(ctx, name).Result(); err != nil || n != 0 {
			t.Errorf("%s: the plain name exists too (%d, %v)", name, n, err)
		}
		slot, err := raw.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if wantSlot < 0 {
			wantSlot = slot
		} else if slot != wantSlot {
			t.Errorf("%s is on slot %d, the stream on %d", key, slot, wantSlot)
		}
	}
	if n, err := st.Len(ctx, stream); err != nil || n != 2 {
		t.Errorf("Len = %d, %v; want the 2 messages", n, err)
	}

	// The registry holds the plain names, in the tenant's shard.
	if got, err := st.Streams(ctx, "tenant:"+tenant+":*"); err != nil || !slices.Equal(got, []string{dlq, stream}) {
		t.Errorf("Streams = %v, %v; want %v", got, err, []string{dlq, stream})
	}
	if got, err := st.Streams(ctx, telemetry.IngestionStreamPattern); err != nil || !slices.Contains(got, stream) {
		t.Errorf("Streams(%s) = %v, %v; want it to hold %s", telemetry.IngestionStreamPattern, got, err, stream)
	}
	shard := st.registryOf(stream)
	if ok, err := raw.SIsMember(ctx, shard, stream).Result(); err != nil || !ok {
		t.Errorf("%s is not in its registry set %s (%v)", stream, shard, err)
	}
	if n, err := st.Delete(ctx, stream, dlq); err != nil || n != 2 {
		t.Errorf("Delete = %d, %v; want 2", n, err)
	}
	if ok, _ := raw.SIsMember(ctx, shard, stream).Result(); ok {
		t.Errorf("%s stays in the registry after Delete", stream)
	}
	if got, err := st.Streams(ctx, "tenant:"+tenant+":*"); err != nil || len(got) != 0 {
		t.Errorf("after Delete, Streams = %v, %v", got, err)
	}
}

// testClusterProduceBatch: a batch mixing requests whose keys share a
// hash tag (one transaction each, on their master) with requests whose
// keys do not (steps) gives every outcome as on one server, and the
// first kind spread over the masters.
func testClusterProduceBatch(t *testing.T, st *Store) {
	ctx := t.Context()
	var reqs []streamstore.ProduceRequest
	var want, cleanup []string
	plain := uniqueName(t) // no hash tag: mark and stream on two slots
	r, w := testBatch(plain)
	reqs, want = append(reqs, r...), append(want, w...)
	cleanup = append(cleanup, plain+":ingest", plain+":msgid", plain+":seq")
	for i := range 6 {
		tenant := "tenant:T" + strconv.Itoa(i) + "-" + strings.ReplaceAll(uniqueName(t), "/", "_")
		r, w := testBatch(tenant)
		reqs, want = append(reqs, r...), append(want, w...)
		cleanup = append(cleanup, tenant+":ingest", tenant+":msgid", tenant+":seq")
	}
	t.Cleanup(func() { _, _ = st.Delete(context.Background(), cleanup...) })
	results, errs := st.ProduceBatch(ctx, reqs)
	checkBatch(t, "ProduceBatch on Cluster", want, results, errs)

	raw := st.client.(*goredis.ClusterClient)
	masters := map[string]bool{}
	for _, name := range cleanup {
		if !strings.HasPrefix(name, "tenant:") || !strings.HasSuffix(name, ":ingest") {
			continue
		}
		if n, err := st.Len(ctx, name); err != nil || n != 3 {
			t.Errorf("Len(%s) = %d, %v; want 3", name, n, err)
		}
		m, err := raw.MasterForKey(ctx, st.wireKey(name))
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	t.Logf("6 tenants' transactions ran on %d masters", len(masters))
	if claims, err := clusterKeys(ctx, raw, "*:claim*"); err != nil || len(claims) != 0 {
		t.Errorf("claims left after the batch: %v, %v", claims, err)
	}
}

// testClusterXInfoRouting: XINFO GROUPS goes to the stream's master, not
// to the slot of the word "groups"; Redis counts a redirected command as
// rejected.
func testClusterXInfoRouting(t *testing.T, st *Store) {
	ctx := t.Context()
	raw := st.client.(*goredis.ClusterClient)
	before, err := xinfoRejected(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		stream := telemetry.IngestionStream("T" + strconv.Itoa(i) + "-" + strings.ReplaceAll(uniqueName(t), "/", "_"))
		t.Cleanup(func() { _, _ = st.Delete(context.Background(), stream) })
		if err := st.EnsureGroup(ctx, stream, "g", "0"); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Group(ctx, stream, "g"); err != nil {
			t.Errorf("Group: %v", err)
		}
		if _, err := st.SafeTrimID(ctx, stream, "g"); err != nil {
			t.Errorf("SafeTrimID: %v", err)
		}
	}
	after, err := xinfoRejected(ctx, raw)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Errorf("%d XINFO calls were redirected", after-before)
	}
}

// xinfoRejected sums the masters' rejected XINFO calls (INFO
// commandstats), redirections included.
func xinfoRejected(ctx context.Context, c *goredis.ClusterClient) (int64, error) {
	var mu sync.Mutex
	var total int64
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for line := range strings.Lines(info) {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_xinfo|groups:")
			if !ok {
				continue
			}
			for field := range strings.SplitSeq(rest, ",") {
				if v, ok := strings.CutPrefix(field, "rejected_calls="); ok {
					n, _ := strconv.ParseInt(v, 10, 64)
					mu.Lock()
					total += n
					mu.Unlock()
				}
			}
		}
		return nil
	})
	return total, err
}

// clusterKeys lists the keys matching pattern on every master.
func clusterKeys(ctx context.Context, c *goredis.ClusterClient, pattern string) ([]string, error) {
	var mu sync.Mutex
	var keys []string
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
		found, err := m.Keys(ctx, pattern).Result()
		mu.Lock()
		keys = append(keys, found...)
		mu.Unlock()
		return err
	})
	return keys, err
}

// TestSingleServerKeepsNamesIntegration: an installation upgraded on one
// Redis server finds what the release before wrote under the plain names
// (no hash tags), and carries on under them: pending entries, consumer
// group, marks and registry. Nothing is renamed or copied.
func TestSingleServerKeepsNamesIntegration(t *testing.T) {
	st := newPrivateStore(t)
	ctx := t.Context()
	raw := st.client
	tenant := "AAAAAAAAAAAAAAAAAAAAAA"
	stream, group := telemetry.IngestionStream(tenant), telemetry.WriterGroup(tenant)
	mark := "tenant:" + tenant + ":agent:a:msgid:v2_k_1"
	// What the release before left: two entries, one delivered and not
	// acknowledged, the message's mark and the registry.
	for _, d := range []string{"one", "two"} {
		if err := raw.XAdd(ctx, &goredis.XAddArgs{Stream: stream, Values: []string{"data", d}}).Err(); err != nil {
			t.Fatal(err)
		}
	}
	raw.XGroupCreate(ctx, stream, group, "0")
	old, err := raw.XReadGroup(ctx, &goredis.XReadGroupArgs{Group: group, Consumer: "old-worker", Streams: []string{stream, ">"}, Count: 1}).Result()
	if err != nil {
		t.Fatal(err)
	}
	raw.Set(ctx, mark, "1", time.Hour)
	raw.SAdd(ctx, registryKey, stream)
	raw.Set(ctx, adoptedKey, "1", 0)

	if got, err := st.Streams(ctx, telemetry.IngestionStreamPattern); err != nil || !slices.Equal(got, []string{stream}) {
		t.Errorf("Streams = %v, %v; want the old stream", got, err)
	}
	if res, err := st.Produce(ctx, streamstore.ProduceRequest{DedupKey: mark, DedupTTL: time.Hour, Stream: stream,
		Entries: []map[string]string{{"data": "one again"}}}); err != nil || !res.Duplicate {
		t.Errorf("a repeat of a message marked before the upgrade = %+v, %v; want a duplicate", res, err)
	}
	if _, err := st.Produce(ctx, streamstore.ProduceRequest{DedupKey: mark + "2", DedupTTL: time.Hour, Stream: stream,
		Entries: []map[string]string{{"data": "three"}}}); err != nil {
		t.Fatal(err)
	}
	got, err := st.ReadGroup(ctx, stream, group, "new-worker", 10, 0)
	if err != nil || len(got) != 2 || got[0].Values["data"] != "two" || got[1].Values["data"] != "three" {
		t.Errorf("ReadGroup after the upgrade = %v, %v; want two, three", got, err)
	}
	claimed, _, err := st.AutoClaim(ctx, stream, group, "new-worker", 0, "0-0", 10)
	if err != nil || len(claimed) == 0 || claimed[0].ID != old[0].Messages[0].ID {
		t.Errorf("AutoClaim = %v, %v; want the entry the old worker left pending", claimed, err)
	}
	if keys, err := raw.Keys(ctx, "*{*").Result(); err != nil || len(keys) != 0 {
		t.Errorf("keys with hash tags on a single server: %v, %v", keys, err)
	}
	if n, err := raw.XLen(ctx, stream).Result(); err != nil || n != 3 {
		t.Errorf("XLEN %s = %d, %v; want 3: the new entry went elsewhere", stream, n, err)
	}
}

func TestClusterKeyNames(t *testing.T) {
	tests := []struct{ name, key, tag string }{
		{"tenant:abc:agent:devices:ingestion", "tenant:{abc}:agent:devices:ingestion", "abc"},
		{"tenant:abc:agent:x:msgid:v2_k_1:claim", "tenant:{abc}:agent:x:msgid:v2_k_1:claim", "abc"},
		{"tenant:{abc}:agent:logs", "tenant:{abc}:agent:logs", "abc"}, // tagged already
		{"tenant:a{b}c:x", "tenant:a{b}c:x", "b"},                     // Redis's tag
		{"tenant::x", "tenant::x", "tenant::x"},                       // no id
		{"tenant:abc", "tenant:abc", "tenant:abc"},                    // nothing after the id
		{"edgeplat:streams:{3}", "edgeplat:streams:{3}", "3"},
		{"{storetest-x}:s", "{storetest-x}:s", "storetest-x"},
		{"other:abc:x", "other:abc:x", "other:abc:x"},
	}
	for _, tt := range tests {
		key := clusterKey(tt.name)
		if key != tt.key || hashTag(key) != tt.tag {
			t.Errorf("clusterKey(%q) = %q with tag %q, want %q with tag %q", tt.name, key, hashTag(key), tt.key, tt.tag)
		}
		if back := clusterKey(nameOfKey(key)); back != key {
			t.Errorf("%q: back from its name %q is %q", key, nameOfKey(key), back)
		}
	}
	if got := nameOfKey("tenant:{abc}:agent:logs"); got != "tenant:abc:agent:logs" {
		t.Errorf("nameOfKey = %q", got)
	}
	single, _ := New(Options{Addrs: []string{"a:1"}})
	cluster, _ := New(Options{Addrs: []string{"a:1", "b:1"}})
	defer single.Close()
	defer cluster.Close()
	if k := single.wireKey("tenant:abc:x"); k != "tenant:abc:x" {
		t.Errorf("single server: wireKey = %q, want the name unchanged", k)
	}
	if r := single.registries(); !slices.Equal(r, []string{"edgeplat:streams"}) {
		t.Errorf("single server: registries = %v", r)
	}
	if a, b := cluster.registryOf("tenant:abc:agent:devices:ingestion"), cluster.registryOf("tenant:{abc}:agent:devices:dlq"); a != b {
		t.Errorf("one tenant's streams in two registry sets: %s, %s", a, b)
	}
	shards := map[string]bool{}
	for i := range 200 {
		shards[cluster.registryOf(telemetry.IngestionStream("tenant"+strconv.Itoa(i)))] = true
	}
	if len(shards) != registryShards {
		t.Errorf("200 tenants used %d of %d registry sets", len(shards), registryShards)
	}
}

// FuzzClusterKey: whatever a caller names a key, the name the registry
// gives back for it names the same key.
func FuzzClusterKey(f *testing.F) {
	for _, s := range []string{"tenant:abc:x", "tenant:{abc}:x", "tenant:{}:x", "tenant:a}:x", "tenant:{a:b}:x", "x{y}z", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		key := clusterKey(name)
		if back := clusterKey(nameOfKey(key)); back != key {
			t.Errorf("%q is key %q, named %q, which is key %q", name, key, nameOfKey(key), back)
		}
		if hashTag(clusterKey(name)) != hashTag(clusterKey(nameOfKey(key))) {
			t.Errorf("%q: name and key hash differently", name)
		}
	})
}

func BenchmarkProduceBatchCluster(b *testing.B) {
	if testing.Short() {
		b.Skip("needs redis-server")
	}
	cluster := coretest.StartRedisCluster(b, 3)
	st, err := New(Options{Addrs: cluster.Addrs()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	storetest.BenchProduceBatch(b, st)
}
