// Package logring keeps the edge agent's recent log entries in a bounded
// in-memory ring, the store behind GET /v1/logs (docs/agent.md), and
// provides a slog.Handler that feeds it.
package logring

import (
	"sync"
	"sync/atomic"
)

// Levels, lowest first.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
)

// Sources of an entry.
const (
	SourceSystem    = "system"
	SourceContainer = "container"
	SourceManager   = "manager"
)

// Query limits of GET /v1/logs.
const (
	DefaultLimit    = 200
	MaxLimit        = 1000
	DefaultCapacity = 5000
)

// Entry is one log entry as GET /v1/logs answers it.
type Entry struct {
	Level     string `json:"level"` // debug, info, warn or error
	Message   string `json:"message"`
	Timestamp int64  `json:"timestamp"` // Unix milliseconds
	Component string `json:"component"`
	AppID     string `json:"appId"`
	Source    string `json:"source"` // system, container or manager
}

// levelRank orders levels for the minimum-level filter; unknown levels
// rank below debug so they only show up when no level is asked for.
func levelRank(level string) int {
	switch level {
	case LevelDebug:
		return 0
	case LevelInfo:
		return 1
	case LevelWarn:
		return 2
	case LevelError:
		return 3
	}
	return -1
}

// Filter selects entries. Zero values select everything; see Query.
type Filter struct {
	Level  string // minimum level: "warn" matches warn and error
	Source string // exact source
	Since  int64  // Unix ms; entries with Timestamp >= Since
	Limit  int    // 0 means DefaultLimit; capped at MaxLimit
}

// Ring holds the most recent entries up to a fixed capacity; once full,
// each Add overwrites the oldest entry. It is safe for concurrent use.
type Ring struct {
	mu   sync.RWMutex
	buf  []Entry // allocated once so Add never allocates
	next int     // slot the next Add writes
	n    int     // entries held, up to len(buf)

	// tap, when set, also receives every entry Add stores (the cloud log
	// shipper), outside the lock.
	tap atomic.Pointer[func(Entry)]
}

// SetTap makes fn receive every entry added from now on; nil stops it.
// fn runs on the logging goroutine, so it must be quick and must not log.
func (r *Ring) SetTap(fn func(Entry)) {
	if fn == nil {
		r.tap.Store(nil)
		return
	}
	r.tap.Store(&fn)
}

// New returns a Ring holding up to capacity entries (DefaultCapacity if
// capacity <= 0).
func New(capacity int) *Ring {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Ring{buf: make([]Entry, capacity)}
}

// Cap returns the capacity.
func (r *Ring) Cap() int { return len(r.buf) }

// Len returns how many entries the ring holds.
func (r *Ring) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.n
}

// Add stores e, evicting the oldest entry when the ring is full.
func (r *Ring) Add(e Entry) {
	r.mu.Lock()
	r.buf[r.next] = e
	r.next++
	if r.next == len(r.buf) {
		r.next = 0
	}
	if r.n < len(r.buf) {
		r.n++
	}
	r.mu.Unlock()
	if tap := r.tap.Load(); tap != nil {
		(*tap)(e)
	}
}

// Query returns the newest f.Limit entries matching f, oldest first, and
// the number of matches before the limit was applied. A Level the ring
// does not know matches nothing; ValidateFilter rejects such filters
// before they get here.
//
// Entries are ordered by arrival, not by Timestamp: entries added out of
// timestamp order (a container log replayed late) keep their arrival
// position, and Since is a plain per-entry comparison.
func (r *Ring) Query(f Filter) ([]Entry, int) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultLimit
	}
	limit = min(limit, MaxLimit)
	minRank := -1
	if f.Level != "" {
		if minRank = levelRank(f.Level); minRank < 0 {
			return []Entry{}, 0
		}
	}

	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]Entry, 0, min(limit, r.n))
	total := 0
	// Walk newest to oldest so the first `limit` matches are the ones kept.
	for i := range r.n {
		idx := r.next - 1 - i
		if idx < 0 {
			idx += len(r.buf)
		}
		e := &r.buf[idx]
		if f.Level != "" && levelRank(e.Level) < minRank {
			continue
		}
		if f.Source != "" && e.Source != f.Source {
			continue
		}
		if e.Timestamp < f.Since {
			continue
		}
		total++
		if len(out) < limit {
			out = append(out, *e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, total
}
