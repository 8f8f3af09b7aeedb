package storetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

func testAddReadAck(t *testing.T, e *env) {
	s := e.name("s")
	want := []map[string]string{
		{"agentUuid": "a1", "data": "one"},
		{"agentUuid": "a2", "data": ""},
		{"data": "three", "unicode": "ünï"},
	}
	var added []string
	for _, v := range want {
		id, err := e.st.Add(e.ctx, s, v, 0)
		if err != nil {
			t.Fatalf("Add: %v", err)
		}
		added = append(added, id)
	}
	e.ensureGroup(s, "g", "0")
	got := e.read(s, "g", "c1", 10)
	if !slices.Equal(ids(got), added) {
		t.Fatalf("ReadGroup ids = %v, want %v", ids(got), added)
	}
	for i := range got {
		if !maps.Equal(got[i].Values, want[i]) {
			t.Errorf("entry %d values = %v, want %v", i, got[i].Values, want[i])
		}
	}
	// Values handed out are the caller's to keep: changing them must not
	// change the stream.
	got[0].Values["data"] = "changed"
	if r := e.rangeAll(s); r[0].Values["data"] != "one" {
		t.Errorf("changing a returned entry changed the stream: %v", r[0].Values)
	}
	if again := e.read(s, "g", "c1", 10); len(again) != 0 {
		t.Errorf("entries delivered twice: %v", ids(again))
	}
	if n := e.ack(s, "g", added...); n != 3 {
		t.Errorf("Ack = %d, want 3", n)
	}
	if n := e.ack(s, "g", added...); n != 0 {
		t.Errorf("second Ack = %d, want 0", n)
	}
	if n := e.ack(s, "g"); n != 0 {
		t.Errorf("Ack of no ids = %d", n)
	}
	if info := e.group(s, "g"); info.Pending != 0 {
		t.Errorf("Pending after ack = %d", info.Pending)
	}
	if n := e.length(s); n != 3 {
		t.Errorf("Len = %d: acknowledging must not remove entries", n)
	}
}

func testAddRejectsBadInput(t *testing.T, e *env) {
	s, k := e.name("s"), e.name("k")
	if _, err := e.st.Add(e.ctx, s, map[string]string{}, 0); err == nil {
		t.Error("Add with no fields succeeded")
	}
	if _, err := e.st.AddBatch(e.ctx, s, []map[string]string{{"a": "1"}, nil}, 0); err == nil {
		t.Error("AddBatch with an empty entry succeeded")
	}
	if n := e.length(s); n != 0 {
		t.Errorf("a refused AddBatch added %d entries", n)
	}
	if ok, err := e.st.SetNX(e.ctx, k, "v", 0); !ok || err != nil {
		t.Fatalf("SetNX = %v, %v", ok, err)
	}
	if _, err := e.st.Add(e.ctx, k, map[string]string{"a": "1"}, 0); err == nil {
		t.Error("Add to a plain key succeeded")
	}
	e.ensureGroup(s, "g", "0")
	if _, err := e.st.Ack(e.ctx, s, "g", "not-an-id"); err == nil {
		t.Error("Ack of a malformed id succeeded")
	}
	if _, err := e.st.TrimMinID(e.ctx, s, "nope"); err == nil {
		t.Error("TrimMinID with a malformed id succeeded")
	}
	e.add(s, 1)
	if ok, err := e.st.SetNX(e.ctx, s, "v", 0); ok || err != nil {
		t.Errorf("SetNX on a stream's name = %v, %v; want false: one keyspace", ok, err)
	}
}

func testIDsIncrease(t *testing.T, e *env) {
	s := e.name("s")
	before := time.Now()
	added := e.add(s, 50)
	batch, err := e.st.AddBatch(e.ctx, s, []map[string]string{{"a": "1"}, {"a": "2"}, {"a": "3"}}, 0)
	if err != nil {
		t.Fatalf("AddBatch: %v", err)
	}
	added = append(added, batch...)
	for i := 1; i < len(added); i++ {
		if c, err := streamstore.CompareIDs(added[i-1], added[i]); err != nil || c != -1 {
			t.Fatalf("ids not increasing: %s then %s (%v)", added[i-1], added[i], err)
		}
	}
	// The id carries the time of the append (by the store's clock, which
	// for these tests is this machine's).
	at, err := streamstore.IDTime(added[0])
	if err != nil || at.Before(before.Add(-time.Minute)) || at.After(time.Now().Add(time.Minute)) {
		t.Errorf("IDTime(%s) = %v, %v; want about %v", added[0], at, err, before)
	}
	if !slices.Equal(ids(e.rangeAll(s)), added) {
		t.Error("Range does not return the entries in id order")
	}
}

