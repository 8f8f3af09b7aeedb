package api

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/health"
	"github.com/edgeplat/edgeplat/core/metrics"
	"github.com/edgeplat/edgeplat/core/rt"
	"github.com/edgeplat/edgeplat/core/streamstore"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	"github.com/edgeplat/edgeplat/core/telemetry"
	"github.com/edgeplat/edgeplat/roles/api/envelope"
	dto "github.com/prometheus/client_model/go"
	goredis "github.com/redis/go-redis/v9"
)

func randomID(t *testing.T) string {
	var u codec.UUID
	if _, err := rand.Read(u[:]); err != nil {
		t.Fatal(err)
	}
	return codec.EncodeID(u)
}

func envelopeFor(seq int, value float64) map[string]any {
	return map[string]any{
		"timestamp": "2026-11-22T10:00:00Z", "protocol": "modbus", "msgId": fmt.Sprintf("v2_Ab12Cd34_%d", seq),
		"messages": []any{map[string]any{"readings": []any{
			map[string]any{"deviceName": "plc1", "metric": "temp", "value": value, "unit": "C", "quality": "GOOD"},
			map[string]any{"deviceName": "plc2", "metric": "rpm", "value": 1500, "quality": "GOOD"},
		}}},
	}
}

// TestPipelineIntegration publishes to the real Mosquitto with paho, as an
// agent does, and reads what the pipeline appended to the real Redis, once
// per de-duplication mode: both must drop the same repeats and keep the
// same late replays.
func TestPipelineIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	for _, mode := range []string{config.DedupModeKey, config.DedupModeSequence} {
		t.Run(mode, func(t *testing.T) { testPipeline(t, mode) })
	}
}

