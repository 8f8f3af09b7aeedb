package store

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
	"github.com/edgeplat/edgeplat/core/db"
)

const testKid = "Ab12Cd34"

func v2Record(t testing.TB, seq uint64) Record {
	t.Helper()
	id, err := codec.FormatMsgID(testKid, seq)
	if err != nil {
		t.Fatal(err)
	}
	return Record{MsgID: id, Topic: "t", Payload: []byte(id)}
}

func v2Records(t testing.TB, from, to uint64) []Record {
	var out []Record
	for s := from; s <= to; s++ {
		out = append(out, v2Record(t, s))
	}
	return out
}

func msgIDs(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.MsgID
	}
	return out
}

func ranges(rs ...control.Range) control.Receipts {
	return control.Receipts{Keys: []control.KeyReceipt{{KID: testKid, Ranges: rs}}}
}

// TestReceiptsAwaitingSurviveRestart: records kept awaiting a receipt are
// in the file, so a restarted agent still holds them, sends them again
// once their wait is over, and deletes them on the receipt.
func TestReceiptsAwaitingSurviveRestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openStore(t, dir)
	q := newQueue(t, s, nil)
	retryAt := time.Now().Add(time.Hour)
	if err := q.KeepSent(ctx, 1, v2Records(t, 1, 5), retryAt); err != nil {
		t.Fatal(err)
	}
	// A queued record flushed and acknowledged awaits too.
	id, err := q.Enqueue(ctx, 1, v2Record(t, 6))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := q.MarkSent(ctx, 1, []int64{id}, retryAt); err != nil || n != 1 {
		t.Fatalf("MarkSent = %d, %v", n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = openStore(t, dir)
	q = newQueue(t, s, nil)
	st := stats(t, q, 1)
	if st.Records != 6 || st.Awaiting != 6 || st.Counters.Kept != 5 || st.Counters.Enqueued != 1 {
		t.Fatalf("after the restart: %+v", st)
	}
	// Not due before the wait is over, due after it, in order.
	if recs, err := q.Ready(ctx, 1, 100, time.Now()); err != nil || len(recs) != 0 {
		t.Fatalf("ready before the wait: %d, %v", len(recs), err)
	}
	recs, err := q.Ready(ctx, 1, 100, retryAt)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	var all []int64
	for _, r := range recs {
		got = append(got, r.MsgID)
		all = append(all, r.ID)
	}
	if want := msgIDs(v2Records(t, 1, 6)); !slices.Equal(got, want) {
		t.Fatalf("due after the wait %v, want %v", got, want)
	}
	if n, err := q.MarkSent(ctx, 1, all, retryAt.Add(time.Hour)); err != nil || n != 6 {
		t.Fatalf("MarkSent again = %d, %v", n, err)
	}
	if st := stats(t, q, 1); st.Counters.Resent != 6 || st.Awaiting != 6 {
		t.Fatalf("after the re-send: %+v", st)
	}
	n, err := q.ApplyReceipts(ctx, 1, ranges(control.Range{First: 1, Last: 2}, control.Range{First: 4, Last: 9}))
	if err != nil || n != 5 {
		t.Fatalf("ApplyReceipts = %d, %v; want 5", n, err)
	}
	st = stats(t, q, 1)
	if st.Records != 1 || st.Awaiting != 1 || st.Counters.Delivered != 5 || st.Counters.Receipted != 5 ||
		st.Bytes != int64(len(v2Record(t, 3).Payload)) {
		t.Fatalf("after the receipt: %+v", st)
	}
	if got := queuedMsgIDs(t, q, 1); !slices.Equal(got, msgIDs(v2Records(t, 3, 3))) {
		t.Fatalf("left %v", got)
	}
}

// TestReceiptsScope: a receipt deletes only its destination's records of
// its kid, also ones not sent yet, and ignores records without a v2
// msgId.
func TestReceiptsScope(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, openStore(t, t.TempDir()), nil)
	for _, rec := range append(v2Records(t, 1, 3), Record{MsgID: "local-1", Topic: "t", Payload: []byte("x")}) {
		for _, dest := range []int64{1, 2} {
			if _, err := q.Enqueue(ctx, dest, rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	other := control.Receipts{Keys: []control.KeyReceipt{{KID: "Zz99Yy88", Ranges: []control.Range{{First: 1, Last: 3}}}}}
	if n, err := q.ApplyReceipts(ctx, 1, other); err != nil || n != 0 {
		t.Fatalf("receipt of another kid deleted %d, %v", n, err)
	}
	if n, err := q.ApplyReceipts(ctx, 1, ranges(control.Range{First: 1, Last: 3})); err != nil || n != 3 {
		t.Fatalf("ApplyReceipts = %d, %v; want 3", n, err)
	}
	if got := queuedMsgIDs(t, q, 1); !slices.Equal(got, []string{"local-1"}) {
		t.Fatalf("destination 1 holds %v", got)
	}
	if got := queuedMsgIDs(t, q, 2); len(got) != 4 {
		t.Fatalf("destination 2 holds %v", got)
	}
	if st := stats(t, q, 1); st.Records != 1 || st.Awaiting != 0 || st.Counters.Receipted != 3 {
		t.Fatalf("%+v", st)
	}
}

// TestReceiptsCountAgainstLimits: awaiting records hold disk, so they
// count towards maxBufferRecords and are evicted oldest first like any
// record; the counters stay exact.
func TestReceiptsCountAgainstLimits(t *testing.T) {
	ctx := context.Background()
	q := newQueue(t, openStore(t, t.TempDir()), func(o *QueueOptions) { o.MaxBufferRecords = 4 })
	if err := q.KeepSent(ctx, 1, v2Records(t, 1, 3), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for _, rec := range v2Records(t, 4, 5) {
		if _, err := q.Enqueue(ctx, 1, rec); err != nil {
			t.Fatal(err)
		}
	}
	st := stats(t, q, 1)
	if st.Records != 4 || st.Awaiting != 2 || st.Counters.EvictedRecords != 1 {
		t.Fatalf("%+v", st)
	}
	if got, want := queuedMsgIDs(t, q, 1), msgIDs(v2Records(t, 2, 5)); !slices.Equal(got, want) {
		t.Fatalf("holds %v, want %v", got, want)
	}
	// Under dropPolicy error a direct send that does not fit is refused,
	// counted, and the rest of the batch is kept.
	qe := newQueue(t, openStore(t, t.TempDir()), func(o *QueueOptions) { o.MaxBufferRecords = 2; o.DropPolicy = DropError })
	err := qe.KeepSent(ctx, 1, v2Records(t, 1, 3), time.Now().Add(time.Hour))
	var full *FullError
	if !errors.As(err, &full) {
		t.Fatalf("KeepSent over the limit: %v", err)
	}
	if st := stats(t, qe, 1); st.Records != 2 || st.Awaiting != 2 || st.Counters.FullErrors != 1 || st.Counters.Kept != 2 {
		t.Fatalf("%+v", st)
	}
	// A rejection of a re-sent record ends its wait for a receipt.
	recs, err := qe.Ready(ctx, 1, 1, far.Add(time.Hour))
	if err != nil || len(recs) != 1 {
		t.Fatalf("ready: %d, %v", len(recs), err)
	}
	if _, err := qe.Reject(ctx, 1, recs[0].ID, "nope", time.Now()); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, qe, 1); st.Awaiting != 1 || st.Records != 2 {
		t.Fatalf("after a rejection: %+v", st)
	}
	if _, err := qe.Ack(ctx, 1, []int64{recs[0].ID + 1}); err != nil {
		t.Fatal(err)
	}
	if st := stats(t, qe, 1); st.Awaiting != 0 || st.Records != 1 {
		t.Fatalf("after an ack: %+v", st)
	}
}

// TestReceiptsMigrationIndexesQueuedRecords: records queued by an agent
// before receipts existed get their msgId's kid and sequence from the
// migration, so a receipt finds them like new ones.
func TestReceiptsMigrationIndexesQueuedRecords(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d, err := db.New(config.DB{Driver: "sqlite", SQLitePath: filepath.Join(dir, FileName), PoolSize: 2}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Open(ctx); err != nil {
		t.Fatal(err)
	}
	old := fstest.MapFS{}
	for _, name := range []string{"0001_init.sql", "0002_offline_queue.sql", "0003_publishing.sql"} {
		b, err := migrations.ReadFile("migrations/" + name)
		if err != nil {
			t.Fatal(err)
		}
		old["migrations/"+name] = &fstest.MapFile{Data: b}
	}
	if _, err := d.MigrateFS(ctx, old, "migrations"); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"v2_Ab12Cd34_7", "v2_Ab12Cd34_18446744073709551615", "local-1", "v2_Ab12Cd3_7", "v2_Ab12Cd34_7x"} {
		if _, err := d.SQL().ExecContext(ctx, `INSERT INTO offline_queue (destination, msg_id, topic, payload, size, next_attempt_at, created_at)
			VALUES (1, $1, 't', x'00', 1, 0, 0)`, id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := d.SQL().ExecContext(ctx, `INSERT INTO offline_queue_state (destination, records, bytes, enqueued) VALUES (1, 5, 5, 5)`); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}

	s := openStore(t, dir)
	q := newQueue(t, s, nil)
	n, err := q.ApplyReceipts(ctx, 1, ranges(control.Range{First: 1, Last: 1 << 62}))
	if err != nil || n != 1 {
		t.Fatalf("ApplyReceipts = %d, %v; want the one record of sequence 7", n, err)
	}
	got := queuedMsgIDs(t, q, 1)
	if want := []string{"v2_Ab12Cd34_18446744073709551615", "local-1", "v2_Ab12Cd3_7", "v2_Ab12Cd34_7x"}; !slices.Equal(got, want) {
		t.Fatalf("left %v, want %v", got, want)
	}
	if st := stats(t, q, 1); st.Records != 4 || st.Awaiting != 0 || st.Counters.Receipted != 1 {
		t.Fatalf("%+v", st)
	}
}