func testEnsureGroupIdempotent(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "0") // creates the stream
	if n := e.length(s); n != 0 {
		t.Fatalf("Len of a stream made by EnsureGroup = %d", n)
	}
	added := e.add(s, 2)
	e.read(s, "g", "c", 1)
	e.ensureGroup(s, "g", "0") // existing group: left alone
	e.ensureGroup(s, "g", "$")
	info := e.group(s, "g")
	if info.LastDeliveredID != added[0] || info.Pending != 1 {
		t.Errorf("EnsureGroup on an existing group changed it: %+v", info)
	}
	if got := e.read(s, "g", "c", 10); !slices.Equal(ids(got), added[1:]) {
		t.Errorf("after repeated EnsureGroup, read %v; want %v", ids(got), added[1:])
	}
}

func testEnsureGroupStartIDs(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 3)
	e.ensureGroup(s, "all", "")
	e.ensureGroup(s, "new", "$")
	e.ensureGroup(s, "after-first", added[0])
	if got := e.read(s, "all", "c", 10); !slices.Equal(ids(got), added) {
		t.Errorf(`group from "" read %v; want every entry %v`, ids(got), added)
	}
	if got := e.read(s, "new", "c", 10); len(got) != 0 {
		t.Errorf(`group from "$" read old entries %v`, ids(got))
	}
	if got := e.read(s, "after-first", "c", 10); !slices.Equal(ids(got), added[1:]) {
		t.Errorf("group from %s read %v", added[0], ids(got))
	}
	later := e.add(s, 1)
	if got := e.read(s, "new", "c", 10); !slices.Equal(ids(got), later) {
		t.Errorf(`group from "$" read %v; want the new entry %v`, ids(got), later)
	}
	if err := e.st.EnsureGroup(e.ctx, s, "bad", "x-y"); err == nil {
		t.Error("EnsureGroup accepted a malformed start id")
	}
}

func testConsumersGetDistinctEntries(t *testing.T, e *env) {
	s := e.name("s")
	added := e.add(s, 5)
	e.ensureGroup(s, "g", "0")
	first := e.read(s, "g", "c1", 2)
	second := e.read(s, "g", "c2", 10)
	if !slices.Equal(ids(first), added[:2]) || !slices.Equal(ids(second), added[2:]) {
		t.Fatalf("c1 got %v, c2 got %v; want %v split 2/3", ids(first), ids(second), added)
	}
	if more := e.read(s, "g", "c1", 10); len(more) != 0 {
		t.Errorf("c1 got entries already delivered to c2: %v", ids(more))
	}
	pending, err := e.st.PendingEntries(e.ctx, s, "g", 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pending {
		want := "c2"
		if slices.Contains(added[:2], p.ID) {
			want = "c1"
		}
		if p.Consumer != want {
			t.Errorf("pending %s held by %s, want %s", p.ID, p.Consumer, want)
		}
	}
	// Another group sees every entry again.
	e.ensureGroup(s, "other", "0")
	if got := e.read(s, "other", "c1", 10); len(got) != 5 {
		t.Errorf("second group read %d entries, want 5", len(got))
	}
}

func testMissingGroup(t *testing.T, e *env) {
	s, missing := e.name("s"), e.name("missing")
	e.add(s, 1)
	for _, stream := range []string{s, missing} {
		if _, err := e.st.ReadGroup(e.ctx, stream, "nog", "c", 1, 0); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("ReadGroup(%s): %v, want ErrNoGroup", stream, err)
		}
		if _, err := e.st.ReadGroup(e.ctx, stream, "nog", "c", 1, time.Second); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("blocking ReadGroup(%s): %v, want ErrNoGroup at once", stream, err)
		}
		if _, err := e.st.Group(e.ctx, stream, "nog"); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("Group(%s): %v, want ErrNoGroup", stream, err)
		}
		if _, err := e.st.PendingEntries(e.ctx, stream, "nog", 10); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("PendingEntries(%s): %v, want ErrNoGroup", stream, err)
		}
		if _, err := e.st.SafeTrimID(e.ctx, stream, "nog"); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("SafeTrimID(%s): %v, want ErrNoGroup", stream, err)
		}
		if _, _, err := e.st.AutoClaim(e.ctx, stream, "nog", "c", 0, "0-0", 10); !errors.Is(err, streamstore.ErrNoGroup) {
			t.Errorf("AutoClaim(%s): %v, want ErrNoGroup", stream, err)
		}
		if n, err := e.st.Ack(e.ctx, stream, "nog", "1-1"); n != 0 || err != nil {
			t.Errorf("Ack(%s) = %d, %v; want 0, nil", stream, n, err)
		}
	}
	if n := e.length(missing); n != 0 {
		t.Errorf("Len of a missing stream = %d", n)
	}
	if got, err := e.st.Range(e.ctx, missing, "-", "+", 10); len(got) != 0 || err != nil {
		t.Errorf("Range of a missing stream = %v, %v", got, err)
	}
	if n, err := e.st.TrimMinID(e.ctx, missing, "5-0"); n != 0 || err != nil {
		t.Errorf("TrimMinID of a missing stream = %d, %v", n, err)
	}
}

