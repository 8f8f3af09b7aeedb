package batch

import (
	"context"
	"log/slog"
	"math"
	"runtime/metrics"
	"sync"
	"time"

	"github.com/edgeplat/edgeplat/core/memlimit"
	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

// Bounds of the memory safety limit: 5 % of the heap, at most 10 MiB
// (docs/agent.md, section Batching).
const (
	MaxMemoryCap = 10 << 20
	// MinMemoryCap keeps a freshly started, still small process from
	// cutting batches of a few messages.
	MinMemoryCap = 256 << 10
)

var memCap struct {
	sync.Mutex
	at    time.Time
	value int
}

// MemoryCap is the default memory limit of one batch: 5 % of the Go memory
// limit (GOMEMLIMIT) when one is set, otherwise 5 % of the memory the Go
// runtime holds from the operating system, which follows the heap but not
// its every collection; clamped to [MinMemoryCap, MaxMemoryCap]. It is
// re-read at most once a second, so a growing process gets a growing
// limit without each batch paying for the read.
func MemoryCap() int {
	memCap.Lock()
	defer memCap.Unlock()
	if now := time.Now(); memCap.value == 0 || now.Sub(memCap.at) > time.Second {
		memCap.value, memCap.at = computeMemoryCap(), now
	}
	return memCap.value
}

func computeMemoryCap() int {
	base, limited := memlimit.Current()
	if !limited {
		s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}}
		metrics.Read(s)
		base = 0
		if s[0].Value.Kind() == metrics.KindUint64 {
			base = int64(min(s[0].Value.Uint64(), math.MaxInt64))
		}
	}
	return int(min(max(base/20, MinMemoryCap), MaxMemoryCap))
}

// readingOverhead approximates a reading's fixed cost: its struct and the
// JSON keys it carries when published.
const readingOverhead = 96

// EstimateSize approximates the bytes readings hold, for Message.Size.
func EstimateSize(readings []adapters.Reading) int {
	n := 0
	for i := range readings {
		r := &readings[i]
		n += readingOverhead + len(r.DeviceName) + len(r.DeviceID) + len(r.Metric) + len(r.Unit) +
			len(r.QualityCode) + len(r.Protocol) + len(r.NodeType)
		if s, ok := r.Value.(string); ok {
			n += len(s)
		} else {
			n += 8
		}
	}
	return n
}

// LogSink logs each batch at debug level; it stands in for publishing.
type LogSink struct {
	Logger *slog.Logger // slog.Default() when nil
}

// Deliver logs b.
func (s LogSink) Deliver(ctx context.Context, b Batch) {
	l := s.Logger
	if l == nil {
		l = slog.Default()
	}
	l.LogAttrs(ctx, slog.LevelDebug, "batch",
		slog.String("endpoint", b.Endpoint),
		slog.Int("messages", len(b.Messages)),
		slog.Int("readings", b.Readings()),
		slog.Int("bytes", b.Bytes),
		slog.String("reason", b.Reason))
}
