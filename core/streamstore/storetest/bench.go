package storetest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// BenchAddReadAck measures one ingestion round on st: append a batch of 100
// entries of about 2 KB (as AddBatch, and as 100 Adds), read them through a
// consumer group, acknowledge them and trim them away, so the stream stays
// small however long the benchmark runs.
func BenchAddReadAck(b *testing.B, st streamstore.Store) {
	const batchSize = 100
	payload := strings.Repeat("x", 2000)
	batch := make([]map[string]string, batchSize)
	for i := range batch {
		batch[i] = map[string]string{"agentUuid": "AAAAAAAAAAAAAAAAAAAAAA", "seq": strconv.Itoa(i), "data": payload}
	}
	for _, mode := range []string{"AddBatch", "Add"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			stream := uniquePrefix(b) + ":bench"
			b.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				_, _ = st.Delete(ctx, stream)
			})
			if err := st.EnsureGroup(ctx, stream, "g", "0"); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(batchSize * (len(payload) + 40)))
			b.ReportAllocs()
			ids := make([]string, 0, batchSize)
			for b.Loop() {
				if mode == "AddBatch" {
					if _, err := st.AddBatch(ctx, stream, batch, 0); err != nil {
						b.Fatal(err)
					}
				} else {
					for _, v := range batch {
						if _, err := st.Add(ctx, stream, v, 0); err != nil {
							b.Fatal(err)
						}
					}
				}
				ids = ids[:0]
				for len(ids) < batchSize {
					got, err := st.ReadGroup(ctx, stream, "g", "c", batchSize, time.Second)
					if err != nil || len(got) == 0 {
						b.Fatalf("ReadGroup = %d entries, %v", len(got), err)
					}
					for _, en := range got {
						ids = append(ids, en.ID)
					}
				}
				if n, err := st.Ack(ctx, stream, "g", ids...); err != nil || n != batchSize {
					b.Fatalf("Ack = %d, %v", n, err)
				}
				next, _ := streamstore.NextID(ids[len(ids)-1])
				if _, err := st.TrimMinID(ctx, stream, next); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchProduceBatch measures the Cloud API's writes for 32 MQTT messages of
// about 3 KB each, every one with its own bit of a de-duplication bitmap,
// as one ProduceBatch and as 32 Produces. Every 64 rounds the stream and
// the bitmap are deleted, so memory stays bounded and no bit repeats.
func BenchProduceBatch(b *testing.B, st streamstore.Store) {
	const batchSize, roundsPerKey = 32, 64
	payload := strings.Repeat("x", 3000)
	for _, mode := range []string{"ProduceBatch", "Produce"} {
		b.Run(mode, func(b *testing.B) {
			ctx := context.Background()
			prefix := uniquePrefix(b)
			stream, bitmap := prefix+":ingest", prefix+":seq"
			drop := func() {
				ctx, cancel := context.WithTimeout(context.Background(), wait)
				defer cancel()
				if _, err := st.Delete(ctx, stream, bitmap); err != nil {
					b.Fatal(err)
				}
			}
			b.Cleanup(drop)
			reqs := make([]streamstore.ProduceRequest, batchSize)
			for i := range reqs {
				reqs[i] = streamstore.ProduceRequest{DedupKey: bitmap, DedupTTL: time.Minute, DedupBitmap: true, Stream: stream,
					Entries: []map[string]string{{"agentUuid": "AAAAAAAAAAAAAAAAAAAAAA", "seq": strconv.Itoa(i), "data": payload}}}
			}
			b.SetBytes(int64(batchSize * (len(payload) + 40)))
			b.ReportAllocs()
			round := 0
			for b.Loop() {
				if round == roundsPerKey {
					b.StopTimer()
					drop()
					round = 0
					b.StartTimer()
				}
				for i := range reqs {
					reqs[i].DedupBit = uint16(round*batchSize + i)
				}
				round++
				if mode == "ProduceBatch" {
					results, errs := st.ProduceBatch(ctx, reqs)
					for i, err := range errs {
						if err != nil || results[i].Duplicate {
							b.Fatalf("ProduceBatch request %d = %+v, %v", i, results[i], err)
						}
					}
					continue
				}
				for _, req := range reqs {
					if res, err := st.Produce(ctx, req); err != nil || res.Duplicate {
						b.Fatalf("Produce = %+v, %v", res, err)
					}
				}
			}
		})
	}
}