func testReadGroupEmpty(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "$")
	for _, block := range []time.Duration{0, -1, 30 * time.Millisecond} {
		got, err := e.st.ReadGroup(e.ctx, s, "g", "c", 10, block)
		if err != nil || len(got) != 0 {
			t.Errorf("ReadGroup(block %v) on an empty stream = %v, %v; want nothing, nil", block, got, err)
		}
	}
}

type readResult struct {
	entries []streamstore.Entry
	err     error
}

func testBlockingReadWakesOnAdd(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "$")
	done := make(chan readResult, 2)
	for _, c := range []string{"c1", "c2"} {
		go func() {
			got, err := e.st.ReadGroup(e.ctx, s, "g", c, 10, time.Minute)
			done <- readResult{got, err}
		}()
	}
	time.Sleep(50 * time.Millisecond) // most likely blocked by now; either way the read must return the entry
	added := e.add(s, 1)
	select {
	case r := <-done:
		if r.err != nil || !slices.Equal(ids(r.entries), added) {
			t.Fatalf("woken ReadGroup = %v, %v; want %v", ids(r.entries), r.err, added)
		}
	case <-time.After(wait):
		t.Fatal("a blocked ReadGroup did not wake on Add")
	}
	// The other reader keeps waiting, and gets the next entry.
	more := e.add(s, 1)
	select {
	case r := <-done:
		if r.err != nil || !slices.Equal(ids(r.entries), more) {
			t.Fatalf("second blocked ReadGroup = %v, %v; want %v", ids(r.entries), r.err, more)
		}
	case <-time.After(wait):
		t.Fatal("the second blocked ReadGroup did not wake on Add")
	}
}

func testCancelEndsBlockingRead(t *testing.T, e *env) {
	s := e.name("s")
	e.ensureGroup(s, "g", "$")

	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan readResult, 1)
	go func() {
		got, err := e.st.ReadGroup(ctx, s, "g", "c", 10, time.Hour)
		done <- readResult{got, err}
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case r := <-done:
		if !errors.Is(r.err, context.Canceled) {
			t.Errorf("cancelled ReadGroup = %v, %v; want context.Canceled", r.entries, r.err)
		}
	case <-time.After(wait):
		t.Fatal("cancelling ctx did not end a blocking ReadGroup")
	}

	dctx, dcancel := context.WithTimeout(e.ctx, 100*time.Millisecond)
	defer dcancel()
	_, err := e.st.ReadGroup(dctx, s, "g", "c", 10, time.Hour)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("ReadGroup past ctx's deadline = %v; want DeadlineExceeded", err)
	}
	// The store still works after abandoned reads.
	added := e.add(s, 1)
	if got := e.read(s, "g", "c", 10); !slices.Equal(ids(got), added) {
		t.Errorf("read after cancellations = %v, want %v", ids(got), added)
	}
}

func testCanceledContext(t *testing.T, e *env) {
	s, k := e.name("s"), e.name("k")
	e.add(s, 1)
	e.ensureGroup(s, "g", "0")
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	check := func(op string, err error) {
		t.Helper()
		if !isCanceled(err) {
			t.Errorf("%s with a cancelled ctx: %v, want context.Canceled", op, err)
		}
	}
	_, err := e.st.Add(ctx, s, map[string]string{"a": "1"}, 0)
	check("Add", err)
	_, err = e.st.ReadGroup(ctx, s, "g", "c", 1, time.Second)
	check("ReadGroup", err)
	_, err = e.st.Ack(ctx, s, "g", "1-1")
	check("Ack", err)
	_, _, err = e.st.AutoClaim(ctx, s, "g", "c", 0, "0-0", 1)
	check("AutoClaim", err)
	_, err = e.st.SafeTrimID(ctx, s, "g")
	check("SafeTrimID", err)
	_, err = e.st.Len(ctx, s)
	check("Len", err)
	_, err = e.st.SetNX(ctx, k, "v", time.Second)
	check("SetNX", err)
	err = e.st.Publish(ctx, k, []byte("x"))
	check("Publish", err)
	_, err = e.st.Subscribe(ctx, k)
	check("Subscribe", err)
	_, err = e.st.Streams(ctx, e.prefix+"*")
	check("Streams", err)
	check("Ping", e.st.Ping(ctx))
	if n := e.length(s); n != 1 {
		t.Errorf("a cancelled Add appended: Len = %d", n)
	}
}
