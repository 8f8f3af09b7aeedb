package httpx

import (
	"context"
	"fmt"
	"hash/maphash"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
)

// Limiter enforces limit requests per window for each key (a credential
// subject, a device key, a client address) with GCRA, the generic cell
// rate algorithm: each key holds one number, its theoretical arrival time,
// and a request is let through when that time is no more than a window
// ahead of now. A key that has been idle gets limit requests at once and
// then one every window/limit; in the long run no key exceeds
// limit/window, though a window that straddles a full burst and the
// refill after it can see up to 2·limit−1. That is the price of O(1)
// memory per key and an exact Retry-After, which a log of every request
// (10000 of them per device key at the telemetry limit) would not pay.
//
// Memory is bounded two ways. A key whose arrival time has passed is in
// the same state as one never seen, so forgetting it changes no answer;
// each shard drops such keys once per window. And the table holds at most
// MaxKeys keys (DefaultMaxKeys): a new key beyond that evicts, out of a
// small sample of the shard, the key with the most budget left. Forgetting
// that key hands it the least, and heavy users, which the limit exists
// for, stay tracked while a flood of one-request addresses churns among
// itself. Refusing unknown keys at the cap would let such a flood lock out
// every newcomer; admitting them untracked would switch limiting off.
//
// Keys are stored as 64-bit hashes with a per-process random seed, so the
// table's size does not depend on key length and never holds a device key
// in the clear; two keys colliding would merely share a budget.
//
// SetLimit changes the limit while the limiter serves: a key keeps what it
// owes as time (its arrival time), so the share of the window it has used
// carries over to the new limit.
//
// A Limiter is safe for concurrent use. A nil Limiter, or one with a limit
// of 0, allows everything.
type Limiter struct {
	rate     atomic.Pointer[rate]
	window   time.Duration
	now      func() time.Time
	base     time.Time // times are ns since base, on the monotonic clock
	seed     maphash.Seed
	shards   []limiterShard
	perShard int
}

// rate is a limit in the algorithm's terms, swapped whole by SetLimit so
// that a request never sees a limit with another limit's interval.
type rate struct {
	limit    int
	text     string // limit for the X-RateLimit-Limit header
	interval int64  // window/limit in ns: the cost of one request
	span     int64  // interval*limit: the window as the algorithm sees it
}

type limiterShard struct {
	mu        sync.Mutex
	tat       map[uint64]int64
	nextSweep int64
	_         [40]byte // keep shards on separate cache lines
}

// DefaultMaxKeys caps a Limiter's key table: about 3 MB, and far more
// credentials or client networks than one API instance serves at once.
const DefaultMaxKeys = 100_000

// evictionSample is how many keys are compared to pick one to evict.
const evictionSample = 8

// LimiterOption configures NewLimiter.
type LimiterOption func(*limiterOptions)

type limiterOptions struct {
	now     func() time.Time
	maxKeys int
}

// WithClock replaces time.Now, for tests.
func WithClock(now func() time.Time) LimiterOption {
	return func(o *limiterOptions) { o.now = now }
}

// WithMaxKeys caps the number of keys tracked (DefaultMaxKeys when n <= 0).
func WithMaxKeys(n int) LimiterOption {
	return func(o *limiterOptions) { o.maxKeys = n }
}

// NewLimiter returns a limiter allowing limit requests per window per key;
// a limit of 0 disables it. The config section validates limits, so a
// negative limit or a non-positive window here is a programming error.
func NewLimiter(limit int, window time.Duration, opts ...LimiterOption) *Limiter {
	o := limiterOptions{now: time.Now, maxKeys: DefaultMaxKeys}
	for _, opt := range opts {
		opt(&o)
	}
	if o.maxKeys <= 0 {
		o.maxKeys = DefaultMaxKeys
	}
	l := &Limiter{window: window, now: o.now, base: o.now(), seed: maphash.MakeSeed()}
	// One lock for a small table keeps the cap exact where it is tested;
	// big tables are sharded so concurrent requests rarely contend.
	n := 1
	if o.maxKeys >= 16*1024 {
		n = 16
	}
	l.perShard = (o.maxKeys + n - 1) / n
	l.shards = make([]limiterShard, n)
	for i := range l.shards {
		l.shards[i].tat = make(map[uint64]int64)
	}
	l.SetLimit(limit)
	return l
}

