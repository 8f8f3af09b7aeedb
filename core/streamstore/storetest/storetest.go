// Package storetest is the contract suite every streamstore.Store must
// pass: the Redis and the in-process implementations run the same tests, so
// a role written against one behaves the same on the other.
//
// Tests run in parallel and may share one backend (one Redis): each uses
// names built from its own name and a random suffix, and deletes them at
// the end. Waits for asynchronous effects are bounded; nothing asserts how
// fast a store is.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// wait bounds every wait for something asynchronous. It is generous: it
// only turns a hang into a failure.
const wait = 10 * time.Second

// Run runs the contract suite. newStore returns the store for one test and
// arranges (with t.Cleanup) to close it; stores may share a backend.
func Run(t *testing.T, newStore func(t *testing.T) streamstore.Store) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, *env)
	}{
		{"AddReadAck", testAddReadAck},
		{"AddRejectsBadInput", testAddRejectsBadInput},
		{"IDsIncrease", testIDsIncrease},
		{"EnsureGroupIdempotent", testEnsureGroupIdempotent},
		{"EnsureGroupStartIDs", testEnsureGroupStartIDs},
		{"ConsumersGetDistinctEntries", testConsumersGetDistinctEntries},
		{"MissingGroup", testMissingGroup},
		{"ReadGroupEmpty", testReadGroupEmpty},
		{"BlockingReadWakesOnAdd", testBlockingReadWakesOnAdd},
		{"CancelEndsBlockingRead", testCancelEndsBlockingRead},
		{"CanceledContext", testCanceledContext},
		{"PendingEntriesAndDeliveries", testPendingEntriesAndDeliveries},
		{"AutoClaimAfterIdle", testAutoClaimAfterIdle},
		{"AutoClaimCursor", testAutoClaimCursor},
		{"AutoClaimDropsTrimmed", testAutoClaimDropsTrimmed},
		{"GroupInfo", testGroupInfo},
		{"LenAndRange", testLenAndRange},
		{"TrimMinIDExact", testTrimMinIDExact},
		{"SafeTrimKeepsUnacked", testSafeTrimKeepsUnacked},
		{"SafeTrimWhileProducing", testSafeTrimWhileProducing},
		{"MaxLenRefuses", testMaxLenRefuses},
		{"AddBatchAllOrNothing", testAddBatchAllOrNothing},
		{"SetNXWithTTL", testSetNXWithTTL},
		{"Produce", testProduce},
		{"ProduceConcurrentDuplicates", testProduceConcurrentDuplicates},
		{"ProduceBitmap", testProduceBitmap},
		{"ProduceBitmapOnlyAfterAppend", testProduceBitmapOnlyAfterAppend},
		{"ProduceBitmapTTL", testProduceBitmapTTL},
		{"ProduceBatch", testProduceBatch},
		{"ProduceBatchPublishes", testProduceBatchPublishes},
		{"ProduceBatchEmpty", testProduceBatchEmpty},
		{"ProduceBatchCanceled", testProduceBatchCanceled},
		{"PubSub", testPubSub},
		{"StreamsDiscovery", testStreamsDiscovery},
		{"Delete", testDelete},
		{"DeleteEndsBlockedRead", testDeleteEndsBlockedRead},
		{"MemoryAndPing", testMemoryAndPing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, newEnv(t, newStore(t)))
		})
	}
}

// env is one test's store and names.
type env struct {
	t      *testing.T
	st     streamstore.Store
	ctx    context.Context
	prefix string

	mu   sync.Mutex
	keys []string
}

func newEnv(t *testing.T, st streamstore.Store) *env {
	e := &env{t: t, st: st, ctx: t.Context(), prefix: uniquePrefix(t)}
	// Registered after newStore's cleanup, so it runs before the close.
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		defer cancel()
		if _, err := st.Delete(ctx, e.keys...); err != nil {
			t.Errorf("clean up %d keys: %v", len(e.keys), err)
		}
	})
	return e
}

// uniquePrefix is the test's name reduced to characters that are not glob
// syntax, plus a random suffix, so parallel tests and concurrent runs
// against one Redis never share a name. It is in braces, a Redis Cluster
// hash tag, so a test's keys share a slot as a tenant's keys do in
// production (docs/stream-store.md, "Redis Cluster"): on Cluster,
// Produce's mark and stream can then be one transaction.
func uniquePrefix(t testing.TB) string {
	var b strings.Builder
	b.WriteString("{storetest-")
	for _, r := range t.Name() {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	b.WriteByte('-')
	b.WriteString(hex.EncodeToString(rnd[:]))
	b.WriteByte('}')
	return b.String()
}

// name returns a unique key or channel name and deletes it at the end.
func (e *env) name(suffix string) string {
	n := e.prefix + ":" + suffix
	e.track(n)
	return n
}

func (e *env) track(n string) {
	e.mu.Lock()
	e.keys = append(e.keys, n)
	e.mu.Unlock()
}

// add appends n entries {"n": i} and returns their ids.
func (e *env) add(stream string, n int) []string {
	e.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := e.st.Add(e.ctx, stream, map[string]string{"n": strconv.Itoa(i), "payload": "x"}, 0)
		if err != nil {
			e.t.Fatalf("Add: %v", err)
		}
		ids[i] = id
	}
	return ids
}

func (e *env) ensureGroup(stream, group, start string) {
	e.t.Helper()
	if err := e.st.EnsureGroup(e.ctx, stream, group, start); err != nil {
		e.t.Fatalf("EnsureGroup(%s, %s, %q): %v", stream, group, start, err)
	}
}

func (e *env) read(stream, group, consumer string, count int) []streamstore.Entry {
	e.t.Helper()
	got, err := e.st.ReadGroup(e.ctx, stream, group, consumer, count, 0)
	if err != nil {
		e.t.Fatalf("ReadGroup(%s): %v", consumer, err)
	}
	return got
}

func (e *env) ack(stream, group string, ids ...string) int64 {
	e.t.Helper()
	n, err := e.st.Ack(e.ctx, stream, group, ids...)
	if err != nil {
		e.t.Fatalf("Ack: %v", err)
	}
	return n
}

func (e *env) group(stream, group string) streamstore.GroupInfo {
	e.t.Helper()
	info, err := e.st.Group(e.ctx, stream, group)
	if err != nil {
		e.t.Fatalf("Group: %v", err)
	}
	return info
}

func (e *env) length(stream string) int64 {
	e.t.Helper()
	n, err := e.st.Len(e.ctx, stream)
	if err != nil {
		e.t.Fatalf("Len: %v", err)
	}
	return n
}

func (e *env) rangeAll(stream string) []streamstore.Entry {
	e.t.Helper()
	got, err := e.st.Range(e.ctx, stream, "-", "+", 1<<20)
	if err != nil {
		e.t.Fatalf("Range: %v", err)
	}
	return got
}

// safeTrim trims stream to group's SafeTrimID and returns how many went.
func (e *env) safeTrim(stream, group string) int64 {
	e.t.Helper()
	id, err := e.st.SafeTrimID(e.ctx, stream, group)
	if err != nil {
		e.t.Fatalf("SafeTrimID: %v", err)
	}
	n, err := e.st.TrimMinID(e.ctx, stream, id)
	if err != nil {
		e.t.Fatalf("TrimMinID(%s): %v", id, err)
	}
	return n
}

func ids(entries []streamstore.Entry) []string {
	out := make([]string, len(entries))
	for i, en := range entries {
		out[i] = en.ID
	}
	return out
}

func isCanceled(err error) bool {
	return errors.Is(err, context.Canceled)
}
