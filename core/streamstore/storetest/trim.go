package storetest

import (
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

func testLenAndRange(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 6)
	if n := e.length(s); n != 6 {
		t.Errorf("Len = %d, want 6", n)
	}
	ms := func(id string) string { p, _ := streamstore.ParseID(id); return strconv.FormatUint(p.MS, 10) }
	tests := []struct {
		start, end string
		count      int
		want       []string
	}{
		{"-", "+", 100, added},
		{"-", "+", 2, added[:2]},
		{added[1], added[3], 100, added[1:4]},
		{"(" + added[1], "(" + added[4], 100, added[2:4]},
		{added[5], "+", 100, added[5:]},
		{"(" + added[5], "+", 100, nil},
		{"-", "(" + added[0], 100, nil},
		{ms(added[0]), "+", 100, added}, // a bare ms starts at seq 0
		{"-", ms(added[5]), 100, added}, // and ends at the last seq
		{"-", "+", 0, added},            // DefaultCount
		{added[3], added[1], 100, nil},  // empty interval
		{"0-1", "1-0", 100, nil},
	}
	for _, tt := range tests {
		got, err := e.st.Range(e.ctx, s, tt.start, tt.end, tt.count)
		if err != nil || !slices.Equal(ids(got), tt.want) {
			t.Errorf("Range(%s, %s, %d) = %v, %v; want %v", tt.start, tt.end, tt.count, ids(got), err, tt.want)
		}
	}
	if got, _ := e.st.Range(e.ctx, s, added[2], added[2], 1); len(got) != 1 || got[0].Values["n"] != "2" {
		t.Errorf("Range of one id = %v", got)
	}
	if _, err := e.st.Range(e.ctx, s, "bogus", "+", 1); err == nil {
		t.Error("Range accepted a malformed bound")
	}
}

func testTrimMinIDExact(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 300)
	n, err := e.st.TrimMinID(e.ctx, s, added[123])
	if err != nil || n != 123 {
		t.Fatalf("TrimMinID(%s) = %d, %v; want exactly 123", added[123], n, err)
	}
	if got := e.rangeAll(s); len(got) != 177 || got[0].ID != added[123] {
		t.Fatalf("after trim: %d entries from %v, want 177 from %s", len(got), ids(got[:1]), added[123])
	}
	if n, err := e.st.TrimMinID(e.ctx, s, added[123]); n != 0 || err != nil {
		t.Errorf("repeating TrimMinID = %d, %v; want 0", n, err)
	}
	if n, err := e.st.TrimMinID(e.ctx, s, streamstore.MaxID.String()); n != 177 || err != nil {
		t.Errorf("TrimMinID(max) = %d, %v; want 177", n, err)
	}
	// An emptied stream still exists and keeps generating larger ids.
	if got, _ := e.st.Streams(e.ctx, s); !slices.Equal(got, []string{s}) {
		t.Errorf("Streams after trimming to empty = %v", got)
	}
	next := e.add(s, 1)
	if c, _ := streamstore.CompareIDs(next[0], added[299]); c != 1 {
		t.Errorf("id after trimming %s is not above the last %s", next[0], added[299])
	}
}

func testSafeTrimKeepsUnacked(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 10)
	e.ensureGroup(s, "g", "0")

	// Nothing delivered: nothing may go.
	if n := e.safeTrim(s, "g"); n != 0 {
		t.Fatalf("SafeTrim before any read trimmed %d", n)
	}
	if id, _ := e.st.SafeTrimID(e.ctx, s, "g"); id != "0-1" {
		t.Errorf("SafeTrimID before any read = %s, want 0-1", id)
	}
	// Delivered 0..5, acknowledged all but 2 and 4: only 0 and 1 may go.
	e.read(s, "g", "c", 6)
	e.ack(s, "g", added[0], added[1], added[3], added[5])
	if id, _ := e.st.SafeTrimID(e.ctx, s, "g"); id != added[2] {
		t.Errorf("SafeTrimID = %s, want the oldest pending %s", id, added[2])
	}
	if n := e.safeTrim(s, "g"); n != 2 {
		t.Errorf("SafeTrim trimmed %d, want 2", n)
	}
	// Everything delivered and acknowledged: up to the last delivered one
	// may go, the undelivered ones stay.
	e.ack(s, "g", added[2], added[4])
	last, _ := streamstore.NextID(added[5])
	if id, _ := e.st.SafeTrimID(e.ctx, s, "g"); id != last {
		t.Errorf("SafeTrimID with nothing pending = %s, want last delivered + 1 = %s", id, last)
	}
	e.safeTrim(s, "g")
	if got := ids(e.rangeAll(s)); !slices.Equal(got, added[6:]) {
		t.Errorf("after trimming: %v, want the undelivered %v", got, added[6:])
	}
	if got := e.read(s, "g", "c", 10); !slices.Equal(ids(got), added[6:]) {
		t.Errorf("undelivered entries after trims: %v", ids(got))
	}
}

