package redislimit

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/httpx"
)

// newClock is the tests' hand-moved clock; the comparison test gives it
// to the memory limiter too.
func newClock() *coretest.Clock { return coretest.NewClock(time.Unix(1_800_000_000, 0)) }

// machineRedis is a client of the machine's Redis and a key prefix no
// other test uses; the test's keys are deleted at its end.
func machineRedis(t *testing.T) (*goredis.Client, string) {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: coretest.RedisAddr(t)})
	prefix := fmt.Sprintf("edgeplat:ratelimit-test:%s:%d:", t.Name(), time.Now().UnixNano())
	t.Cleanup(func() {
		keys, _ := c.Keys(t.Context(), prefix+"*").Result()
		if len(keys) > 0 {
			c.Del(t.Context(), keys...)
		}
		_ = c.Close()
	})
	return c, prefix
}

// TestLimiterWindowEdgeIntegration: limit requests at once, the next
// refused with the exact wait, refused still a microsecond before that
// wait ends and allowed at its end, with a refused request costing nothing.
func TestLimiterWindowEdgeIntegration(t *testing.T) {
	c, prefix := machineRedis(t)
	clk := newClock()
	l := NewStore(c, Options{Prefix: prefix, Now: clk.Now}).Limiter("edge", 3, time.Minute)
	ctx := t.Context()
	for i := range 3 {
		d := l.Take(ctx, "k")
		if !d.Allowed || d.Remaining != 2-i || d.Limit != 3 {
			t.Fatalf("take %d = %+v, want allowed with %d remaining", i+1, d, 2-i)
		}
	}
	d := l.Take(ctx, "k")
	if d.Allowed || d.RetryAfter != 20*time.Second || d.Limit != 3 {
		t.Fatalf("4th take = %+v, want refused, retry after 20s", d)
	}
	if p := l.Peek(ctx, "other"); !p.Allowed || p.Remaining != 3 {
		t.Fatalf("another key = %+v, want its full budget", p)
	}
	clk.Advance(20*time.Second - time.Microsecond)
	if d := l.Take(ctx, "k"); d.Allowed || d.RetryAfter != time.Microsecond {
		t.Fatalf("1 µs before the wait ends = %+v, want refused for 1µs", d)
	}
	clk.Advance(time.Microsecond)
	if d := l.Peek(ctx, "k"); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("peek at the wait's end = %+v, want allowed with 1", d)
	}
	if d := l.Take(ctx, "k"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("take at the wait's end = %+v, want allowed with 0 left", d)
	}
	if d := l.Take(ctx, "k"); d.Allowed || d.RetryAfter != 20*time.Second {
		t.Fatalf("take after = %+v, want refused for 20s", d)
	}
	l.Forget(ctx, "k")
	if d := l.Peek(ctx, "k"); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("after Forget = %+v, want the full budget", d)
	}
	if fb := l.s.Fallbacks(); fb != 0 {
		t.Errorf("%d fallbacks with Redis up", fb)
	}
}

// TestLimiterSharedIntegration: two stores on one Redis, as two replicas
// are, share the count of a limit of one name; another name has its own.
func TestLimiterSharedIntegration(t *testing.T) {
	c, prefix := machineRedis(t)
	a := NewStore(c, Options{Prefix: prefix}).Limiter("global", 5, time.Minute)
	b := NewStore(c, Options{Prefix: prefix}).Limiter("global", 5, time.Minute)
	other := NewStore(c, Options{Prefix: prefix}).Limiter("auth", 5, time.Minute)
	ctx := t.Context()
	refusedAt := 0
	for i := 1; i <= 8 && refusedAt == 0; i++ {
		l := a
		if i%2 == 0 {
			l = b
		}
		if d := l.Take(ctx, "ip:192.0.2.1"); !d.Allowed {
			refusedAt = i
			// The server's clock: the wait is one interval at most.
			if d.RetryAfter <= 0 || d.RetryAfter > 12*time.Second {
				t.Errorf("retry after %s, want (0, 12s]", d.RetryAfter)
			}
		}
	}
	if refusedAt != 6 {
		t.Fatalf("alternating between two stores: refused at request %d, want 6 (limit 5)", refusedAt)
	}
	if d := other.Take(ctx, "ip:192.0.2.1"); !d.Allowed || d.Remaining != 4 {
		t.Errorf("another limit's count = %+v, want its own", d)
	}
}

// TestLimiterScopeIntegration: stores of one scope (the replicas of one
// installation) count together, another scope (another installation on
// the same Redis) apart.
func TestLimiterScopeIntegration(t *testing.T) {
	c, prefix := machineRedis(t)
	store := func(scope string) *Limiter {
		st := NewStore(c, Options{Prefix: prefix})
		st.SetScope(scope)
		return st.Limiter("auth", 3, time.Minute)
	}
	a1, a2, b := store("install-a"), store("install-a"), store("install-b")
	ctx := t.Context()
	for i, l := range []*Limiter{a1, a2, a1} {
		if d := l.Take(ctx, "ip:192.0.2.9"); !d.Allowed {
			t.Fatalf("request %d of 3 refused", i+1)
		}
	}
	if d := a2.Take(ctx, "ip:192.0.2.9"); d.Allowed {
		t.Errorf("the 4th request of installation a, on its second replica, was allowed: %+v", d)
	}
	if d := b.Take(ctx, "ip:192.0.2.9"); !d.Allowed || d.Remaining != 2 {
		t.Errorf("installation b's first request = %+v, want allowed with 2 left", d)
	}
}