// SetLimit replaces the limit (0 disables the limiter). Keys keep their
// state; see Limiter. The config section validates limits, so a negative
// limit, or a positive one on a limiter built with a non-positive window,
// is a programming error.
func (l *Limiter) SetLimit(limit int) {
	if limit < 0 {
		panic(fmt.Sprintf("BUG: httpx.Limiter limit %d", limit))
	}
	r := &rate{limit: limit, text: strconv.Itoa(limit)}
	if limit > 0 {
		if l.window <= 0 {
			panic(fmt.Sprintf("BUG: httpx.Limiter with limit %d and window %s", limit, l.window))
		}
		r.interval = max(int64(l.window)/int64(limit), 1)
		r.span = r.interval * int64(limit)
	}
	l.rate.Store(r)
}

// Limit returns the current limit; 0 when limiting is off.
func (l *Limiter) Limit() int {
	if l == nil {
		return 0
	}
	return l.rate.Load().limit
}

// Decision is the outcome of one request against a Limiter.
type Decision struct {
	Allowed bool
	// Limit is the configured limit; 0 when limiting is off.
	Limit int
	// Remaining is how many more requests would be allowed right now.
	Remaining int
	// RetryAfter is how long to wait before a request is allowed again;
	// zero when Allowed.
	RetryAfter time.Duration
}

// Allow counts a request for key and reports whether it may proceed and,
// if not, how long until one would.
func (l *Limiter) Allow(key string) (ok bool, retryAfter time.Duration) {
	d := l.Take(key)
	return d.Allowed, d.RetryAfter
}

// Take counts a request for key when it is allowed (a refused request
// costs nothing, so a client that backs off as told recovers on time).
func (l *Limiter) Take(key string) Decision {
	return l.decide(key, true)
}

// Peek reports what a request for key would get, without counting one.
func (l *Limiter) Peek(key string) Decision {
	return l.decide(key, false)
}

// Forget drops key's state, giving it a full budget.
func (l *Limiter) Forget(key string) {
	if l.disabled() {
		return
	}
	h := maphash.String(l.seed, key)
	s := &l.shards[h%uint64(len(l.shards))]
	s.mu.Lock()
	delete(s.tat, h)
	s.mu.Unlock()
}

// Len reports how many keys are tracked.
func (l *Limiter) Len() int {
	if l.disabled() {
		return 0
	}
	n := 0
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		n += len(s.tat)
		s.mu.Unlock()
	}
	return n
}

func (l *Limiter) disabled() bool { return l == nil || l.rate.Load().limit == 0 }

func (l *Limiter) decide(key string, take bool) Decision {
	if l == nil {
		return Decision{Allowed: true}
	}
	r := l.rate.Load()
	if r.limit == 0 {
		return Decision{Allowed: true}
	}
	now := int64(l.now().Sub(l.base))
	h := maphash.String(l.seed, key)
	s := &l.shards[h%uint64(len(l.shards))]

	s.mu.Lock()
	defer s.mu.Unlock()
	if now >= s.nextSweep {
		for k, t := range s.tat {
			if t <= now {
				delete(s.tat, k)
			}
		}
		s.nextSweep = now + r.span
	}
	tat, known := s.tat[h]
	tat = max(tat, now)
	// Allowed while the key's arrival time, after paying for this request,
	// is at most a window ahead.
	if wait := tat + r.interval - r.span - now; wait > 0 {
		return Decision{Limit: r.limit, RetryAfter: time.Duration(wait)}
	}
	d := Decision{Allowed: true, Limit: r.limit, Remaining: int((r.span - (tat - now)) / r.interval)}
	if !take {
		return d
	}
	if !known && len(s.tat) >= l.perShard {
		s.evictOne()
	}
	s.tat[h] = tat + r.interval
	d.Remaining--
	return d
}

