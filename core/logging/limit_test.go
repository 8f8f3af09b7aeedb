package logging

import (
	"strings"
	"testing"
	"time"
)

// stepClock is a Limiter's clock moved by the test.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }

func TestLimiter(t *testing.T) {
	clock := &stepClock{now: time.Unix(0, 0)}
	l := NewLimiter(time.Second, clock.Now)
	type step struct {
		advance    time.Duration
		key        string
		n          int
		ok         bool
		suppressed int
	}
	for i, s := range []step{
		{0, "a", 1, true, 0},
		{0, "a", 1, false, 0},
		{0, "b", 1, true, 0},
		{500 * time.Millisecond, "a", 1, false, 0},
		{500 * time.Millisecond, "a", 1, true, 2},
		{0, "b", 1, true, 0},
		{0, "b", 1, false, 0},
		{time.Second, "b", 1, true, 1},
		{0, "a", 1, true, 0},
		// A held-back line of n events counts n.
		{0, "a", 5, false, 0},
		{0, "a", 3, false, 0},
		{time.Second, "a", 1, true, 8},
	} {
		clock.now = clock.now.Add(s.advance)
		ok, n := l.AllowN(s.key, s.n)
		if ok != s.ok || n != s.suppressed {
			t.Errorf("step %d AllowN(%s, %d) = %v, %d; want %v, %d", i, s.key, s.n, ok, n, s.ok, s.suppressed)
		}
	}
}

// TestLimiterIsBounded fills the limiter with more keys than it keeps.
func TestLimiterIsBounded(t *testing.T) {
	clock := &stepClock{now: time.Unix(0, 0)}
	l := NewLimiter(time.Second, clock.Now)
	for i := range MaxLimiterKeys * 2 {
		l.Allow(strings.Repeat("x", i%7) + string(rune('a'+i%26)) + time.Duration(i).String())
	}
	if n := l.Keys(); n > MaxLimiterKeys+1 {
		t.Fatalf("limiter holds %d keys, bound %d", n, MaxLimiterKeys)
	}
	clock.now = clock.now.Add(time.Second)
	if ok, _ := l.Allow("new"); !ok {
		t.Fatal("a new key is refused once the old ones expired")
	}
}