// testSafeTrimWhileProducing runs producers, a slow consumer that leaves
// some entries unacknowledged, and a trimmer all at once, then checks no
// entry the group still needs was trimmed.
func testSafeTrimWhileProducing(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "0")
	const producers, perProducer = 3, 60

	var (
		mu       sync.Mutex
		produced []string
		wg       sync.WaitGroup
	)
	produce := func() {
		wg.Add(producers)
		for p := range producers {
			go func() {
				defer wg.Done()
				for i := range perProducer {
					id, err := e.st.Add(e.ctx, s, map[string]string{"p": strconv.Itoa(p), "i": strconv.Itoa(i)}, 0)
					if err != nil {
						t.Errorf("Add: %v", err)
						return
					}
					mu.Lock()
					produced = append(produced, id)
					mu.Unlock()
				}
			}()
		}
	}
	stopTrim := make(chan struct{})
	trimDone := make(chan struct{})
	go func() {
		defer close(trimDone)
		for {
			select {
			case <-stopTrim:
				return
			default:
			}
			id, err := e.st.SafeTrimID(e.ctx, s, "g")
			if err != nil {
				t.Errorf("SafeTrimID: %v", err)
				return
			}
			if _, err := e.st.TrimMinID(e.ctx, s, id); err != nil {
				t.Errorf("TrimMinID: %v", err)
				return
			}
		}
	}()

	// Phase 1: the consumer is stopped; the trimmer must not remove anything.
	produce()
	wg.Wait()
	if n := e.length(s); n != producers*perProducer {
		t.Fatalf("with the consumer stopped, Len = %d, want %d: something trimmed undelivered entries", n, producers*perProducer)
	}

	// Phase 2: producers continue; the consumer reads in small batches and
	// leaves every fifth entry unacknowledged.
	produce()
	var unacked []string
	delivered := 0
	for {
		got, err := e.st.ReadGroup(e.ctx, s, "g", "c", 7, 0)
		if err != nil {
			t.Fatalf("ReadGroup: %v", err)
		}
		if len(got) == 0 {
			if delivered == 2*producers*perProducer {
				break
			}
			continue // producers still running; the trimmer keeps going
		}
		var ack []string
		for _, en := range got {
			if delivered%5 == 0 {
				unacked = append(unacked, en.ID)
			} else {
				ack = append(ack, en.ID)
			}
			delivered++
		}
		e.ack(s, "g", ack...)
	}
	wg.Wait()
	close(stopTrim)
	<-trimDone
	e.safeTrim(s, "g")

	remaining := map[string]bool{}
	for _, en := range e.rangeAll(s) {
		remaining[en.ID] = true
	}
	for _, id := range unacked {
		if !remaining[id] {
			t.Errorf("unacknowledged entry %s was trimmed", id)
		}
	}
	slices.SortFunc(unacked, func(a, b string) int { c, _ := streamstore.CompareIDs(a, b); return c })
	if got := e.rangeAll(s); len(got) == 0 || got[0].ID != unacked[0] {
		t.Errorf("after the final trim the stream starts at %v, want the oldest unacknowledged %s", ids(got[:min(1, len(got))]), unacked[0])
	}
	// Every pending entry can still be claimed with its values: none was
	// trimmed behind the PEL's back.
	var claimed []string
	cursor := "0-0"
	for {
		c, next, err := e.st.AutoClaim(e.ctx, s, "g", "rescuer", 0, cursor, 50)
		if err != nil {
			t.Fatalf("AutoClaim: %v", err)
		}
		for _, en := range c {
			if en.Values["p"] == "" {
				t.Errorf("claimed %s without its values", en.ID)
			}
		}
		claimed = append(claimed, ids(c)...)
		if cursor = next; cursor == "0-0" {
			break
		}
	}
	if !slices.Equal(claimed, unacked) {
		t.Errorf("claimed %d of %d unacknowledged entries", len(claimed), len(unacked))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(produced) != 2*producers*perProducer {
		t.Errorf("produced %d", len(produced))
	}
}