// evictOne drops the sampled key with the earliest arrival time, the one
// with the most budget left (see Limiter). Map iteration starts at a
// random place, which makes the first few keys a cheap random sample.
func (s *limiterShard) evictOne() {
	var victim uint64
	earliest, seen := int64(0), 0
	for k, t := range s.tat {
		if seen == 0 || t < earliest {
			victim, earliest = k, t
		}
		if seen++; seen == evictionSample {
			break
		}
	}
	delete(s.tat, victim)
}

// RateLimiter is a rate limit as the handlers use it: one count per key,
// either this process's own (Local) or one every replica shares
// (httpx/redislimit). The limit itself lives in each process and changes
// with SetLimit; Take, Peek and Forget act on the count.
type RateLimiter interface {
	// Take counts a request for key when it is allowed; see Limiter.Take.
	Take(ctx context.Context, key string) Decision
	// Peek reports what a request for key would get, counting nothing.
	Peek(ctx context.Context, key string) Decision
	// Forget drops key's count, giving it a full budget.
	Forget(ctx context.Context, key string)
	// SetLimit replaces the limit; 0 turns the limit off.
	SetLimit(limit int)
	// Limit returns the current limit; 0 when limiting is off.
	Limit() int
}

// Local is l as a RateLimiter: counts kept in this process only. A nil l
// gives a nil RateLimiter, which RateLimit and Attempts treat as no limit.
func Local(l *Limiter) RateLimiter {
	if l == nil {
		return nil
	}
	return local{l}
}

type local struct{ l *Limiter }

func (l local) Take(_ context.Context, key string) Decision { return l.l.Take(key) }
func (l local) Peek(_ context.Context, key string) Decision { return l.l.Peek(key) }
func (l local) Forget(_ context.Context, key string)        { l.l.Forget(key) }
func (l local) SetLimit(limit int)                          { l.l.SetLimit(limit) }
func (l local) Limit() int                                  { return l.l.Limit() }

// RateLimit returns middleware that counts each request against l under
// the key that key returns, and answers 429 with Retry-After (whole
// seconds, rounded up) in the role's error shape once the key is over its
// limit. An empty key (no credential of the kind this limit is for) skips
// the limit, as does a nil l. Allowed requests carry X-RateLimit-Limit and
// X-RateLimit-Remaining; when several limits apply, the innermost sets
// them last.
func RateLimit(l RateLimiter, key func(*gin.Context) string, write ErrorWriter) gin.HandlerFunc {
	if key == nil || write == nil {
		panic("BUG: httpx.RateLimit needs a key function and an error writer")
	}
	if l == nil {
		return func(c *gin.Context) { c.Next() }
	}
	return func(c *gin.Context) {
		// Read on every request: SetLimit may have changed it.
		k := key(c)
		if k == "" || l.Limit() == 0 {
			c.Next()
			return
		}
		d := l.Take(c.Request.Context(), k)
		if d.Limit == 0 { // turned off since Limit was read
			c.Next()
			return
		}
		h := c.Writer.Header()
		h.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
		h.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
		if d.Allowed {
			c.Next()
			return
		}
		secs := RetryAfterSeconds(d.RetryAfter)
		h.Set("Retry-After", strconv.Itoa(secs))
		write(c, http.StatusTooManyRequests, "rate_limited", fmt.Sprintf("too many requests; retry in %d s", secs))
		c.Abort()
	}
}

// RetryAfterSeconds rounds d up to whole seconds, at least 1, as the
// Retry-After header needs: rounding down would send clients back early
// into another refusal.
func RetryAfterSeconds(d time.Duration) int {
	return max(int((d+time.Second-1)/time.Second), 1)
}

