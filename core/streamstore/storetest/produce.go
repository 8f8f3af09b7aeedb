package storetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/streamstore"
)

// testProduce: a new message is appended, marked and published; its
// duplicate writes nothing; a refused append (stream full) leaves no mark,
// so the redelivered message goes through once there is room.
func testProduce(t *testing.T, e *env) {
	stream, key, ch := e.name("ingest"), e.name("msgid"), e.name("live")
	sub, err := e.st.Subscribe(e.ctx, ch)
	if err != nil {
		t.Fatalf("Subscribe: %v", err)
	}
	defer sub.Close()
	req := streamstore.ProduceRequest{
		DedupKey: key, DedupTTL: time.Hour, Stream: stream, MaxLen: 3,
		Entries: []map[string]string{{"data": "a"}, {"data": "b"}},
		Channel: ch, Payload: []byte("live-1"),
	}
	res, err := e.st.Produce(e.ctx, req)
	if err != nil || res.Duplicate || len(res.IDs) != 2 {
		t.Fatalf("Produce = %+v, %v; want two new ids", res, err)
	}
	select {
	case m := <-sub.C():
		if string(m.Payload) != "live-1" {
			t.Errorf("published %q", m.Payload)
		}
	case <-time.After(wait):
		t.Fatal("nothing published")
	}
	if res, err := e.st.Produce(e.ctx, req); err != nil || !res.Duplicate || len(res.IDs) != 0 {
		t.Fatalf("repeated Produce = %+v, %v; want a duplicate", res, err)
	}
	if n, _ := e.st.Len(e.ctx, stream); n != 2 {
		t.Errorf("stream length %d after a duplicate, want 2", n)
	}

	// Two more entries would pass MaxLen 3: refused, and not marked.
	full := req
	full.DedupKey = e.name("msgid-2")
	_, err = e.st.Produce(e.ctx, full)
	if !errors.Is(err, streamstore.ErrStreamFull) {
		t.Fatalf("Produce past MaxLen = %v, want ErrStreamFull", err)
	}
	if ok, _ := e.st.SetNX(e.ctx, full.DedupKey, "probe", time.Minute); !ok {
		t.Fatal("a refused message left its de-duplication mark: its redelivery would be lost")
	}
	if _, err := e.st.Delete(e.ctx, full.DedupKey); err != nil {
		t.Fatal(err)
	}
	full.MaxLen = 0
	if res, err := e.st.Produce(e.ctx, full); err != nil || res.Duplicate {
		t.Fatalf("redelivered Produce = %+v, %v; want it appended", res, err)
	}

	// Without a key nothing is de-duplicated; without a channel nothing is
	// published.
	plain := streamstore.ProduceRequest{Stream: stream, Entries: []map[string]string{{"data": "c"}}}
	for range 2 {
		if res, err := e.st.Produce(e.ctx, plain); err != nil || res.Duplicate || len(res.IDs) != 1 {
			t.Fatalf("Produce without key = %+v, %v", res, err)
		}
	}
	if n, _ := e.st.Len(e.ctx, stream); n != 6 {
		t.Errorf("stream length %d, want 6", n)
	}
	if _, err := e.st.Produce(e.ctx, streamstore.ProduceRequest{Stream: stream, Entries: []map[string]string{{}}}); err == nil {
		t.Error("an entry without fields was accepted")
	}
}

// testProduceConcurrentDuplicates: copies of one message produced at the
// same time land once, whichever form of mark they carry. A store may
// refuse a copy while another is being appended (ErrCopyInFlight); retried
// afterwards, it is a repeat.
func testProduceConcurrentDuplicates(t *testing.T, e *env) {
	for _, bitmap := range []bool{false, true} {
		stream, key := e.name(fmt.Sprint("ingest-", bitmap)), e.name(fmt.Sprint("mark-", bitmap))
		req := streamstore.ProduceRequest{DedupKey: key, DedupTTL: time.Hour,
			DedupBitmap: bitmap, DedupBit: 4242, Stream: stream, Entries: []map[string]string{{"data": "x"}}}
		var wg sync.WaitGroup
		var appended, refused atomic.Int32
		for range 20 {
			wg.Go(func() {
				res, err := e.st.Produce(e.ctx, req)
				switch {
				case errors.Is(err, streamstore.ErrCopyInFlight):
					refused.Add(1)
				case err != nil:
					t.Errorf("Produce: %v", err)
				case !res.Duplicate:
					appended.Add(1)
				}
			})
		}
		wg.Wait()
		if appended.Load() != 1 {
			t.Errorf("bitmap %v: %d of 20 concurrent copies appended (%d refused as in flight), want 1", bitmap, appended.Load(), refused.Load())
		}
		// Every copy has returned, the appended one included: a refused
		// copy retried now is a repeat.
		if refused.Load() > 0 {
			if res, err := e.st.Produce(e.ctx, req); err != nil || !res.Duplicate {
				t.Errorf("bitmap %v: a refused copy retried = %+v, %v; want a duplicate", bitmap, res, err)
			}
		}
		if n, err := e.st.Len(e.ctx, stream); err != nil || n != 1 {
			t.Errorf("bitmap %v: stream holds %d entries (%v), want 1", bitmap, n, err)
		}
	}
}

