package httpx

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/edgeplat/edgeplat/core/coretest"
)

func newFakeClock() *coretest.Clock {
	return coretest.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

func TestLimiter(t *testing.T) {
	type step struct {
		advance   time.Duration
		key       string
		n         int // requests at this instant; the last one is checked
		allowed   bool
		retry     time.Duration
		remaining int
	}
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		steps  []step
	}{
		{name: "burst of the limit, then refused", limit: 10, window: time.Minute, steps: []step{
			{key: "a", n: 1, allowed: true, remaining: 9},
			{key: "a", n: 9, allowed: true, remaining: 0},
			{key: "a", n: 1, allowed: false, retry: 6 * time.Second},
		}},
		{name: "refused requests cost nothing", limit: 10, window: time.Minute, steps: []step{
			{key: "a", n: 10, allowed: true},
			{key: "a", n: 50, allowed: false, retry: 6 * time.Second},
			{advance: 6 * time.Second, key: "a", n: 1, allowed: true, remaining: 0},
			{key: "a", n: 1, allowed: false, retry: 6 * time.Second},
		}},
		{name: "retry-after shrinks as time passes", limit: 10, window: time.Minute, steps: []step{
			{key: "a", n: 10, allowed: true},
			{advance: 2 * time.Second, key: "a", n: 1, allowed: false, retry: 4 * time.Second},
			{advance: 3999 * time.Millisecond, key: "a", n: 1, allowed: false, retry: time.Millisecond},
			{advance: time.Millisecond, key: "a", n: 1, allowed: true},
		}},
		{name: "idle key gets its full budget back", limit: 10, window: time.Minute, steps: []step{
			{key: "a", n: 10, allowed: true},
			{advance: time.Minute, key: "a", n: 1, allowed: true, remaining: 9},
			{advance: time.Hour, key: "a", n: 10, allowed: true, remaining: 0},
		}},
		{name: "keys are independent", limit: 2, window: time.Second, steps: []step{
			{key: "a", n: 2, allowed: true},
			{key: "a", n: 1, allowed: false, retry: 500 * time.Millisecond},
			{key: "b", n: 2, allowed: true, remaining: 0},
		}},
		{name: "limit of one", limit: 1, window: time.Minute, steps: []step{
			{key: "a", n: 1, allowed: true, remaining: 0},
			{advance: 59 * time.Second, key: "a", n: 1, allowed: false, retry: time.Second},
			{advance: time.Second, key: "a", n: 1, allowed: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			l := NewLimiter(tt.limit, tt.window, WithClock(clk.Now))
			for i, s := range tt.steps {
				clk.Advance(s.advance)
				var d Decision
				for range s.n {
					d = l.Take(s.key)
				}
				if d.Allowed != s.allowed || d.RetryAfter != s.retry || (s.allowed && d.Remaining != s.remaining) {
					t.Fatalf("step %d: %+v, want allowed %v retry %s remaining %d", i, d, s.allowed, s.retry, s.remaining)
				}
				if ok, retry := l.Allow(fmt.Sprint(s.key, "-fresh-", i)); !ok || retry != 0 {
					t.Fatalf("step %d: Allow on a fresh key = %v, %s", i, ok, retry)
				}
			}
		})
	}
}

func TestLimiterPeekDoesNotCount(t *testing.T) {
	l := NewLimiter(2, time.Minute, WithClock(newFakeClock().Now))
	for range 5 {
		if d := l.Peek("a"); !d.Allowed || d.Remaining != 2 {
			t.Fatalf("Peek = %+v", d)
		}
	}
	l.Take("a")
	l.Take("a")
	if d := l.Peek("a"); d.Allowed || d.RetryAfter != 30*time.Second {
		t.Fatalf("Peek after the budget = %+v", d)
	}
	l.Forget("a")
	if d := l.Peek("a"); !d.Allowed {
		t.Fatalf("Peek after Forget = %+v", d)
	}
}

func TestLimiterDisabled(t *testing.T) {
	for name, l := range map[string]*Limiter{"zero limit": NewLimiter(0, 0), "nil": nil} {
		t.Run(name, func(t *testing.T) {
			for range 1000 {
				if ok, retry := l.Allow("a"); !ok || retry != 0 {
					t.Fatalf("Allow = %v, %s", ok, retry)
				}
			}
			l.Forget("a")
			if n := l.Len(); n != 0 {
				t.Errorf("Len = %d", n)
			}
		})
	}
}

func TestLimiterDropsIdleKeys(t *testing.T) {
	clk := newFakeClock()
	// Sweeps are per shard; a table this small has one.
	l := NewLimiter(10, time.Minute, WithClock(clk.Now), WithMaxKeys(1000))
	for i := range 500 {
		l.Take(fmt.Sprint("k", i))
	}
	if n := l.Len(); n != 500 {
		t.Fatalf("Len = %d, want 500", n)
	}
	// One request each cost 6s, so after a window every key is idle and
	// the next request's sweep drops them.
	clk.Advance(time.Minute)
	l.Take("new")
	if n := l.Len(); n != 1 {
		t.Errorf("Len after a window = %d, want 1", n)
	}
}

// TestLimiterCapKeepsHeavyUsers: a flood of distinct keys past the cap
// neither grows the table nor frees a key that has used its budget.
func TestLimiterCapKeepsHeavyUsers(t *testing.T) {
	clk := newFakeClock()
	const maxKeys = 4
	l := NewLimiter(10, time.Minute, WithClock(clk.Now), WithMaxKeys(maxKeys))
	for range 10 {
		l.Take("heavy")
	}
	for i := range 10_000 {
		if ok, _ := l.Allow(fmt.Sprint("flood-", i)); !ok {
			t.Fatalf("new key %d refused at the cap", i)
		}
		if n := l.Len(); n > maxKeys {
			t.Fatalf("Len = %d after %d keys, cap %d", n, i+1, maxKeys)
		}
	}
	if ok, _ := l.Allow("heavy"); ok {
		t.Error("the flood reset the heavy key's budget")
	}
}

func TestLimiterConcurrent(t *testing.T) {
	clk := newFakeClock()
	const limit = 1000
	l := NewLimiter(limit, time.Minute, WithClock(clk.Now), WithMaxKeys(DefaultMaxKeys))
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 200 {
				if ok, _ := l.Allow("shared"); ok {
					allowed.Add(1)
				}
				l.Allow(fmt.Sprint("own-", g, "-", i))
				if i%50 == 0 {
					l.Len()
					clk.Advance(time.Nanosecond)
				}
			}
		})
	}
	wg.Wait()
	// 32×200 requests at (nearly) one instant: exactly the burst passes.
	if got := allowed.Load(); got != limit {
		t.Errorf("allowed %d of 6400 concurrent requests, want %d", got, limit)
	}
	if n := l.Len(); n != 32*200+1 {
		t.Errorf("Len = %d, want %d", n, 32*200+1)
	}
}

