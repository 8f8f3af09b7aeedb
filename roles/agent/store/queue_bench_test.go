package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/control"
)

// openStore is open for benchmarks.
func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func BenchmarkEnqueue(b *testing.B) {
	ctx := context.Background()
	q := newQueue(b, openStore(b, b.TempDir()), func(o *QueueOptions) { o.MaxBufferRecords = 1 << 30; o.MaxBufferBytes = 1 << 40 })
	payload := make([]byte, 1024)
	n := 0
	for b.Loop() {
		n++
		if _, err := q.Enqueue(ctx, 1, Record{MsgID: "m", Topic: "t", Payload: payload}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkKeepSent is the direct-mode cost of delivery receipts: batches
// of 64 acknowledged records of 1 KB kept as awaiting in one transaction
// each, and one receipt deleting them for every 16 batches.
func BenchmarkKeepSent(b *testing.B) {
	ctx := context.Background()
	q := newQueue(b, openStore(b, b.TempDir()), func(o *QueueOptions) { o.MaxBufferRecords = 1 << 30; o.MaxBufferBytes = 1 << 40 })
	payload := make([]byte, 1024)
	retryAt := time.Now().Add(time.Hour)
	var seq uint64
	recs := make([]Record, 64)
	for b.Loop() {
		first := seq + 1
		for i := range recs {
			seq++
			recs[i] = Record{MsgID: mustMsgID(b, seq), Topic: "t", Payload: payload}
		}
		if err := q.KeepSent(ctx, 1, recs, retryAt); err != nil {
			b.Fatal(err)
		}
		if (seq/64)%16 == 0 {
			if _, err := q.ApplyReceipts(ctx, 1, control.Receipts{Keys: []control.KeyReceipt{{KID: "BenchKid", Ranges: []control.Range{{First: first - 15*64, Last: seq}}}}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(seq)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDrain10k drains a backlog of 10,000 records of 1 KB in
// flushBatchSize batches; only the drain is timed. Without receipts a
// delivered batch is deleted; with them it is marked awaiting, and one
// receipt for every ten batches deletes what was sent so far.
func BenchmarkDrain10k(b *testing.B) {
	for _, receipts := range []bool{false, true} {
		b.Run(fmt.Sprintf("receipts=%t", receipts), func(b *testing.B) { benchDrain(b, receipts) })
	}
}

func benchDrain(b *testing.B, receipts bool) {
	ctx := context.Background()
	q := newQueue(b, openStore(b, b.TempDir()), nil)
	payload := make([]byte, 1024)
	batch := q.Options().FlushBatchSize
	drained := 0
	var seq uint64
	receipt := func(first, last uint64) {
		if _, err := q.ApplyReceipts(ctx, 1, control.Receipts{Keys: []control.KeyReceipt{{KID: "BenchKid", Ranges: []control.Range{{First: first, Last: last}}}}}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		from := seq + 1
		for range 10000 {
			seq++
			if _, err := q.Enqueue(ctx, 1, Record{MsgID: mustMsgID(b, seq), Topic: "t", Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		retryAt := time.Now().Add(time.Hour)
		sent := from - 1 // the records are sent in sequence order
		for n := 1; ; n++ {
			recs, err := q.Ready(ctx, 1, batch, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			if len(recs) == 0 {
				break
			}
			ids := make([]int64, len(recs))
			for j, r := range recs {
				ids[j] = r.ID
			}
			if receipts {
				_, err = q.MarkSent(ctx, 1, ids, retryAt)
			} else {
				_, err = q.Ack(ctx, 1, ids)
			}
			if err != nil {
				b.Fatal(err)
			}
			drained += len(recs)
			sent += uint64(len(recs))
			if receipts && n%10 == 0 {
				receipt(from, sent)
			}
		}
		if receipts {
			receipt(from, seq)
		}
	}
	b.ReportMetric(float64(drained)/b.Elapsed().Seconds(), "records/s")
}

func mustMsgID(b *testing.B, seq uint64) string {
	id, err := codec.FormatMsgID("BenchKid", seq)
	if err != nil {
		b.Fatal(err)
	}
	return id
}
