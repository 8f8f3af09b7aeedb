package redis

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/storetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newStore connects to the test Redis; every test gets its own client and
// closes it at the end. Tests share the server and keep apart by names.
func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test needs Redis; skipped in -short mode")
	}
	opts.Addrs = []string{coretest.RedisAddr(t)}
	st, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// uniqueName keeps concurrent runs against one Redis apart.
func uniqueName(t testing.TB) string {
	return "storetest-" + t.Name() + "-" + rand.Text()
}

func TestContractIntegration(t *testing.T) {
	newStore(t, Options{}) // skip the whole suite at once when Redis is absent
	storetest.Run(t, func(t *testing.T) streamstore.Store {
		return newStore(t, Options{BlockSlice: 200 * time.Millisecond})
	})
}

func BenchmarkAddReadAck(b *testing.B) {
	storetest.BenchAddReadAck(b, newStore(b, Options{}))
}

func BenchmarkProduceBatch(b *testing.B) {
	storetest.BenchProduceBatch(b, newStore(b, Options{}))
}

func TestOptionsFromConfig(t *testing.T) {
	tests := []struct {
		host string
		want []string
	}{
		{"redis", []string{"redis:6379"}},
		{"redis:7000", []string{"redis:7000"}},
		{"a, b:7001 ,c", []string{"a:6379", "b:7001", "c:6379"}},
		{"::1", []string{"[::1]:6379"}},
		{"[::1]", []string{"[::1]:6379"}},
		{"[::1]:7000,10.0.0.1", []string{"[::1]:7000", "10.0.0.1:6379"}},
		{"", nil},
	}
	for _, tt := range tests {
		o := OptionsFromConfig(config.StreamStore{Host: tt.host, Port: 6379, Password: "pw", DB: 2, TLS: true})
		if !slices.Equal(o.Addrs, tt.want) {
			t.Errorf("Host %q: Addrs %q, want %q", tt.host, o.Addrs, tt.want)
		}
		if o.Password != "pw" || o.DB != 2 || !o.TLS {
			t.Errorf("Host %q: %+v lost password, db or tls", tt.host, o)
		}
	}
}

func TestNewValidatesWithoutIO(t *testing.T) {
	bad := []Options{
		{},
		{Addrs: []string{"no-port"}},
		{Addrs: []string{"h:0"}},
		{Addrs: []string{":6379"}},
		{Addrs: []string{"a:1", "b:2"}, DB: 1},
		{Addrs: []string{"a:1"}, Cluster: true, MasterName: "m"},
		{Addrs: []string{"a:1"}, ReadTimeout: -1},
	}
	for _, o := range bad {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted invalid options", o)
		}
	}
	// Nothing listens on port 1; New must still succeed, and Ping fail.
	st, err := New(Options{Addrs: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatalf("New did I/O or refused valid options: %v", err)
	}
	defer st.Close()
	if err := st.Ping(t.Context()); err == nil {
		t.Error("Ping of a closed port succeeded")
	}
}

func TestClientShape(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Addrs: []string{"a:1"}}, "*redis.Client"},
		{Options{Addrs: []string{"a:1", "b:1"}}, "*redis.ClusterClient"},
		{Options{Addrs: []string{"a:1"}, Cluster: true}, "*redis.ClusterClient"},
		{Options{Addrs: []string{"s1:26379", "s2:26379"}, MasterName: "mymaster"}, "*redis.Client"}, // failover client
	}
	for _, tt := range tests {
		st, err := New(tt.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got string
		switch st.client.(type) {
		case *goredis.Client:
			got = "*redis.Client"
		case *goredis.ClusterClient:
			got = "*redis.ClusterClient"
		}
		if got != tt.want {
			t.Errorf("%+v: client %T, want %s", tt.opts, st.client, tt.want)
		}
		_ = st.Close()
	}
	st, _ := New(Options{Addrs: []string{"cache.example.com:6380"}, TLS: true})
	defer st.Close()
	tc := st.client.(*goredis.Client).Options().TLSConfig
	if tc == nil || tc.ServerName != "cache.example.com" || tc.MinVersion < 0x0303 {
		t.Errorf("TLS config = %+v; want ServerName cache.example.com, TLS 1.2+", tc)
	}
}

func TestParseMemory(t *testing.T) {
	used, max, err := parseMemory("# Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\nmaxmemory:0\r\n")
	if err != nil || used != 1048576 || max != 0 {
		t.Errorf("parseMemory = %d, %d, %v", used, max, err)
	}
	if _, _, err := parseMemory("# Memory\r\n"); err == nil {
		t.Error("parseMemory accepted a reply without the fields")
	}
}

