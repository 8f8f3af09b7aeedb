package ingest

import (
	"context"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// Bounds of what a batch buffer keeps between batches. The benchmark
// profile's batches (1,000 entries of 50 readings) take 50,000 of each; a
// batch of unusually large messages gets its arrays for that batch only.
const (
	keepRows     = 1 << 17 // 131,072 rows, about 19 MiB
	keepReadings = 1 << 17 // about 9 MiB
)

// batchBuf is the working memory of one batch: the decoded messages, the
// readings they hold (lent by a telemetry.ReadingArena) and the rows built
// from them. A worker takes one before it reads a batch and gives it back
// once the batch is acknowledged, so the next batch reuses the arrays
// instead of allocating its own: with the benchmark profile, 12 workers
// each held about 20 MB of freshly allocated batch data, and the garbage
// of the batches before (docs/benchmarks.md, Memory of the ingest).
type batchBuf struct {
	arena *telemetry.ReadingArena
	msgs  []parsed
	rows  []telemetry.Row
	clean bool // nothing written since the last reset
}

func newBatchBuf() *batchBuf {
	return &batchBuf{arena: telemetry.NewReadingArena(keepReadings), clean: true}
}

// reset forgets the batch: it zeroes what the batch wrote, so that no
// string or value of it stays reachable and nothing of it can appear in the
// next batch, and drops arrays grown past the keep bounds.
func (b *batchBuf) reset() {
	if b.clean {
		return
	}
	b.arena.Reset()
	clear(b.msgs[:cap(b.msgs)])
	b.msgs = b.msgs[:0]
	clear(b.rows[:cap(b.rows)])
	b.rows = b.rows[:0]
	if cap(b.rows) > keepRows {
		b.rows = nil
	}
	if cap(b.msgs) > keepRows {
		b.msgs = nil
	}
	b.clean = true
}

// batchPool hands out batch buffers, and bounds the batches in flight by
// their number: a worker holds one from before it reads a batch until the
// batch is acknowledged. Workers past the bound wait before reading, while
// their entries are still in the stream, rather than holding a read and
// decoded batch each while they wait for a write slot.
type batchPool struct {
	free chan *batchBuf
}

func newBatchPool(n int) *batchPool {
	p := &batchPool{free: make(chan *batchBuf, n)}
	for range n {
		p.free <- newBatchBuf()
	}
	return p
}

// get waits for a free buffer; false when ctx ended first.
func (p *batchPool) get(ctx context.Context) (*batchBuf, bool) {
	select {
	case b := <-p.free:
		return b, true
	case <-ctx.Done():
		return nil, false
	}
}

// put resets b and makes it free.
func (p *batchPool) put(b *batchBuf) {
	b.reset()
	select {
	case p.free <- b:
	default:
		panic("BUG: batchPool.put: more buffers returned than handed out")
	}
}

// batchesInFlight is the number of batches workers may hold at once: one
// per write slot plus one read and decoded ahead, ready for the first slot
// that frees, where writes are bounded (ingest.write_concurrency, and copy
// mode's default); else one per worker the autoscaler may start, which
// bounds nothing more than the workers do. Two per write slot measured the
// same readings/s on 2 CPUs with 20% more peak memory (docs/benchmarks.md).
func batchesInFlight(in config.Ingest) int {
	if n := writeConcurrency(in); n > 0 {
		return n + 1
	}
	return max(in.WorkerCount, in.Autoscale.MaxWorkers, 1)
}