func testPipeline(t *testing.T, mode string) {
	brokerAddr := coretest.MQTTAddr(t)
	store, rdb := redisTestStore(t)
	ctx := context.Background()
	tenantA, tenantB, agent := randomID(t), randomID(t), randomID(t)
	defer store.Delete(ctx, telemetry.IngestionStream(tenantA), telemetry.IngestionStream(tenantB))
	scopeA := "tenant:" + tenantA + ":agent:" + agent
	defer deleteMatching(t, rdb, "tenant:"+tenantA+":agent:*", "tenant:"+tenantB+":agent:*")

	cfg, r, pipe := testAPIPipeline(t, mode, store)
	_, stopSubscriber := runSubscriber(t, pipe, r, brokerAddr, "pipeline-test-"+agent,
		"i/"+tenantA+"/a/+/endpoints/#", "i/"+tenantB+"/a/+/endpoints/#", "i/"+tenantA+"/bad/#")
	defer stopSubscriber()

	pub := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + brokerAddr).SetClientID("agent-" + agent))
	if tok := pub.Connect(); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
		t.Fatalf("connect: %v", tok.Error())
	}
	defer pub.Disconnect(100)
	publish := func(topic string, payload []byte) {
		t.Helper()
		if tok := pub.Publish(topic, 1, false, payload); !tok.WaitTimeout(5*time.Second) || tok.Error() != nil {
			t.Fatalf("publish: %v", tok.Error())
		}
	}
	topicA := "i/" + tenantA + "/a/" + agent + "/endpoints/modbus"
	publishSeq := func(seq int) {
		t.Helper()
		raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: codec.FormatJSON})
		if err != nil {
			t.Fatal(err)
		}
		publish(topicA, raw)
	}
	seq := 0
	for _, f := range codec.Formats() {
		for _, compact := range []bool{false, true} {
			seq++
			raw, err := codec.Encode(envelopeFor(seq, float64(seq)), codec.EncodeOptions{Format: f, Compact: compact})
			if err != nil {
				t.Fatal(err)
			}
			publish(topicA, raw)
		}
	}
	dup, _ := codec.Encode(envelopeFor(1, 999), codec.EncodeOptions{Format: codec.FormatJSON})
	publish(topicA, dup)                                                    // tenant A repeats msgId 1: dropped
	publish("i/"+tenantB+"/a/"+agent+"/endpoints/modbus", dup)              // tenant B, same msgId: lands
	publish("i/"+tenantA+"/bad/topic", []byte("x"))                         // malformed topic
	publish(topicA, []byte{0x78, 0x9c, 0xff, 0x00})                         // undecodable
	publish(topicA, []byte(`{"messages":[{"readings":[{"metric":"x"}]}]}`)) // invalid envelope
	publishSeq(65546)                                                       // the next block of 65,536 sequences
	publishSeq(50)                                                          // a late replay from the first block: lands
	publishSeq(65546)                                                       // a repeat in the newer block: dropped
	publishSeq(100)                                                         // after the bad ones: the subscriber kept going

	wantA := (seq + 3) * 2 // two devices per message
	coretest.Eventually(t, 10*time.Second, "the entries of tenant A", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenantA))
		return n >= int64(wantA)
	})
	time.Sleep(200 * time.Millisecond)
	entries, err := store.Range(ctx, telemetry.IngestionStream(tenantA), "-", "+", 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != wantA {
		t.Fatalf("tenant A has %d entries, want %d (8 encodings + 3 more, 2 devices each; the 2 repeats dropped)", len(entries), wantA)
	}
	for i, en := range entries {
		m, err := telemetry.ParseMessage([]byte(en.Values[telemetry.StreamField]))
		if err != nil {
			t.Fatalf("entry %d breaks the stream contract: %v", i, err)
		}
		if m.MsgID == "v2_Ab12Cd34_1" && m.DeviceName == "plc1" && *m.Readings[0].Value != 1 {
			t.Errorf("msgId 1 carries %g: the duplicate replaced it", *m.Readings[0].Value)
		}
	}
	coretest.Eventually(t, 10*time.Second, "tenant B's message", func() bool {
		n, _ := store.Len(ctx, telemetry.IngestionStream(tenantB))
		return n == 2
	})
	for name, want := range map[string]float64{"edgeplat_api_telemetry_duplicates_total": 2, "edgeplat_api_mqtt_messages_dropped_total": 3} {
		if got := counter(t, r, name); got != want {
			t.Errorf("%s = %g, want %g", name, got, want)
		}
	}
	// Entries are written in the compact form, which ingest reads.
	if data := entries[0].Values["data"]; !telemetry.IsCompact(data) {
		t.Errorf("entry not in the compact form: %q", data)
	} else if m, err := telemetry.ParseMessage([]byte(data)); err != nil || m.AgentUUID == "" {
		t.Errorf("entry = %+v, %v", m, err)
	}

	// The marks the mode promises, and only those.
	msgidKeys, _ := rdb.Keys(ctx, scopeA+":msgid:*").Result()
	seqKeys, _ := rdb.Keys(ctx, scopeA+":seq:*").Result()
	switch mode {
	case config.DedupModeKey:
		if len(msgidKeys) != seq+3 || len(seqKeys) != 0 {
			t.Errorf("key mode left %d msgid keys and %d bitmaps, want %d and 0", len(msgidKeys), len(seqKeys), seq+3)
		}
	case config.DedupModeSequence:
		if len(msgidKeys) != 0 || len(seqKeys) != 2 {
			t.Errorf("sequence mode left %d msgid keys and bitmaps %v, want 0 and blocks 0 and 1", len(msgidKeys), seqKeys)
		}
		for _, c := range []struct {
			block string
			bit   int64
			want  int64
		}{{"0", 1, 1}, {"0", 50, 1}, {"0", 100, 1}, {"0", 51, 0}, {"1", 10, 1}, {"1", 0, 0}} {
			key := scopeA + ":seq:Ab12Cd34:" + c.block
			if got, err := rdb.GetBit(ctx, key, c.bit).Result(); err != nil || got != c.want {
				t.Errorf("GETBIT %s %d = %d, %v; want %d", key, c.bit, got, err, c.want)
			}
			if ttl, err := rdb.PTTL(ctx, key).Result(); err != nil || ttl <= 0 || ttl > cfg.API.DedupTTL {
				t.Errorf("PTTL %s = %s, %v; want within DEDUP_TTL %s", key, ttl, err, cfg.API.DedupTTL)
			}
		}
	}
}