// produceBit produces one entry marked by bit of key and reports whether it
// was appended.
func (e *env) produceBit(stream, key string, bit uint16, ttl time.Duration, maxLen int64) (bool, error) {
	res, err := e.st.Produce(e.ctx, streamstore.ProduceRequest{DedupKey: key, DedupTTL: ttl, DedupBitmap: true, DedupBit: bit,
		Stream: stream, MaxLen: maxLen, Entries: []map[string]string{{"data": fmt.Sprint(key, "/", bit)}}})
	if err != nil {
		return false, err
	}
	if res.Duplicate != (len(res.IDs) == 0) {
		e.t.Fatalf("Produce = %+v: a duplicate must append nothing, an append must return its ids", res)
	}
	return !res.Duplicate, nil
}

// testProduceBitmap: with a bitmap mark, a message is a repeat exactly when
// its own bit is set. Messages arrive out of order, as an agent replaying
// its buffer sends them: older bits of the same bitmap, and bits of an older
// bitmap, are still appended.
func testProduceBitmap(t *testing.T, e *env) {
	stream, current, older := e.name("ingest"), e.name("seq-7"), e.name("seq-6")
	steps := []struct {
		name string
		key  string
		bit  uint16
		want bool // appended
	}{
		{"first arrival", current, 5, true},
		{"repeat", current, 5, false},
		{"older, same bitmap", current, 3, true},
		{"its neighbour", current, 4, true},
		{"highest bit", current, streamstore.DedupBitmapBits - 1, true},
		{"lowest bit", current, 0, true},
		{"older bitmap", older, streamstore.DedupBitmapBits - 1, true},
		{"repeat in the older bitmap", older, streamstore.DedupBitmapBits - 1, false},
		{"same bit, other bitmap", older, 5, true},
		{"late repeat", current, 3, false},
		{"repeat of the highest", current, streamstore.DedupBitmapBits - 1, false},
	}
	appended := int64(0)
	for _, st := range steps {
		got, err := e.produceBit(stream, st.key, st.bit, time.Hour, 0)
		if err != nil {
			t.Fatalf("%s: Produce: %v", st.name, err)
		}
		if got != st.want {
			t.Errorf("%s (bit %d): appended = %v, want %v", st.name, st.bit, got, st.want)
		}
		if got {
			appended++
		}
	}
	if n := e.length(stream); n != appended {
		t.Errorf("stream length %d, want %d", n, appended)
	}
}

// testProduceBitmapOnlyAfterAppend: a refused append (stream full) sets no
// bit and creates no bitmap, so the redelivered message goes through.
func testProduceBitmapOnlyAfterAppend(t *testing.T, e *env) {
	stream, key := e.name("ingest"), e.name("seq-0")
	if ok, err := e.produceBit(stream, key, 1, time.Hour, 1); !ok || err != nil {
		t.Fatalf("first Produce = %v, %v; want appended", ok, err)
	}
	if _, err := e.produceBit(stream, key, 2, time.Hour, 1); !errors.Is(err, streamstore.ErrStreamFull) {
		t.Fatalf("Produce past MaxLen = %v, want ErrStreamFull", err)
	}
	if ok, err := e.produceBit(stream, key, 2, time.Hour, 0); !ok || err != nil {
		t.Fatalf("redelivered Produce = %v, %v; want appended: the refused one left its bit", ok, err)
	}

	fresh := e.name("seq-1")
	if _, err := e.produceBit(stream, fresh, 9, time.Hour, 1); !errors.Is(err, streamstore.ErrStreamFull) {
		t.Fatalf("Produce past MaxLen = %v, want ErrStreamFull", err)
	}
	if ok, _ := e.st.SetNX(e.ctx, fresh, "probe", time.Minute); !ok {
		t.Error("a refused message created its bitmap")
	}
}

// testProduceBitmapTTL: a bitmap expires DedupTTL after the last append
// into it, so every append resets its TTL (even to a shorter one) and a
// repeat does not.
func testProduceBitmapTTL(t *testing.T, e *env) {
	stream := e.name("ingest")
	mustAppend := func(key string, bit uint16, ttl time.Duration) {
		t.Helper()
		if ok, err := e.produceBit(stream, key, bit, ttl, 0); !ok || err != nil {
			t.Fatalf("Produce(%s, bit %d) = %v, %v; want appended", key, bit, ok, err)
		}
	}
	eventuallyAppended := func(what, key string, bit uint16) {
		t.Helper()
		coretest.Eventually(t, wait, what, func() bool {
			ok, err := e.produceBit(stream, key, bit, time.Hour, 0)
			if err != nil {
				t.Fatalf("Produce: %v", err)
			}
			return ok
		})
		if ok, _ := e.produceBit(stream, key, bit, time.Hour, 0); ok {
			t.Errorf("%s: the bit set again after expiry did not take", what)
		}
	}

	expiring := e.name("seq-expiring")
	mustAppend(expiring, 1, 100*time.Millisecond)
	eventuallyAppended("the bitmap to expire", expiring, 1)

	// An append with a short TTL shortens the TTL of the bits before it:
	// the bitmap, not the bit, expires.
	shortened := e.name("seq-shortened")
	mustAppend(shortened, 0, time.Hour)
	mustAppend(shortened, 1, 100*time.Millisecond)
	eventuallyAppended("the whole bitmap to expire", shortened, 0)

	// A repeat refreshes nothing: with its long TTL the bitmap would
	// outlive the wait.
	repeated := e.name("seq-repeated")
	mustAppend(repeated, 0, 500*time.Millisecond)
	if ok, err := e.produceBit(stream, repeated, 0, time.Hour, 0); ok || err != nil {
		t.Fatalf("repeat = %v, %v; want a duplicate", ok, err)
	}
	eventuallyAppended("the bitmap to expire despite the repeat", repeated, 0)
}
