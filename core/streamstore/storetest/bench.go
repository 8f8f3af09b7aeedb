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