// testAPIPipeline is a pipeline on store with the API role's defaults and
// DEDUP_MODE mode ("" keeps the default), and its runtime.
func testAPIPipeline(t *testing.T, mode string, store streamstore.Store) (*config.Config, *rt.Runtime, *pipeline) {
	t.Helper()
	if mode != "" {
		t.Setenv("DEDUP_MODE", mode)
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	pipe, err := newPipeline(cfg, r, store)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, r, pipe
}

// redisTestStore is the stream store and a plain client on the machine's
// Redis, both closed when the test and its cleanups have run.
func redisTestStore(t *testing.T) (*redisstore.Store, *goredis.Client) {
	t.Helper()
	redisAddr := coretest.RedisAddr(t)
	store, err := redisstore.New(redisstore.Options{Addrs: []string{redisAddr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	rdb := goredis.NewClient(&goredis.Options{Addr: redisAddr})
	t.Cleanup(func() { _ = rdb.Close() })
	return store, rdb
}

// deleteMatching removes the keys matching the patterns, so the
// de-duplication marks a test leaves do not wait a day for their TTL.
func deleteMatching(t *testing.T, rdb *goredis.Client, patterns ...string) {
	ctx := context.Background()
	for _, p := range patterns {
		keys, err := rdb.Keys(ctx, p).Result()
		if err != nil {
			t.Errorf("keys %s: %v", p, err)
			continue
		}
		if len(keys) > 0 {
			if err := rdb.Del(ctx, keys...).Err(); err != nil {
				t.Errorf("del: %v", err)
			}
		}
	}
}

// TestDedupMark checks the mark each mode gives a msgId.
func TestDedupMark(t *testing.T) {
	const tenant, agent = "AAAAAAAAAAAAAAAAAAAAAA", "BBBBBBBBBBBBBBBBBBBBBA"
	scope := "tenant:" + tenant + ":agent:" + agent
	tests := []struct {
		mode, msgID string
		wantKey     string
		wantBitmap  bool
		wantBit     uint16
	}{
		{config.DedupModeKey, "v2_Ab12Cd34_70000", scope + ":msgid:v2_Ab12Cd34_70000", false, 0},
		{config.DedupModeSequence, "v2_Ab12Cd34_0", scope + ":seq:Ab12Cd34:0", true, 0},
		{config.DedupModeSequence, "v2_Ab12Cd34_65535", scope + ":seq:Ab12Cd34:0", true, 65535},
		{config.DedupModeSequence, "v2_Ab12Cd34_65536", scope + ":seq:Ab12Cd34:1", true, 0},
		{config.DedupModeSequence, "v2_Ab12Cd34_70000", scope + ":seq:Ab12Cd34:1", true, 4464},
		{config.DedupModeSequence, "v2_Zz99Yy88_18446744073709551615", scope + ":seq:Zz99Yy88:281474976710655", true, 65535},
		// Not a v2 id (a hand-edited spool line): its own key.
		{config.DedupModeSequence, "legacy-42", scope + ":msgid:legacy-42", false, 0},
		{config.DedupModeSequence, "", "", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.mode+"/"+tt.msgID, func(t *testing.T) {
			t.Setenv("DEDUP_MODE", tt.mode)
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
			if err != nil {
				t.Fatal(err)
			}
			r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
			pipe, err := newPipeline(cfg, r, nil)
			if err != nil {
				t.Fatal(err)
			}
			b := envelope.Batch{MsgID: tt.msgID, Messages: []telemetry.Message{{DeviceName: "plc1"}}}
			req, err := pipe.request(envelope.Topic{Tenant: tenant, Agent: agent}, b)
			if err != nil {
				t.Fatal(err)
			}
			if req.DedupKey != tt.wantKey || req.DedupBitmap != tt.wantBitmap || req.DedupBit != tt.wantBit {
				t.Errorf("mark = %q bitmap %v bit %d; want %q bitmap %v bit %d",
					req.DedupKey, req.DedupBitmap, req.DedupBit, tt.wantKey, tt.wantBitmap, tt.wantBit)
			}
			if tt.wantKey != "" && req.DedupTTL != cfg.API.DedupTTL {
				t.Errorf("TTL %s, want DEDUP_TTL %s", req.DedupTTL, cfg.API.DedupTTL)
			}
		})
	}
}

func TestUnknownDedupModeRefused(t *testing.T) {
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.API.DedupMode = "bitmap"
	r := &rt.Runtime{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: metrics.NewRegistry(), Health: health.New(time.Second)}
	if _, err := newPipeline(cfg, r, nil); err == nil || !strings.Contains(err.Error(), "DEDUP_MODE") {
		t.Errorf("newPipeline with dedup mode %q = %v, want an error naming DEDUP_MODE", cfg.API.DedupMode, err)
	}
}

func counter(t *testing.T, r *rt.Runtime, name string) float64 {
	t.Helper()
	mfs, err := r.Metrics.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += value(m)
		}
	}
	return sum
}

func value(m *dto.Metric) float64 {
	if m.GetCounter() != nil {
		return m.GetCounter().GetValue()
	}
	return m.GetGauge().GetValue()
}

// TestDedupMemoryIntegration measures the Redis memory the de-duplication
// marks of each mode hold, producing msgIds through the pipeline's own
// requests and the real Redis store's Produce. It is opt-in, because it
// writes millions of keys and FLUSHES Redis database 7 before and after:
//
//	EDGEPLAT_TEST_DEDUP_MEMORY=1000000 go test -run TestDedupMemoryIntegration -v -timeout 30m ./roles/api
//
// The value is the number of msgIds per run. Streams are deleted before
// each reading, so what is left is the marks: used_memory's delta (which
// also counts the keyspace's hash tables) and the sum of MEMORY USAGE over
// the keys.
func TestDedupMemoryIntegration(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("EDGEPLAT_TEST_DEDUP_MEMORY"))
	if n <= 0 {
		t.Skip("set EDGEPLAT_TEST_DEDUP_MEMORY to the number of msgIds to measure")
	}
	const agents = 100
	// A private server: the measurement is of the whole keyspace, which
	// other tests' keys would distort.
	addr := coretest.PrivateRedis(t).Addr()
	rdb := goredis.NewClient(&goredis.Options{Addr: addr})
	defer rdb.Close()
	store, err := redisstore.New(redisstore.Options{Addrs: []string{addr}})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()

	rnd := mrand.New(mrand.NewPCG(1, 2))
	anywhere := func(int) uint64 { return rnd.Uint64N(1 << 40) }
	scenarios := []struct {
		name     string
		agents   int
		perAgent int
		start    func(agent int) uint64
	}{
		{"counters anywhere", agents, n / agents, anywhere},
		{"counters from 0", agents, n / agents, func(int) uint64 { return 0 }},
		// The least favourable case for bitmaps: each agent sends one
		// message per DEDUP_TTL, so each bitmap holds one bit.
		{"one message per agent", min(n, 10000), 1, anywhere},
	}
	for _, sc := range scenarios {
		starts := make([]uint64, sc.agents)
		for i := range starts {
			starts[i] = sc.start(i)
		}
		for _, mode := range []string{config.DedupModeKey, config.DedupModeSequence} {
			msgs := sc.agents * sc.perAgent
			keys, delta, usage := measureDedup(t, rdb, store, mode, starts, sc.perAgent)
			t.Logf("%-22s %-8s %8d msgIds %8d keys: used_memory %7.1f B/msgId (%6.1f MB per million), MEMORY USAGE %7.1f B/msgId",
				sc.name, mode, msgs, keys, float64(delta)/float64(msgs), float64(delta)/float64(msgs), float64(usage)/float64(msgs))
		}
	}
}

// measureDedup produces perAgent consecutive msgIds from each start, one
// agent per start, into an empty database and returns the keys left once
// the stream is deleted, used_memory's growth and the keys' MEMORY USAGE.
func measureDedup(t *testing.T, rdb *goredis.Client, store *redisstore.Store, mode string, starts []uint64, perAgent int) (keys, delta, usage int64) {
	t.Helper()
	ctx := context.Background()
	_, _, pipe := testAPIPipeline(t, mode, store)
	pipe.maxLen = 0
	tenant := randomID(t)
	stream := telemetry.IngestionStream(tenant)
	topics := make([]envelope.Topic, len(starts))
	for i := range topics {
		topics[i] = envelope.Topic{Kind: envelope.Telemetry, Tenant: tenant, Agent: randomID(t)}
	}
	produce := func(topic envelope.Topic, kid string, seq uint64) {
		id, err := codec.FormatMsgID(kid, seq)
		if err != nil {
			t.Error(err)
			return
		}
		req, err := pipe.request(topic, envelope.Batch{MsgID: id, Messages: []telemetry.Message{{DeviceName: "d"}}})
		if err != nil {
			t.Error(err)
			return
		}
		if res, err := store.Produce(ctx, req); err != nil || res.Duplicate {
			t.Errorf("Produce %s = %+v, %v", id, res, err)
		}
	}

	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	produce(envelope.Topic{Tenant: tenant, Agent: randomID(t)}, "Warm0000", 0) // opens the connections, outside the measurement
	if err := rdb.FlushDB(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	before := usedMemory(t, rdb)

	work := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for a := range work {
				kid := fmt.Sprintf("K%07d", a)
				for i := range perAgent {
					produce(topics[a], kid, starts[a]+uint64(i))
				}
			}
		})
	}
	began := time.Now()
	for a := range starts {
		work <- a
	}
	close(work)
	wg.Wait()
	t.Logf("%s: %d msgIds produced in %s", mode, len(starts)*perAgent, time.Since(began).Round(time.Millisecond))
	if _, err := store.Delete(ctx, stream); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // let incremental rehashing settle
	delta = usedMemory(t, rdb) - before

	iter := rdb.Scan(ctx, 0, "*", 10000).Iterator()
	for iter.Next(ctx) {
		keys++
		u, err := rdb.MemoryUsage(ctx, iter.Val(), 0).Result()
		if err != nil {
			t.Fatal(err)
		}
		usage += u
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return keys, delta, usage
}

func usedMemory(t *testing.T, rdb *goredis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory without used_memory")
	return 0
}
