package streamstore

import (
	"context"
	"log/slog"
	"time"
)

// Persistence is what a store keeps over a restart of its server: the
// Cloud API acknowledges a message to the broker once it is in the stream,
// so a stream that does not survive a restart loses acknowledged
// telemetry (docs/stream-contract.md, "Redis persistence").
type Persistence struct {
	// AOF is true when the append-only file is on; AOFFsync is its
	// appendfsync ("always", "everysec", "no"; "" when unknown).
	AOF      bool
	AOFFsync string
	// RDB is true when snapshots are configured (save points) or, where
	// the configuration cannot be read, have been taken since the start.
	// RDBKnown is false when neither could be told.
	RDB      bool
	RDBKnown bool
	// Source says where this was read: "config" or "info".
	Source string
}

// Durable reports whether anything at all is kept over a restart.
func (p Persistence) Durable() bool { return p.AOF || p.RDB }

// PersistenceReporter is a store that can tell its server's persistence
// (the Redis store; the in-process store of all-in-one lives and dies with
// the process that acknowledges, so it has nothing to report).
type PersistenceReporter interface {
	Persistence(ctx context.Context) (Persistence, error)
}

// CheckPersistence reads s's persistence, when s can tell, and logs it:
// a warning when a restart of the server would lose acknowledged
// telemetry, or when it cannot be read. Roles that write to or consume
// from the stream call it at start; it never fails the start.
func CheckPersistence(ctx context.Context, s Store, log *slog.Logger) (Persistence, bool) {
	pr, ok := s.(PersistenceReporter)
	if !ok {
		return Persistence{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	p, err := pr.Persistence(ctx)
	if err != nil {
		log.Warn("cannot read the stream store's persistence settings; make sure Redis runs with appendonly yes (docs/stream-contract.md)", "err", err)
		return Persistence{}, false
	}
	attrs := []any{"aof", p.AOF, "appendfsync", p.AOFFsync, "rdb", p.RDB, "source", p.Source}
	switch {
	case !p.AOF && !p.RDB && p.RDBKnown:
		log.Warn("STREAM STORE HAS NO PERSISTENCE: a Redis restart loses every message in the streams, including telemetry already acknowledged to agents; set appendonly yes (docs/stream-contract.md)", attrs...)
	case !p.AOF && !p.RDBKnown:
		log.Warn("stream store runs without an append-only file and its snapshot settings cannot be read: a Redis restart may lose acknowledged telemetry; set appendonly yes (docs/stream-contract.md)", attrs...)
	case !p.AOF:
		log.Warn("stream store keeps RDB snapshots only: a Redis restart loses acknowledged telemetry written since the last snapshot; set appendonly yes (docs/stream-contract.md)", attrs...)
	default:
		log.Info("stream store persistence", attrs...)
	}
	return p, true
}