// TestLimiterSetLimitIntegration: a new limit applies at once and the
// share of the window used carries over, as with httpx.Limiter.
func TestLimiterSetLimitIntegration(t *testing.T) {
	c, prefix := machineRedis(t)
	clk := newClock()
	l := NewStore(c, Options{Prefix: prefix, Now: clk.Now}).Limiter("set", 4, time.Minute)
	ctx := t.Context()
	for range 2 {
		l.Take(ctx, "k")
	}
	l.SetLimit(2) // half the window used under 4 is one request under 2
	if d := l.Take(ctx, "k"); !d.Allowed || d.Limit != 2 || d.Remaining != 0 {
		t.Fatalf("after SetLimit(2) = %+v, want the one request left", d)
	}
	if d := l.Take(ctx, "k"); d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("next = %+v, want refused for 30s", d)
	}
	l.SetLimit(0)
	if d := l.Take(ctx, "k"); !d.Allowed || l.Limit() != 0 {
		t.Fatalf("limit 0 = %+v, want allowed", d)
	}
	l.SetLimit(8) // the whole window used stays used
	if d := l.Take(ctx, "k"); d.Allowed || d.Limit != 8 || d.RetryAfter != 7500*time.Millisecond {
		t.Fatalf("after SetLimit(8) = %+v, want refused for 7.5s", d)
	}
	clk.Advance(30 * time.Second)
	if d := l.Take(ctx, "k"); !d.Allowed || d.Remaining != 3 {
		t.Fatalf("after SetLimit(8) = %+v, want allowed with 3 left", d)
	}
}

// TestLimiterMatchesMemoryIntegration: random takes, peeks, forgets,
// limit changes and clock steps get the same decisions from the Redis
// limiter as from httpx.Limiter; the limits divide a minute in whole
// microseconds, so both count the same intervals.
func TestLimiterMatchesMemoryIntegration(t *testing.T) {
	c, prefix := machineRedis(t)
	clk := newClock()
	limits := []int{1, 2, 3, 4, 5, 6, 10, 12}
	r := NewStore(c, Options{Prefix: prefix, Now: clk.Now}).Limiter("cmp", 3, time.Minute)
	m := httpx.NewLimiter(3, time.Minute, httpx.WithClock(clk.Now))
	rng := rand.New(rand.NewPCG(25, 3))
	ctx := t.Context()
	for i := range 600 {
		key := fmt.Sprintf("k%d", rng.IntN(3))
		var got, want httpx.Decision
		switch op := rng.IntN(20); {
		case op < 12:
			got, want = r.Take(ctx, key), m.Take(key)
		case op < 15:
			got, want = r.Peek(ctx, key), m.Peek(key)
		case op < 16:
			r.Forget(ctx, key)
			m.Forget(key)
			continue
		case op < 17:
			n := limits[rng.IntN(len(limits))]
			r.SetLimit(n)
			m.SetLimit(n)
			continue
		default:
			clk.Advance(time.Duration(rng.IntN(40_000_000)) * time.Microsecond)
			continue
		}
		if got != want {
			t.Fatalf("op %d on %s: redis %+v, memory %+v", i, key, got, want)
		}
	}
}

// TestLimiterFallbackIntegration: with Redis stopped, decisions come from
// the replica's own counts, which kept counting while Redis answered; once
// Redis is back, they are made there again.
func TestLimiterFallbackIntegration(t *testing.T) {
	srv := coretest.PrivateRedis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	st := NewStore(c, Options{Retry: 200 * time.Millisecond})
	l := st.Limiter("login-ip", 3, time.Minute)
	ctx := t.Context()
	for range 2 {
		if d := l.Take(ctx, "ip:192.0.2.9"); !d.Allowed {
			t.Fatalf("take with Redis up refused: %+v", d)
		}
	}
	if st.Fallbacks() != 0 {
		t.Fatalf("%d fallbacks with Redis up", st.Fallbacks())
	}
	srv.Stop()
	if d := l.Take(ctx, "ip:192.0.2.9"); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("3rd take with Redis down = %+v, want allowed by the local count with 0 left", d)
	}
	if d := l.Take(ctx, "ip:192.0.2.9"); d.Allowed || d.RetryAfter <= 0 {
		t.Fatalf("4th take with Redis down = %+v, want refused: the limit does not fail open", d)
	}
	if st.Fallbacks() < 2 {
		t.Fatalf("%d fallbacks counted, want 2 or more", st.Fallbacks())
	}
	srv.Start()
	// Redis is tried again once Retry has passed; wait generously.
	deadline := time.Now().Add(20 * time.Second)
	for {
		before := st.Fallbacks()
		d := l.Peek(ctx, "ip:192.0.2.10")
		if st.Fallbacks() == before {
			if !d.Allowed || d.Remaining != 3 {
				t.Fatalf("peek from Redis after the restart = %+v", d)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("decisions still fall back 20 s after Redis came back")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The count Redis kept through its restart (append-only file) counts again.
	if d := l.Take(ctx, "ip:192.0.2.9"); !d.Allowed || d.Remaining != 0 {
		t.Errorf("3rd take in Redis after the restart = %+v, want allowed with 0 left", d)
	}
}

// BenchmarkTakeIntegration measures one decision on the machine's Redis
// (one EVALSHA round trip), for comparison with httpx.Limiter's in-memory
// Take, which it also makes.
func BenchmarkTakeIntegration(b *testing.B) {
	c := goredis.NewClient(&goredis.Options{Addr: coretest.RedisAddr(b)})
	defer c.Close()
	prefix := fmt.Sprintf("edgeplat:ratelimit-bench:%d:", time.Now().UnixNano())
	l := NewStore(c, Options{Prefix: prefix}).Limiter("bench", 1_000_000, time.Minute)
	ctx := b.Context()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l.Take(ctx, strconv.Itoa(i%1000))
	}
	keys, _ := c.Keys(ctx, prefix+"*").Result()
	if len(keys) > 0 {
		c.Del(ctx, keys...)
	}
}