func testMaxLenRefuses(t *testing.T, e *env) {
	s := e.name("s")
	const maxLen = 10
	e.ensureGroup(s, "g", "0")
	// Producers keep adding while the consumer is stopped: the stream fills
	// up and refuses; nothing is evicted.
	var added []string
	for i := range maxLen + 5 {
		id, err := e.st.Add(e.ctx, s, map[string]string{"i": strconv.Itoa(i)}, maxLen)
		if i < maxLen {
			if err != nil {
				t.Fatalf("Add %d: %v", i, err)
			}
			added = append(added, id)
			continue
		}
		if !errors.Is(err, streamstore.ErrStreamFull) {
			t.Fatalf("Add %d to a full stream: %q, %v; want ErrStreamFull", i, id, err)
		}
	}
	if got := ids(e.rangeAll(s)); !slices.Equal(got, added) {
		t.Fatalf("a full stream lost entries: %v", got)
	}
	if n := e.safeTrim(s, "g"); n != 0 {
		t.Fatalf("SafeTrim with the consumer stopped trimmed %d", n)
	}
	// The consumer processes 4 and acknowledges 3: exactly 3 slots free up.
	e.read(s, "g", "c", 4)
	e.ack(s, "g", added[:3]...)
	if n := e.safeTrim(s, "g"); n != 3 {
		t.Fatalf("SafeTrim trimmed %d, want 3", n)
	}
	for i := range 3 {
		if _, err := e.st.Add(e.ctx, s, map[string]string{"more": strconv.Itoa(i)}, maxLen); err != nil {
			t.Fatalf("Add after trimming: %v", err)
		}
	}
	if _, err := e.st.Add(e.ctx, s, map[string]string{"x": "y"}, maxLen); !errors.Is(err, streamstore.ErrStreamFull) {
		t.Errorf("Add past maxLen again: %v, want ErrStreamFull", err)
	}
	// Without maxLen there is no limit.
	if _, err := e.st.Add(e.ctx, s, map[string]string{"x": "y"}, 0); err != nil {
		t.Errorf("Add without maxLen: %v", err)
	}

	// Concurrent producers cannot overshoot: the check and the append are
	// one step.
	c := e.name("concurrent")
	var wg sync.WaitGroup
	var mu sync.Mutex
	ok := 0
	for range 8 {
		wg.Go(func() {
			for range 10 {
				_, err := e.st.Add(e.ctx, c, map[string]string{"a": "b"}, 25)
				if err != nil && !errors.Is(err, streamstore.ErrStreamFull) {
					t.Errorf("Add: %v", err)
				}
				if err == nil {
					mu.Lock()
					ok++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if n := e.length(c); n != 25 || ok != 25 {
		t.Errorf("80 concurrent Adds with maxLen 25: %d succeeded, Len %d; want 25", ok, n)
	}
}

func testAddBatchAllOrNothing(t *testing.T, e *env) {
	s := e.name("s")
	batch := func(n int) []map[string]string {
		b := make([]map[string]string, n)
		for i := range b {
			b[i] = map[string]string{"i": strconv.Itoa(i)}
		}
		return b
	}
	first, err := e.st.AddBatch(e.ctx, s, batch(8), 10)
	if err != nil || len(first) != 8 {
		t.Fatalf("AddBatch(8) = %v, %v", first, err)
	}
	if _, err := e.st.AddBatch(e.ctx, s, batch(3), 10); !errors.Is(err, streamstore.ErrStreamFull) {
		t.Errorf("AddBatch past maxLen: %v, want ErrStreamFull", err)
	}
	if n := e.length(s); n != 8 {
		t.Errorf("a refused AddBatch added entries: Len = %d, want 8", n)
	}
	more, err := e.st.AddBatch(e.ctx, s, batch(2), 10)
	if err != nil || len(more) != 2 {
		t.Fatalf("AddBatch(2) up to maxLen = %v, %v", more, err)
	}
	got := e.rangeAll(s)
	if !slices.Equal(ids(got), append(first, more...)) {
		t.Errorf("AddBatch ids %v do not match the stream %v", append(first, more...), ids(got))
	}
	for i, en := range got[:8] {
		if en.Values["i"] != strconv.Itoa(i) {
			t.Errorf("entry %d = %v: batch order not kept", i, en.Values)
		}
	}
	if none, err := e.st.AddBatch(e.ctx, s, nil, 10); err != nil || len(none) != 0 {
		t.Errorf("empty AddBatch = %v, %v", none, err)
	}
}
