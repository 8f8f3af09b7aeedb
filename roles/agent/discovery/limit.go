package discovery

import (
	"context"
	"sync"
	"time"
)

// limiter spaces probes evenly at rate per second, with no burst: in
// any second at most rate+1 probes start, however many workers wait.
type limiter struct {
	mu       sync.Mutex
	next     time.Time
	interval time.Duration
}

func newLimiter(rate int) *limiter {
	return &limiter{interval: time.Second / time.Duration(rate)}
}

// wait blocks until the next probe may start, or ctx ends.
func (l *limiter) wait(ctx context.Context) error {
	l.mu.Lock()
	now := time.Now()
	at := l.next
	if at.Before(now) {
		at = now
	}
	l.next = at.Add(l.interval)
	l.mu.Unlock()
	d := time.Until(at)
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