func TestErrorMappingIntegration(t *testing.T) {
	st := newStore(t, Options{})
	ctx := t.Context()
	if _, err := st.Group(ctx, uniqueName(t), "g"); !errors.Is(err, streamstore.ErrNoGroup) {
		t.Errorf("Group on a missing stream: %v", err)
	}
	_ = st.Close()
	if err := st.Ping(ctx); !errors.Is(err, streamstore.ErrClosed) {
		t.Errorf("Ping after Close: %v, want ErrClosed", err)
	}
	if _, err := st.Subscribe(ctx, "x"); !errors.Is(err, streamstore.ErrClosed) {
		t.Errorf("Subscribe after Close: %v, want ErrClosed", err)
	}
}

func TestCloseClosesSubscriptionsIntegration(t *testing.T) {
	st := newStore(t, Options{})
	sub, err := st.Subscribe(t.Context(), uniqueName(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub.C():
		if ok {
			t.Error("a message after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("subscription still open after the store closed")
	}
	_ = sub.Close()
}

func TestCloseEndsBlockedReadIntegration(t *testing.T) {
	st := newStore(t, Options{BlockSlice: time.Minute})
	cleanup := newStore(t, Options{})
	stream := uniqueName(t)
	t.Cleanup(func() { _, _ = cleanup.Delete(context.Background(), stream) })
	if err := st.EnsureGroup(t.Context(), stream, "g", "$"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.ReadGroup(t.Context(), stream, "g", "c", 1, time.Hour)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	_ = st.Close()
	select {
	case err := <-done:
		if !errors.Is(err, streamstore.ErrClosed) {
			t.Errorf("read blocked across Close: %v, want ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not end a blocked read")
	}
}

func TestCancelledBlockingReadIsPromptIntegration(t *testing.T) {
	// A cancelled read returns within about one BlockSlice, not after its
	// block time (checked with a wide bound, not timed).
	st := newStore(t, Options{BlockSlice: 100 * time.Millisecond})
	ctx, cancel := context.WithCancel(t.Context())
	stream := uniqueName(t)
	defer st.Delete(context.Background(), stream)
	if err := st.EnsureGroup(ctx, stream, "g", "$"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := st.ReadGroup(ctx, stream, "g", "c", 1, time.Hour)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a cancelled blocking read did not return")
	}
}

// TestProduceInStepsIntegration runs the Cluster path of Produce on the
// single test server, for both forms of mark: repeats dropped, older bits
// still appended, no mark left by a refused append, the TTL set after an
// append. (Simultaneous copies are the one thing it does not promise.)
func TestProduceInStepsIntegration(t *testing.T) {
	st := newStore(t, Options{})
	ctx := t.Context()
	name := uniqueName(t)
	stream, key, bitmap := name+":ingest", name+":msgid", name+":seq"
	t.Cleanup(func() { _, _ = st.Delete(context.Background(), stream, key, bitmap) })
	steps := []struct {
		name    string
		req     streamstore.ProduceRequest
		want    bool // appended
		wantErr error
	}{
		{name: "key: first", req: streamstore.ProduceRequest{DedupKey: key}, want: true},
		{name: "key: repeat", req: streamstore.ProduceRequest{DedupKey: key}},
		{name: "bit: first", req: streamstore.ProduceRequest{DedupKey: bitmap, DedupBitmap: true, DedupBit: 9}, want: true},
		{name: "bit: repeat", req: streamstore.ProduceRequest{DedupKey: bitmap, DedupBitmap: true, DedupBit: 9}},
		{name: "bit: older", req: streamstore.ProduceRequest{DedupKey: bitmap, DedupBitmap: true, DedupBit: 2}, want: true},
		{name: "bit: refused", req: streamstore.ProduceRequest{DedupKey: bitmap, DedupBitmap: true, DedupBit: 3, MaxLen: 1}, wantErr: streamstore.ErrStreamFull},
		{name: "bit: redelivered", req: streamstore.ProduceRequest{DedupKey: bitmap, DedupBitmap: true, DedupBit: 3}, want: true},
	}
	for _, s := range steps {
		req := s.req
		req.DedupTTL, req.Stream, req.Entries = time.Hour, stream, []map[string]string{{"data": s.name}}
		res, err := st.produceInSteps(ctx, req, req.DedupTTL.Milliseconds())
		if s.wantErr != nil {
			if !errors.Is(err, s.wantErr) {
				t.Errorf("%s: %v, want %v", s.name, err, s.wantErr)
			}
			continue
		}
		wantIDs := 0
		if s.want {
			wantIDs = 1
		}
		if err != nil || res.Duplicate == s.want || len(res.IDs) != wantIDs {
			t.Errorf("%s: %+v, %v; want appended %v", s.name, res, err, s.want)
		}
	}
	for _, k := range []string{key, bitmap} {
		if ttl, err := st.client.PTTL(ctx, k).Result(); err != nil || ttl <= 0 || ttl > time.Hour {
			t.Errorf("PTTL %s = %s, %v; want at most 1h", k, ttl, err)
		}
	}
}

// countingHook counts what the client sends: single commands and
// pipelines.
type countingHook struct {
	mu        sync.Mutex
	singles   int
	pipelines int
}

func (h *countingHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }

func (h *countingHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.mu.Lock()
		h.singles++
		h.mu.Unlock()
		return next(ctx, cmd)
	}
}

func (h *countingHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		err := next(ctx, cmds)
		h.mu.Lock()
		defer h.mu.Unlock()
		h.pipelines++
		return err
	}
}

func (h *countingHook) counts() (singles, pipelines int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.singles, h.pipelines
}

// batchOutcome names what happened to one request of a batch.
func batchOutcome(res streamstore.ProduceResult, err error) string {
	switch {
	case errors.Is(err, streamstore.ErrStreamFull):
		return "full"
	case err != nil:
		return "error"
	case res.Duplicate:
		return "duplicate"
	}
	return "appended"
}

// testBatch is a batch exercising every outcome, on names of its own.
func testBatch(name string) ([]streamstore.ProduceRequest, []string) {
	entry := []map[string]string{{"data": "x"}}
	stream, key, bitmap := name+":ingest", name+":msgid", name+":seq"
	return []streamstore.ProduceRequest{
			{DedupKey: key, DedupTTL: time.Hour, Stream: stream, Entries: entry},
			{DedupKey: key, DedupTTL: time.Hour, Stream: stream, Entries: entry},
			{DedupKey: bitmap, DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 7, Stream: stream, Entries: entry},
			{DedupKey: bitmap, DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 7, Stream: stream, Entries: entry},
			{DedupKey: bitmap, DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 8, Stream: stream, Entries: entry, MaxLen: 2},
			{Stream: stream, Entries: []map[string]string{{}}},
			{Stream: stream, Entries: entry},
		},
		[]string{"appended", "duplicate", "appended", "duplicate", "full", "error", "appended"}
}

func checkBatch(t *testing.T, what string, want []string, results []streamstore.ProduceResult, errs []error) {
	t.Helper()
	if len(results) != len(want) || len(errs) != len(want) {
		t.Fatalf("%s: %d results and %d errors for %d requests", what, len(results), len(errs), len(want))
	}
	for i := range want {
		if got := batchOutcome(results[i], errs[i]); got != want[i] {
			t.Errorf("%s: request %d: %s (%+v, %v), want %s", what, i, got, results[i], errs[i], want[i])
		}
	}
}

// TestProduceBatchRoundTripsIntegration: on one server a batch is two
// pipelines and nothing else (reads and claims, then the transactions); an
// empty batch, or one whose requests are all invalid, sends nothing. No
// claim outlives the batch.
func TestProduceBatchRoundTripsIntegration(t *testing.T) {
	st := newStore(t, Options{})
	ctx := t.Context()
	name := uniqueName(t)
	reqs, want := testBatch(name)
	t.Cleanup(func() {
		_, _ = st.Delete(context.Background(), name+":ingest", name+":msgid", name+":seq")
	})
	hook := &countingHook{}
	st.client.AddHook(hook)

	for _, empty := range [][]streamstore.ProduceRequest{nil, {{Stream: name, Entries: []map[string]string{{}}}}} {
		results, errs := st.ProduceBatch(ctx, empty)
		if len(results) != len(empty) || len(errs) != len(empty) || len(empty) == 1 && errs[0] == nil {
			t.Errorf("ProduceBatch(%d invalid) = %v, %v", len(empty), results, errs)
		}
	}
	if singles, pipelines := hook.counts(); singles != 0 || pipelines != 0 {
		t.Errorf("empty and invalid batches sent %d commands and %d pipelines, want none", singles, pipelines)
	}
	results, errs := st.ProduceBatch(ctx, reqs)
	checkBatch(t, "ProduceBatch", want, results, errs)
	if singles, pipelines := hook.counts(); singles != 0 || pipelines != 2 {
		t.Errorf("a batch of %d sent %d commands and %d pipelines, want two pipelines", len(reqs), singles, pipelines)
	}
	if claims, err := st.client.Keys(ctx, name+"*:claim*").Result(); err != nil || len(claims) != 0 {
		t.Errorf("claims left after the batch: %v, %v", claims, err)
	}
}

// TestProduceClaimIntegration: a message whose claim another producer holds
// (one that died between claiming and appending, here) is refused with
// ErrCopyInFlight, writes nothing and leaves the claim alone; once the
// claim is gone (it expires after claimTTL) the message is appended.
func TestProduceClaimIntegration(t *testing.T) {
	st := newStore(t, Options{})
	ctx := t.Context()
	name := uniqueName(t)
	t.Cleanup(func() {
		_, _ = st.Delete(context.Background(), name+":ingest", name+":msgid", name+":seq", name+":msgid:claim", name+":seq:claim:9")
	})
	for _, req := range []streamstore.ProduceRequest{
		{DedupKey: name + ":msgid", DedupTTL: time.Hour, Stream: name + ":ingest", Entries: []map[string]string{{"data": "k"}}},
		{DedupKey: name + ":seq", DedupTTL: time.Hour, DedupBitmap: true, DedupBit: 9, Stream: name + ":ingest", Entries: []map[string]string{{"data": "b"}}},
	} {
		claim := claimKey(req)
		if err := st.client.Set(ctx, claim, "1", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
		res, err := st.Produce(ctx, req)
		if !errors.Is(err, streamstore.ErrCopyInFlight) || res.Duplicate || len(res.IDs) != 0 {
			t.Fatalf("%s: Produce with the claim held elsewhere = %+v, %v; want ErrCopyInFlight", req.DedupKey, res, err)
		}
		if n, _ := st.client.Exists(ctx, claim).Result(); n != 1 {
			t.Errorf("%s: the other producer's claim was removed", req.DedupKey)
		}
		if n, _ := st.Len(ctx, req.Stream); n != 0 {
			t.Fatalf("%s: a refused copy appended: stream length %d", req.DedupKey, n)
		}
		st.client.Del(ctx, claim)
		if res, err := st.Produce(ctx, req); err != nil || len(res.IDs) != 1 {
			t.Fatalf("%s: Produce once the claim is gone = %+v, %v; want appended", req.DedupKey, res, err)
		}
		if res, err := st.Produce(ctx, req); err != nil || !res.Duplicate {
			t.Fatalf("%s: Produce again = %+v, %v; want duplicate", req.DedupKey, res, err)
		}
		st.client.Del(ctx, req.Stream)
	}
}

// TestProduceBatchUnreachable: with nothing listening every request fails
// with the connection's error, none as a copy in flight or a duplicate (a
// failed dial leaves the pipeline's commands without errors of their own).
func TestProduceBatchUnreachable(t *testing.T) {
	st, err := New(Options{Addrs: []string{net.JoinHostPort("127.0.0.1", strconv.Itoa(coretest.FreePort(t)))}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	reqs, _ := testBatch("unreachable")
	results, errs := st.ProduceBatch(t.Context(), reqs)
	for i := range reqs {
		if errs[i] == nil || errors.Is(errs[i], streamstore.ErrCopyInFlight) || results[i].Duplicate || len(results[i].IDs) > 0 {
			t.Errorf("request %d: %+v, %v; want the connection's error", i, results[i], errs[i])
		}
	}
}

// TestStreamsRegistryIntegration: Streams reads the registry, not the
// keyspace. On a server never scanned, the first call adopts the streams
// written before the registry existed; after that, streams are found by
// their writes through the store, a stream deleted behind the store's back
// leaves the registry, and no call scans the keyspace, however many other
// keys it holds.
func TestStreamsRegistryIntegration(t *testing.T) {
	st := newPrivateStore(t)
	ctx := t.Context()
	raw := st.client
	streams := func() []string {
		t.Helper()
		got, err := st.Streams(ctx, "tenant:*")
		if err != nil {
			t.Fatalf("Streams: %v", err)
		}
		return got
	}
	scans := func() string {
		info, err := raw.Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if strings.HasPrefix(line, "cmdstat_scan:") {
				return strings.Fields(strings.SplitN(line, ",", 2)[0])[0]
			}
		}
		return "none"
	}

	// Written before the registry existed: adopted by the first call.
	raw.XAdd(ctx, &goredis.XAddArgs{Stream: "tenant:old:agent:devices:ingestion", Values: []string{"data", "x"}})
	raw.Set(ctx, "tenant:old:agent:x:msgid:v2_a_1", "1", time.Hour)
	if got := streams(); !slices.Equal(got, []string{"tenant:old:agent:devices:ingestion"}) {
		t.Fatalf("first Streams = %v, want the older stream adopted", got)
	}

	// From now on the keyspace is not scanned: a stream written around the
	// store stays unknown, one written through it is found.
	for i := range 5000 {
		raw.Set(ctx, "tenant:old:agent:x:msgid:v2_a_"+strconv.Itoa(i+2), "1", time.Hour)
	}
	before := scans()
	raw.XAdd(ctx, &goredis.XAddArgs{Stream: "tenant:raw:agent:devices:ingestion", Values: []string{"data", "x"}})
	if _, err := st.Add(ctx, "tenant:a:agent:devices:ingestion", map[string]string{"data": "x"}, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddBatch(ctx, "tenant:b:agent:devices:ingestion", []map[string]string{{"data": "x"}}, 10); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureGroup(ctx, "tenant:c:agent:devices:ingestion", "c:device-writers", "0"); err != nil {
		t.Fatal(err)
	}
	if res, err := st.Produce(ctx, streamstore.ProduceRequest{DedupKey: "tenant:d:agent:x:msgid:v2_a_1", DedupTTL: time.Hour,
		Stream: "tenant:d:agent:devices:ingestion", Entries: []map[string]string{{"data": "x"}}}); err != nil || len(res.IDs) != 1 {
		t.Fatalf("Produce = %+v, %v", res, err)
	}
	want := []string{"tenant:a:agent:devices:ingestion", "tenant:b:agent:devices:ingestion", "tenant:c:agent:devices:ingestion",
		"tenant:d:agent:devices:ingestion", "tenant:old:agent:devices:ingestion"}
	if got := streams(); !slices.Equal(got, want) {
		t.Errorf("Streams = %v, want %v", got, want)
	}
	if after := scans(); after != before {
		t.Errorf("SCAN calls went from %s to %s after adoption", before, after)
	}

	// Deleted through the store or behind its back: no longer listed.
	if _, err := st.Delete(ctx, "tenant:a:agent:devices:ingestion"); err != nil {
		t.Fatal(err)
	}
	raw.Del(ctx, "tenant:b:agent:devices:ingestion")
	want = []string{"tenant:c:agent:devices:ingestion", "tenant:d:agent:devices:ingestion", "tenant:old:agent:devices:ingestion"}
	if got := streams(); !slices.Equal(got, want) {
		t.Errorf("after deletes, Streams = %v, want %v", got, want)
	}
	if members, _ := raw.SMembers(ctx, registryKey).Result(); slices.Contains(members, "tenant:b:agent:devices:ingestion") {
		t.Error("a stream deleted behind the store's back stays in the registry")
	}
}

// TestRegistryFailureKeepsWritesIntegration: with the registry unusable (a
// key of another type in its place) every write still lands and reports
// success, since failing it would have it written again; discovery says
// what is wrong.
func TestRegistryFailureKeepsWritesIntegration(t *testing.T) {
	st := newPrivateStore(t)
	ctx := t.Context()
	if err := st.client.Set(ctx, registryKey, "not a set", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Add(ctx, "tenant:a:agent:devices:ingestion", map[string]string{"data": "x"}, 0); err != nil {
		t.Errorf("Add: %v", err)
	}
	if _, err := st.AddBatch(ctx, "tenant:b:agent:devices:ingestion", []map[string]string{{"data": "x"}}, 10); err != nil {
		t.Errorf("AddBatch: %v", err)
	}
	if err := st.EnsureGroup(ctx, "tenant:c:agent:devices:ingestion", "c:device-writers", "0"); err != nil {
		t.Errorf("EnsureGroup: %v", err)
	}
	if res, err := st.Produce(ctx, streamstore.ProduceRequest{DedupKey: "tenant:d:agent:x:msgid:v2_a_1", DedupTTL: time.Hour,
		Stream: "tenant:d:agent:devices:ingestion", Entries: []map[string]string{{"data": "x"}}}); err != nil || len(res.IDs) != 1 {
		t.Errorf("Produce = %+v, %v", res, err)
	}
	for _, s := range []string{"a", "b", "d"} {
		if n, _ := st.Len(ctx, "tenant:"+s+":agent:devices:ingestion"); n != 1 {
			t.Errorf("stream %s holds %d entries, want 1", s, n)
		}
	}
	if _, err := st.Streams(ctx, "tenant:*"); err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
		t.Errorf("Streams with a broken registry: %v, want the WRONGTYPE error", err)
	}
}

// newPrivateStore connects to a Redis server of the test's own, for tests
// whose outcome depends on the whole keyspace.
func newPrivateStore(t *testing.T) *Store {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test needs redis-server; skipped in -short mode")
	}
	st, err := New(Options{Addrs: []string{coretest.PrivateRedis(t).Addr()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}
