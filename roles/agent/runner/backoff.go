package runner

import (
	"math/rand/v2"
	"time"
)

// backoff doubles the wait after each failed connection attempt from min
// up to max, with ±20 % jitter so endpoints that lost one network together
// do not reconnect in lockstep.
type backoff struct {
	min, max time.Duration
	next     time.Duration
}

func newBackoff(min, max time.Duration) *backoff { return &backoff{min: min, max: max, next: min} }

func (b *backoff) Next() time.Duration {
	d := b.next
	b.next = min(b.next*2, b.max)
	jitter := time.Duration(rand.Int64N(int64(d)/5*2+1)) - d/5
	return d + jitter
}

func (b *backoff) Reset() { b.next = b.min }
