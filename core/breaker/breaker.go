// Package breaker is the rolling-window circuit breaker of the Cloud API
// write path and the ingestion insert path. It opens when the error rate in
// the window passes a threshold and, unlike a classic half-open breaker,
// closes only when its owner says so: a background poller probes the
// backend (and, for ingestion, waits for the spool to drain) instead of
// letting trial traffic through.
package breaker

import (
	"fmt"
	"sync"
	"time"
)

// State of a breaker.
type State int

// Breaker states.
const (
	Closed State = iota
	Open
)

func (s State) String() string {
	if s == Open {
		return "open"
	}
	return "closed"
}

// Options tunes a Breaker. The zero value of a field takes its default.
type Options struct {
	// Window is the rolling window errors are counted over; 30 s.
	Window time.Duration
	// Buckets splits the window; the oldest bucket falls out as time passes.
	// 10 by default.
	Buckets int
	// MinRequests is the fewest outcomes in the window before the breaker
	// may open, so one failure at idle does not trip it; 5 by default.
	MinRequests int
	// FailureRatio opens the breaker when failures/outcomes reaches it;
	// 0.5 by default.
	FailureRatio float64
	// OnChange is called (outside the lock) after every state change.
	OnChange func(from, to State)
	// Now is the clock; time.Now by default. Tests set it.
	Now func() time.Time
}

type bucket struct {
	start           time.Time
	success, failed int
}

// Breaker is safe for concurrent use.
type Breaker struct {
	opts  Options
	width time.Duration

	mu       sync.Mutex
	state    State
	buckets  []bucket
	openedAt time.Time
}

// New returns a closed breaker.
func New(opts Options) (*Breaker, error) {
	if opts.Window == 0 {
		opts.Window = 30 * time.Second
	}
	if opts.Buckets == 0 {
		opts.Buckets = 10
	}
	if opts.MinRequests == 0 {
		opts.MinRequests = 5
	}
	if opts.FailureRatio == 0 {
		opts.FailureRatio = 0.5
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Window < 0 || opts.Buckets < 1 || opts.MinRequests < 1 || opts.FailureRatio <= 0 || opts.FailureRatio > 1 {
		return nil, fmt.Errorf("breaker: invalid options (window %s, buckets %d, min requests %d, ratio %g)",
			opts.Window, opts.Buckets, opts.MinRequests, opts.FailureRatio)
	}
	return &Breaker{opts: opts, width: opts.Window / time.Duration(opts.Buckets), buckets: make([]bucket, opts.Buckets)}, nil
}

// Allow reports whether work may go to the protected backend.
func (b *Breaker) Allow() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state == Closed
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// OpenedAt is when the breaker last opened; zero while it never has.
func (b *Breaker) OpenedAt() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.openedAt
}

// Record counts one outcome; a nil err is a success. It returns the state
// after counting.
func (b *Breaker) Record(err error) State {
	b.mu.Lock()
	now := b.opts.Now()
	cur := b.current(now)
	if err == nil {
		cur.success++
	} else {
		cur.failed++
	}
	from := b.state
	if b.state == Closed && err != nil {
		var ok, failed int
		for _, bk := range b.buckets {
			if now.Sub(bk.start) < b.opts.Window {
				ok += bk.success
				failed += bk.failed
			}
		}
		total := ok + failed
		if total >= b.opts.MinRequests && float64(failed)/float64(total) >= b.opts.FailureRatio {
			b.state = Open
			b.openedAt = now
		}
	}
	to := b.state
	b.mu.Unlock()
	b.notify(from, to)
	return to
}

// Trip opens the breaker at once, for failures that need no statistics
// (the backend is known to be unreachable).
func (b *Breaker) Trip() {
	b.mu.Lock()
	from := b.state
	if b.state == Closed {
		b.state = Open
		b.openedAt = b.opts.Now()
	}
	b.mu.Unlock()
	b.notify(from, Open)
}

// Reset closes the breaker and forgets the window. The owner's poller calls
// it once the backend answers (and, where required, the spool is drained).
func (b *Breaker) Reset() {
	b.mu.Lock()
	from := b.state
	b.state = Closed
	for i := range b.buckets {
		b.buckets[i] = bucket{}
	}
	b.mu.Unlock()
	b.notify(from, Closed)
}

// current returns the bucket for now, recycling a stale one. Caller holds mu.
func (b *Breaker) current(now time.Time) *bucket {
	start := now.Truncate(b.width)
	i := int((start.UnixNano() / int64(b.width)) % int64(len(b.buckets)))
	bk := &b.buckets[i]
	if !bk.start.Equal(start) {
		*bk = bucket{start: start}
	}
	return bk
}

func (b *Breaker) notify(from, to State) {
	if from != to && b.opts.OnChange != nil {
		b.opts.OnChange(from, to)
	}
}
