package logging

import (
	"sync"
	"time"
)

// Limiter lets one log line per key through per interval and counts what
// it holds back, so the next line that passes can say how many were
// suppressed. A warning that repeats at message rate (a full queue, a
// misbehaving client) then costs one line per interval, not one per
// event.
type Limiter struct {
	every time.Duration
	now   func() time.Time

	mu   sync.Mutex
	last map[string]*limitEntry
}

type limitEntry struct {
	at         time.Time
	suppressed int
}

// MaxLimiterKeys bounds a Limiter's memory when many keys misbehave at
// once; past it, keys whose interval is over are forgotten, and if none
// is, new keys share the key "overflow".
const MaxLimiterKeys = 4096

// NewLimiter returns a Limiter of one line per key per every; now is its
// clock, time.Now when nil.
func NewLimiter(every time.Duration, now func() time.Time) *Limiter {
	if now == nil {
		now = time.Now
	}
	return &Limiter{every: every, now: now, last: make(map[string]*limitEntry)}
}

// Allow reports whether to log a line of key now and, if so, how many
// were held back since the last one that passed.
func (l *Limiter) Allow(key string) (ok bool, suppressed int) { return l.AllowN(key, 1) }

// AllowN is Allow for a line that stands for n events: a held-back line
// adds n to the count the next line reports.
func (l *Limiter) AllowN(key string, n int) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e := l.last[key]
	if e == nil && len(l.last) >= MaxLimiterKeys {
		for k, old := range l.last {
			if now.Sub(old.at) >= l.every {
				delete(l.last, k)
			}
		}
		if len(l.last) >= MaxLimiterKeys {
			key = "overflow"
			e = l.last[key]
		}
	}
	if e != nil && now.Sub(e.at) < l.every {
		e.suppressed += n
		return false, 0
	}
	if e != nil {
		suppressed = e.suppressed
	}
	l.last[key] = &limitEntry{at: now}
	return true, suppressed
}

// Keys is how many keys the Limiter holds, for tests of its bound.
func (l *Limiter) Keys() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.last)
}