func TestRateLimitMiddleware(t *testing.T) {
	clk := newFakeClock()
	l := NewLimiter(10, time.Minute, WithClock(clk.Now))
	e := gin.New()
	e.Use(RateLimit(Local(l), func(c *gin.Context) string { return c.GetHeader("X-Key") }, writeTestError))
	e.GET("/x", func(c *gin.Context) { c.String(http.StatusOK, "ok") })

	do := func(key string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		if key != "" {
			req.Header.Set("X-Key", key)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	for i := 1; i <= 10; i++ {
		rec := do("alice")
		if rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, rec.Code, rec.Body)
		}
		if got, want := rec.Header().Get("X-RateLimit-Remaining"), fmt.Sprint(10-i); got != want {
			t.Errorf("request %d: X-RateLimit-Remaining %q, want %q", i, got, want)
		}
	}
	rec := do("alice")
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th request: %d, want 429", rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got != "6" {
		t.Errorf("Retry-After %q, want 6", got)
	}
	if got := rec.Header().Get("X-RateLimit-Limit"); got != "10" {
		t.Errorf("X-RateLimit-Limit %q, want 10", got)
	}
	var body struct{ Code, Message string }
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Code != "rate_limited" || body.Message == "" {
		t.Errorf("body %s (%v), want the JSON error with code rate_limited", rec.Body, err)
	}
	if rec := do("bob"); rec.Code != http.StatusOK {
		t.Errorf("another key: %d", rec.Code)
	}
	for range 20 {
		if rec := do(""); rec.Code != http.StatusOK || rec.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("request without a key: %d %v", rec.Code, rec.Header())
		}
	}
	clk.Advance(6 * time.Second)
	if rec := do("alice"); rec.Code != http.StatusOK {
		t.Errorf("after Retry-After: %d", rec.Code)
	}

	off := gin.New()
	off.Use(RateLimit(Local(NewLimiter(0, time.Minute)), func(*gin.Context) string { return "k" }, writeTestError))
	off.GET("/x", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	for range 50 {
		rec := httptest.NewRecorder()
		off.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
		if rec.Code != http.StatusNoContent {
			t.Fatalf("disabled limiter answered %d", rec.Code)
		}
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int
	}{
		{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {time.Second + 1, 2}, {6 * time.Second, 6}, {59500 * time.Millisecond, 60},
	}
	for _, tt := range tests {
		if got := RetryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("RetryAfterSeconds(%s) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

func TestAttempts(t *testing.T) {
	type op struct {
		advance     time.Duration
		kind        string // fail, succeed, check
		account, ip string
		blocked     bool
		retry       time.Duration
	}
	tests := []struct {
		name string
		ops  []op
	}{
		{name: "account blocked after its limit of failures", ops: []op{
			{kind: "fail", account: "ann", ip: "1.1.1.1"},
			{kind: "fail", account: "ann", ip: "1.1.1.2"},
			{kind: "fail", account: "ann", ip: "1.1.1.3", blocked: true, retry: 20 * time.Second},
			{kind: "check", account: "ANN ", ip: "9.9.9.9", blocked: true, retry: 20 * time.Second},
			{kind: "check", account: "bob", ip: "9.9.9.9"},
			{advance: 20 * time.Second, kind: "check", account: "ann", ip: "9.9.9.9"},
		}},
		{name: "success resets the account", ops: []op{
			{kind: "fail", account: "ann", ip: "1.1.1.1"},
			{kind: "fail", account: "ann", ip: "1.1.1.1"},
			{kind: "succeed", account: "Ann"},
			{kind: "fail", account: "ann", ip: "1.1.1.2"},
			{kind: "check", account: "ann", ip: "1.1.1.9"},
		}},
		{name: "address blocked across accounts", ops: []op{
			{kind: "fail", account: "a1", ip: "6.6.6.6"},
			{kind: "fail", account: "a2", ip: "6.6.6.6"},
			{kind: "fail", account: "a3", ip: "6.6.6.6"},
			{kind: "fail", account: "a4", ip: "6.6.6.6"},
			{kind: "fail", account: "a5", ip: "6.6.6.6", blocked: true, retry: 12 * time.Second},
			{kind: "check", account: "a6", ip: "6.6.6.6", blocked: true, retry: 12 * time.Second},
			{kind: "check", account: "a6", ip: "7.7.7.7"},
		}},
		{name: "success does not clear the address", ops: []op{
			{kind: "fail", account: "a1", ip: "6.6.6.6"},
			{kind: "fail", account: "a2", ip: "6.6.6.6"},
			{kind: "fail", account: "a3", ip: "6.6.6.6"},
			{kind: "fail", account: "a4", ip: "6.6.6.6"},
			{kind: "fail", account: "mine", ip: "6.6.6.6", blocked: true, retry: 12 * time.Second},
			{kind: "succeed", account: "mine"},
			{kind: "check", account: "mine", ip: "6.6.6.6", blocked: true, retry: 12 * time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := newFakeClock()
			a := NewAttempts(3, 5, time.Minute, WithClock(clk.Now))
			for i, o := range tt.ops {
				clk.Advance(o.advance)
				var blocked bool
				var retry time.Duration
				switch o.kind {
				case "fail":
					blocked, retry = a.Fail(t.Context(), o.account, o.ip)
				case "check":
					blocked, retry = a.Check(t.Context(), o.account, o.ip)
				case "succeed":
					a.Succeed(t.Context(), o.account)
					continue
				}
				if blocked != o.blocked || retry != o.retry {
					t.Fatalf("op %d (%s %s %s) = %v %s, want %v %s", i, o.kind, o.account, o.ip, blocked, retry, o.blocked, o.retry)
				}
			}
		})
	}
}

// TestAttemptsReserveHoldsUnderConcurrency: attempts counted before they
// are judged cannot outrun the limit, however many arrive at once.
func TestAttemptsReserveHoldsUnderConcurrency(t *testing.T) {
	a := NewAttempts(3, 100, time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if blocked, _ := a.Reserve(t.Context(), "ops@example.com", fmt.Sprintf("192.0.2.%d", i)); !blocked {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 3 {
		t.Fatalf("%d of 40 concurrent attempts admitted, want the limit of 3", admitted)
	}
	a.Succeed(t.Context(), "OPS@example.com")
	if blocked, _ := a.Reserve(t.Context(), "ops@example.com", "192.0.2.200"); blocked {
		t.Fatal("a success did not hand the account's count back")
	}
}

// TestLimiterSetLimit: a limit changed while serving takes effect on the
// next request, through the middleware too, and what a key has used
// carries over as a share of the window.
func TestLimiterSetLimit(t *testing.T) {
	clk := newFakeClock()
	l := NewLimiter(10, time.Minute, WithClock(clk.Now))
	for range 5 {
		l.Take("k")
	}
	tests := []struct {
		limit     int
		allowed   bool
		remaining int
	}{
		{limit: 1, allowed: false},                // half the window used: half a request left
		{limit: 4, allowed: true, remaining: 2},   // half of 4 left
		{limit: 20, allowed: true, remaining: 10}, // half of 20 left
		{limit: 0, allowed: true},                 // off
	}
	for _, tt := range tests {
		l.SetLimit(tt.limit)
		if got := l.Limit(); got != tt.limit {
			t.Fatalf("Limit() = %d after SetLimit(%d)", got, tt.limit)
		}
		d := l.Peek("k")
		if d.Allowed != tt.allowed || d.Remaining != tt.remaining {
			t.Errorf("limit %d: %+v, want allowed %v remaining %d", tt.limit, d, tt.allowed, tt.remaining)
		}
	}

	gin.SetMode(gin.TestMode)
	e := gin.New()
	m := NewLimiter(0, time.Minute, WithClock(clk.Now))
	e.GET("/", RateLimit(Local(m), func(*gin.Context) string { return "c" }, func(c *gin.Context, status int, code, msg string) {
		c.AbortWithStatusJSON(status, gin.H{"error": gin.H{"code": code, "message": msg}})
	}), func(c *gin.Context) { c.Status(http.StatusNoContent) })
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		return w
	}
	for range 3 {
		if w := get(); w.Code != http.StatusNoContent || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Fatalf("limit off: %d %v", w.Code, w.Header())
		}
	}
	m.SetLimit(2)
	codes := []int{get().Code, get().Code, get().Code}
	if codes[0] != http.StatusNoContent || codes[1] != http.StatusNoContent || codes[2] != http.StatusTooManyRequests {
		t.Errorf("after SetLimit(2): %v, want 204 204 429", codes)
	}
	if w := get(); w.Header().Get("X-RateLimit-Limit") != "2" {
		t.Errorf("X-RateLimit-Limit %q, want 2", w.Header().Get("X-RateLimit-Limit"))
	}
}
