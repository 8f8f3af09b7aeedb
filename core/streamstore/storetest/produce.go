package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

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
// same time land once.
func testProduceConcurrentDuplicates(t *testing.T, e *env) {
	stream, key := e.name("ingest"), e.name("msgid")
	var wg sync.WaitGroup
	var mu sync.Mutex
	appended := 0
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := e.st.Produce(e.ctx, streamstore.ProduceRequest{DedupKey: key, DedupTTL: time.Hour, Stream: stream,
				Entries: []map[string]string{{"data": "x"}}})
			if err != nil {
				t.Errorf("Produce: %v", err)
				return
			}
			if !res.Duplicate {
				mu.Lock()
				appended++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if appended != 1 {
		t.Errorf("%d of 20 concurrent copies appended, want 1", appended)
	}
}