// Attempts counts failed logins per account and per client address, so a
// password can be guessed neither against one account from many addresses
// nor against many accounts from one address. Once either has had its
// limit of failures within the window, Check and Fail report blocked, and
// the login handler refuses without looking at the password. The budget refills as
// a Limiter's does: limit failures at once, then one per window/limit.
//
// Accounts are compared case-insensitively: folding can only merge two
// accounts' counts, while not folding would give every spelling of an
// e-mail address its own budget.
type Attempts struct {
	account, ip RateLimiter
}

// NewAttempts allows perAccount failures per account and perIP failures
// per client address within window, counted in this process; a limit of
// 0 turns that count off.
func NewAttempts(perAccount, perIP int, window time.Duration, opts ...LimiterOption) *Attempts {
	return &Attempts{account: Local(NewLimiter(perAccount, window, opts...)), ip: Local(NewLimiter(perIP, window, opts...))}
}

// NewSharedAttempts counts failures per account in account and per client
// address in ip, limiters the caller built (for example on Redis, so that
// every replica sees one count). A nil limiter turns that count off.
func NewSharedAttempts(account, ip RateLimiter) *Attempts {
	return &Attempts{account: account, ip: ip}
}

// SetLimits changes the failures allowed per account and per address;
// counts made so far carry over (Limiter.SetLimit).
func (a *Attempts) SetLimits(perAccount, perIP int) {
	if a.account != nil {
		a.account.SetLimit(perAccount)
	}
	if a.ip != nil {
		a.ip.SetLimit(perIP)
	}
}

// Check reports whether a login for account from ip is blocked, and for
// how long.
func (a *Attempts) Check(ctx context.Context, account, ip string) (blocked bool, retryAfter time.Duration) {
	return a.blocked(a.peek(ctx, a.account, foldAccount(account)), a.peek(ctx, a.ip, ip))
}

// Fail records a failed login for account from ip and reports whether
// further attempts are now blocked, and for how long.
func (a *Attempts) Fail(ctx context.Context, account, ip string) (blocked bool, retryAfter time.Duration) {
	a.take(ctx, a.account, foldAccount(account))
	a.take(ctx, a.ip, ip)
	return a.Check(ctx, account, ip)
}

// Reserve counts a login attempt for account from ip as a failure before
// its password is checked, and reports whether it is over the limit (then
// nothing was counted and the attempt must be refused). Counting first is
// what makes the limit hold for concurrent guesses: a count made only
// after a slow password check lets every request already in flight
// through. A login that succeeds hands the account's count back with
// Succeed.
func (a *Attempts) Reserve(ctx context.Context, account, ip string) (blocked bool, retryAfter time.Duration) {
	return a.blocked(a.take(ctx, a.account, foldAccount(account)), a.take(ctx, a.ip, ip))
}

// Succeed clears account's failures after a successful login. The
// address's failures stay: an attacker holding one valid account must not
// wipe its address's record by logging in to it between guesses.
func (a *Attempts) Succeed(ctx context.Context, account string) {
	if a.account != nil {
		a.account.Forget(ctx, foldAccount(account))
	}
}

func (a *Attempts) take(ctx context.Context, l RateLimiter, key string) Decision {
	if l == nil || key == "" {
		return Decision{Allowed: true}
	}
	return l.Take(ctx, key)
}

func (a *Attempts) peek(ctx context.Context, l RateLimiter, key string) Decision {
	if l == nil || key == "" {
		return Decision{Allowed: true}
	}
	return l.Peek(ctx, key)
}

func (a *Attempts) blocked(ds ...Decision) (bool, time.Duration) {
	var wait time.Duration
	for _, d := range ds {
		if !d.Allowed {
			wait = max(wait, d.RetryAfter)
		}
	}
	return wait > 0, wait
}

func foldAccount(s string) string { return strings.ToLower(strings.TrimSpace(s)) }
