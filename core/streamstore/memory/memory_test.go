package memory

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
	"github.com/edgeplat/edgeplat/core/streamstore/storetest"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func newStore(t testing.TB, opts Options) *Store {
	t.Helper()
	st, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) streamstore.Store {
		return newStore(t, Options{SweepInterval: 20 * time.Millisecond})
	})
}

func BenchmarkAddReadAck(b *testing.B) {
	storetest.BenchAddReadAck(b, newStore(b, Options{}))
}

func BenchmarkProduceBatch(b *testing.B) {
	storetest.BenchProduceBatch(b, newStore(b, Options{}))
}

func TestNewValidates(t *testing.T) {
	for _, o := range []Options{{MaxMemory: -1}, {SubscriptionBuffer: -1}, {SweepInterval: -time.Second}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted a negative setting", o)
		}
	}
}

// clock is a settable clock for id generation.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

func TestIDsFollowRedis(t *testing.T) {
	c := &clock{now: time.UnixMilli(1_000_000)}
	st := newStore(t, Options{Now: c.Now})
	ctx := t.Context()
	add := func() string {
		t.Helper()
		id, err := st.Add(ctx, "s", map[string]string{"a": "b"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	steps := []struct {
		at   int64
		want string
	}{
		{1_000_000, "1000000-0"},
		{1_000_000, "1000000-1"}, // same millisecond: sequence + 1
		{1_000_005, "1000005-0"}, // clock moved: new millisecond, sequence 0
		{999_000, "1000005-1"},   // clock went backwards: keep the last ms
		{1_000_005, "1000005-2"},
		{1_000_006, "1000006-0"},
	}
	for _, s := range steps {
		c.Set(time.UnixMilli(s.at))
		if got := add(); got != s.want {
			t.Errorf("at %d: id %s, want %s", s.at, got, s.want)
		}
	}
	ids, err := st.AddBatch(ctx, "s", []map[string]string{{"a": "1"}, {"a": "2"}}, 0)
	if err != nil || ids[0] != "1000006-1" || ids[1] != "1000006-2" {
		t.Errorf("AddBatch in one ms = %v, %v", ids, err)
	}
	// "$" remembers the last id even when the entries were trimmed away.
	if _, err := st.TrimMinID(ctx, "s", streamstore.MaxID.String()); err != nil {
		t.Fatal(err)
	}
	if err := st.EnsureGroup(ctx, "s", "g", "$"); err != nil {
		t.Fatal(err)
	}
	if info, _ := st.Group(ctx, "s", "g"); info.LastDeliveredID != "1000006-2" {
		t.Errorf("group from $ on a trimmed stream starts at %s", info.LastDeliveredID)
	}
}

func TestMemoryBound(t *testing.T) {
	st := newStore(t, Options{MaxMemory: 64 << 10})
	ctx := t.Context()
	big := strings.Repeat("x", 1000)
	if err := st.EnsureGroup(ctx, "s", "g", "0"); err != nil {
		t.Fatal(err)
	}
	added := 0
	var err error
	for range 1000 {
		if _, err = st.Add(ctx, "s", map[string]string{"data": big}, 0); err != nil {
			break
		}
		added++
	}
	if !errors.Is(err, streamstore.ErrOutOfMemory) || added == 0 || added > 64 {
		t.Fatalf("after %d Adds of 1 KB into 64 KB: %v; want ErrOutOfMemory", added, err)
	}
	if ok, err := st.SetNX(ctx, "k", big, time.Hour); ok || !errors.Is(err, streamstore.ErrOutOfMemory) {
		t.Errorf("SetNX on a full store = %v, %v; want ErrOutOfMemory", ok, err)
	}
	used, limit, _ := st.Memory(ctx)
	if used > limit || limit != 64<<10 {
		t.Errorf("Memory = %d of %d", used, limit)
	}
	// A full store still lets consumers drain it.
	got, err := st.ReadGroup(ctx, "s", "g", "c", 1000, 0)
	if err != nil || len(got) != added {
		t.Fatalf("ReadGroup on a full store = %d, %v", len(got), err)
	}
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if _, err := st.Ack(ctx, "s", "g", ids...); err != nil {
		t.Fatal(err)
	}
	safe, _ := st.SafeTrimID(ctx, "s", "g")
	if _, err := st.TrimMinID(ctx, "s", safe); err != nil {
		t.Fatal(err)
	}
	after, _, _ := st.Memory(ctx)
	if after >= used/4 {
		t.Errorf("draining freed too little: %d -> %d bytes", used, after)
	}
	if _, err := st.Add(ctx, "s", map[string]string{"data": big}, 0); err != nil {
		t.Errorf("Add after draining: %v", err)
	}
	// Deleting gives everything back.
	if _, err := st.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := st.Memory(ctx); used != 0 {
		t.Errorf("after deleting everything %d bytes are accounted", used)
	}
}

func TestMemoryAccountingBalances(t *testing.T) {
	st := newStore(t, Options{})
	ctx := t.Context()
	_ = st.EnsureGroup(ctx, "s", "g", "0")
	for range 50 {
		_, _ = st.Add(ctx, "s", map[string]string{"k": "v"}, 0)
	}
	got, _ := st.ReadGroup(ctx, "s", "g", "c", 30, 0)
	_, _ = st.Ack(ctx, "s", "g", got[0].ID, got[1].ID)
	_, _ = st.TrimMinID(ctx, "s", got[10].ID)
	_, _, _ = st.AutoClaim(ctx, "s", "g", "c2", 0, "0-0", 100) // drops the trimmed pending ones
	_, _ = st.SetNX(ctx, "k1", "v", time.Millisecond)
	_, _ = st.SetNX(ctx, "k2", "v", 0)
	time.Sleep(5 * time.Millisecond)
	_, _ = st.SetNX(ctx, "k1", "v", 0) // expired: lazily removed and set again
	var want int64
	st.mu.Lock()
	for _, s := range st.streams {
		want += s.bytes
	}
	for _, k := range st.keys {
		want += k.size
	}
	used := st.used
	st.mu.Unlock()
	if used != want {
		t.Errorf("used = %d, but streams and keys account for %d", used, want)
	}
	if _, err := st.Delete(ctx, "s", "k1", "k2"); err != nil {
		t.Fatal(err)
	}
	if used, _, _ := st.Memory(ctx); used != 0 {
		t.Errorf("after deleting everything used = %d", used)
	}
}

func TestSweepRemovesExpiredKeys(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	st := newStore(t, Options{Now: c.Now, SweepInterval: 5 * time.Millisecond})
	ctx := t.Context()
	for i := range 2500 { // more than one sweep batch
		if ok, err := st.SetNX(ctx, "k"+strconv.Itoa(i), "v", time.Second); !ok || err != nil {
			t.Fatal(ok, err)
		}
	}
	_, _ = st.SetNX(ctx, "keep", "v", 0)
	_, _ = st.SetNX(ctx, "later", "v", time.Hour)
	c.Set(time.Unix(1002, 0))
	coretest.Eventually(t, 5*time.Second, "the sweep to remove expired keys", func() bool {
		st.mu.Lock()
		defer st.mu.Unlock()
		return len(st.keys) == 2
	})
	st.mu.Lock()
	_, keep := st.keys["keep"]
	_, later := st.keys["later"]
	st.mu.Unlock()
	if !keep || !later {
		t.Error("the sweep removed keys that had not expired")
	}
}

// TestBitmapTTLRefresh: a bitmap whose TTL every append resets keeps one
// expiry item (not one per message, which at thousands of messages a
// second would grow the heap for a whole TTL), outlives its first expiry
// time, and goes, with its bytes, once the appends stop.
func TestBitmapTTLRefresh(t *testing.T) {
	start := time.Unix(1000, 0)
	c := &clock{now: start}
	st := newStore(t, Options{Now: c.Now, SweepInterval: 5 * time.Millisecond})
	ctx := t.Context()
	for i := range 1000 {
		c.Set(start.Add(time.Duration(i) * time.Millisecond))
		res, err := st.Produce(ctx, streamstore.ProduceRequest{DedupKey: "b", DedupTTL: time.Second, DedupBitmap: true,
			DedupBit: uint16(i), Stream: "s", Entries: []map[string]string{{"k": "v"}}})
		if err != nil || res.Duplicate {
			t.Fatalf("Produce %d = %+v, %v", i, res, err)
		}
	}
	st.mu.Lock()
	items, size := len(st.expiries), st.keys["b"].size
	st.mu.Unlock()
	if items != 1 {
		t.Errorf("%d expiry items for one bitmap, want 1", items)
	}
	if want := int64(keyOverhead + len("b") + 1000/8); size != want {
		t.Errorf("bitmap of 1000 bits accounts %d bytes, want %d", size, want)
	}
	if _, err := st.Delete(ctx, "s"); err != nil {
		t.Fatal(err)
	}

	// Past the first append's expiry, within the last one's: kept.
	c.Set(start.Add(1500 * time.Millisecond))
	time.Sleep(50 * time.Millisecond)
	st.mu.Lock()
	_, kept := st.keys["b"]
	st.mu.Unlock()
	if !kept {
		t.Fatal("the sweep removed a bitmap whose TTL was refreshed")
	}
	c.Set(start.Add(2 * time.Second))
	coretest.Eventually(t, 5*time.Second, "the sweep to remove the bitmap", func() bool {
		used, _, _ := st.Memory(ctx)
		return used == 0
	})
}

func TestSlowSubscriberDrops(t *testing.T) {
	st := newStore(t, Options{SubscriptionBuffer: 4})
	ctx := t.Context()
	slow, _ := st.Subscribe(ctx, "c")
	defer slow.Close()
	for range 10 {
		if err := st.Publish(ctx, "c", []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	if slow.Dropped() != 6 || len(slow.C()) != 4 {
		t.Errorf("buffer 4, 10 messages: %d buffered, %d dropped", len(slow.C()), slow.Dropped())
	}
}

func TestCloseEndsEverything(t *testing.T) {
	st, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	_ = st.EnsureGroup(ctx, "s", "g", "$")
	_, _ = st.SetNX(ctx, "k", "v", time.Hour) // starts the sweep
	sub, _ := st.Subscribe(ctx, "c")
	done := make(chan error, 1)
	go func() {
		_, err := st.ReadGroup(ctx, "s", "g", "c", 1, time.Hour)
		done <- err
	}()
	time.Sleep(20 * time.Millisecond)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, streamstore.ErrClosed) {
			t.Errorf("blocked read after Close: %v, want ErrClosed", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not wake a blocked read")
	}
	if _, ok := <-sub.C(); ok {
		t.Error("subscription still open after Close")
	}
	_ = sub.Close()
	if err := st.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for name, err := range map[string]error{
		"Ping":        st.Ping(ctx),
		"Publish":     st.Publish(ctx, "c", nil),
		"EnsureGroup": st.EnsureGroup(ctx, "s", "g", "0"),
	} {
		if !errors.Is(err, streamstore.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := st.Add(ctx, "s", map[string]string{"a": "b"}, 0); !errors.Is(err, streamstore.ErrClosed) {
		t.Errorf("Add after Close: %v", err)
	}
	if _, err := st.Subscribe(ctx, "c"); !errors.Is(err, streamstore.ErrClosed) {
		t.Errorf("Subscribe after Close: %v", err)
	}
}

func TestAutoClaimAttemptsAndCursor(t *testing.T) {
	c := &clock{now: time.Unix(1000, 0)}
	st := newStore(t, Options{Now: c.Now})
	ctx := context.Background()
	_ = st.EnsureGroup(ctx, "s", "g", "0")
	for range 30 {
		_, _ = st.Add(ctx, "s", map[string]string{"a": "b"}, 0)
	}
	got, _ := st.ReadGroup(ctx, "s", "g", "c", 30, 0)
	// Only the last entry is idle long enough... none is: time stands
	// still. With count 1, Redis examines at most 10 PEL entries per call
	// and returns the next one as the cursor.
	claimed, next, err := st.AutoClaim(ctx, "s", "g", "c2", time.Second, "0-0", 1)
	if err != nil || len(claimed) != 0 || next != got[10].ID {
		t.Errorf("AutoClaim(count 1) with nothing idle = %d, %s, %v; want none and cursor %s", len(claimed), next, err, got[10].ID)
	}
	// Trimmed pending entries count towards count, as in Redis 7.
	_, _ = st.TrimMinID(ctx, "s", got[2].ID)
	claimed, next, _ = st.AutoClaim(ctx, "s", "g", "c2", 0, "0-0", 2)
	if len(claimed) != 0 || next != got[2].ID {
		t.Errorf("AutoClaim(count 2) over 2 trimmed entries = %d claimed, cursor %s; want 0 and %s", len(claimed), next, got[2].ID)
	}
}
