package store

import (
	"context"
	"testing"
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

// BenchmarkDrain10k drains a backlog of 10,000 records of 1 KB in
// flushBatchSize batches; only the drain is timed.
func BenchmarkDrain10k(b *testing.B) {
	ctx := context.Background()
	q := newQueue(b, openStore(b, b.TempDir()), nil)
	payload := make([]byte, 1024)
	batch := q.Options().FlushBatchSize
	drained := 0
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		for range 10000 {
			if _, err := q.Enqueue(ctx, 1, Record{MsgID: "m", Topic: "t", Payload: payload}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for {
			recs, err := q.Ready(ctx, 1, batch, far)
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
			if _, err := q.Ack(ctx, 1, ids); err != nil {
				b.Fatal(err)
			}
			drained += len(recs)
		}
	}
	b.ReportMetric(float64(drained)/b.Elapsed().Seconds(), "records/s")
}
