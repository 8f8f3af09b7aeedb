package redislimit

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// DefaultPrefix starts every key the limiters write; serve-api scopes
// them by its installation id:
// <prefix>[<scope>:]<limit name>:<hash of the key> (see Store.SetScope).
const DefaultPrefix = "edgeplat:ratelimit:"

// Defaults of Options.
const (
	DefaultTimeout = 250 * time.Millisecond
	DefaultRetry   = 5 * time.Second
)

// Options configures a Store. Zero values take the defaults.
type Options struct {
	// Prefix starts every key (DefaultPrefix). Tests give their own so
	// they share the machine's Redis with nothing else.
	Prefix string
	// Timeout bounds one decision's round trip (DefaultTimeout): a slow
	// Redis must not hold every request up for its dial timeout.
	Timeout time.Duration
	// Retry is how long decisions stay on the process's own counts after
	// Redis failed, before one request tries Redis again (DefaultRetry).
	Retry time.Duration
	// Now, when set (tests), is the clock the script is given; otherwise
	// the script reads the Redis server's clock, which every replica
	// shares, so skew between replicas' clocks cannot move a window.
	Now func() time.Time
	// Log receives the switches to and from the fallback; discarded when nil.
	Log *slog.Logger
}

// Store hands out limiters that count in one Redis and share its health:
// when a decision on one limiter fails, all of them use their fallback
// for Options.Retry.
type Store struct {
	client goredis.Scripter
	o      Options
	// downUntil is when, in Unix ns, Redis may be tried again; 0 when
	// it is in use.
	downUntil atomic.Int64
	fallbacks atomic.Uint64
	// scope is the part of every key after the prefix (SetScope).
	scope atomic.Pointer[string]
}

// SetScope puts the keys of every later decision under scope, such as the
// installation's id: the replicas of one installation count together and
// installations (or test runs) sharing one Redis count apart. Counts made
// under an earlier scope are left to expire.
func (s *Store) SetScope(scope string) {
	if scope != "" {
		scope += ":"
	}
	s.scope.Store(&scope)
}

// NewStore returns a Store counting in client's server. It does no I/O.
func NewStore(client goredis.Scripter, o Options) *Store {
	if client == nil {
		panic("BUG: redislimit.NewStore without a client")
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Retry <= 0 {
		o.Retry = DefaultRetry
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Store{client: client, o: o}
}

// Limiter returns the limit called name (a word naming what it counts:
// "global", "auth", "login-account"), allowing limit requests per window
// per key; 0 turns it off. Two Limiters of one name on one Redis, in this
// process or another, share their counts; that is the point. The config
// section validates limits, so a negative limit or a non-positive window
// is a programming error, as for httpx.NewLimiter.
func (s *Store) Limiter(name string, limit int, window time.Duration) *Limiter {
	if window < time.Microsecond {
		panic(fmt.Sprintf("BUG: redislimit.Limiter %s with window %s", name, window))
	}
	l := &Limiter{s: s, name: name + ":", window: window,
		local: httpx.NewLimiter(limit, window)}
	l.SetLimit(limit)
	return l
}

// Limiter is one rate limit counted in Redis; see the package doc. It is
// safe for concurrent use.
type Limiter struct {
	s      *Store
	name   string
	window time.Duration
	rate   atomic.Pointer[rate]
	// local counts what this process sees, whether Redis answers or not,
	// so that a fallback starts from this replica's share of the traffic
	// rather than from nothing.
	local *httpx.Limiter
}

// rate is the limit in the script's terms, in microseconds: the Lua
// numbers Redis uses are doubles, exact up to 2^53, which µs since 1970
// stay well within and ns do not.
type rate struct {
	limit    int
	interval int64 // window/limit: the cost of one request
	span     int64 // interval*limit: the window as the algorithm sees it
}

// SetLimit replaces the limit in this process (0 turns it off). Counts in
// Redis are arrival times, so a key keeps the share of the window it has
// used, as with httpx.Limiter.SetLimit. Each replica applies the limit it
// is given; the system config brings them into step.
func (l *Limiter) SetLimit(limit int) {
	if limit < 0 {
		panic(fmt.Sprintf("BUG: redislimit.Limiter limit %d", limit))
	}
	r := &rate{limit: limit}
	if limit > 0 {
		r.interval = max(l.window.Microseconds()/int64(limit), 1)
		r.span = r.interval * int64(limit)
	}
	l.rate.Store(r)
	l.local.SetLimit(limit)
}

// Limit returns the current limit; 0 when limiting is off.
func (l *Limiter) Limit() int { return l.rate.Load().limit }

// Take counts a request for key when it is allowed (a refused request
// costs nothing), in Redis, or in this process while Redis fails.
func (l *Limiter) Take(ctx context.Context, key string) httpx.Decision {
	return l.decide(ctx, key, true)
}

// Peek reports what a request for key would get, without counting one.
func (l *Limiter) Peek(ctx context.Context, key string) httpx.Decision {
	return l.decide(ctx, key, false)
}

// Forget drops key's count, in Redis and in this process.
func (l *Limiter) Forget(ctx context.Context, key string) {
	l.local.Forget(key)
	if l.rate.Load().limit == 0 || !l.s.useRedis() {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, l.s.o.Timeout)
	defer cancel()
	if err := forgetScript.Run(rctx, l.s.client, []string{l.key(key)}).Err(); err != nil {
		l.s.failed(ctx, fmt.Errorf("forget %s: %w", strings.TrimSuffix(l.name, ":"), err))
		return
	}
	l.s.recovered()
}

func (l *Limiter) decide(ctx context.Context, key string, take bool) httpx.Decision {
	r := l.rate.Load()
	if r.limit == 0 {
		return httpx.Decision{Allowed: true}
	}
	var ld httpx.Decision
	if take {
		ld = l.local.Take(key)
	} else {
		ld = l.local.Peek(key)
	}
	if !l.s.useRedis() {
		l.s.fellBack()
		return ld
	}
	d, err := l.s.run(ctx, l.key(key), r, take)
	if err != nil {
		l.s.failed(ctx, fmt.Errorf("rate limit %s: %w", strings.TrimSuffix(l.name, ":"), err))
		l.s.fellBack()
		return ld
	}
	l.s.recovered()
	return d
}

// key hashes the caller's key: Redis then holds neither e-mail addresses
// nor client addresses in the clear, and every key has one length. One
// limiter key holds one counter and each script touches one key, so on
// Cluster any slot will do and no hash tag is needed.
func (l *Limiter) key(k string) string {
	sum := sha256.Sum256([]byte(k))
	scope := ""
	if p := l.s.scope.Load(); p != nil {
		scope = *p
	}
	return l.s.o.Prefix + scope + l.name + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// takeScript is GCRA on one key holding the key's theoretical arrival
// time in µs, the memory limiter's algorithm (httpx.Limiter). ARGV:
// interval, span, take (1 counts an allowed request, 0 only looks), now
// ("" reads the server's clock). It answers {allowed, remaining, wait µs}.
// The arrival time is written with %d: Lua's own number formatting keeps
// 14 digits, fewer than µs since 1970 need.
var takeScript = goredis.NewScript(`
local interval = tonumber(ARGV[1])
local span = tonumber(ARGV[2])
local now
if ARGV[4] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
else
  now = tonumber(ARGV[4])
end
local tat = tonumber(redis.call('GET', KEYS[1]) or now) or now
if tat < now then tat = now end
local wait = tat + interval - span - now
if wait > 0 then
  return {0, 0, wait}
end
local remaining = math.floor((span - (tat - now)) / interval)
if ARGV[3] == '1' then
  tat = tat + interval
  redis.call('SET', KEYS[1], string.format('%d', tat), 'PX', math.max(math.ceil((tat - now) / 1000), 1))
  remaining = remaining - 1
end
return {1, remaining, 0}
`)

var forgetScript = goredis.NewScript(`return redis.call('DEL', KEYS[1])`)

func (s *Store) run(ctx context.Context, key string, r *rate, take bool) (httpx.Decision, error) {
	ctx, cancel := context.WithTimeout(ctx, s.o.Timeout)
	defer cancel()
	now, flag := "", "0"
	if s.o.Now != nil {
		now = strconv.FormatInt(s.o.Now().UnixMicro(), 10)
	}
	if take {
		flag = "1"
	}
	vals, err := takeScript.Run(ctx, s.client, []string{key}, r.interval, r.span, flag, now).Int64Slice()
	if err != nil {
		return httpx.Decision{}, err
	}
	if len(vals) != 3 {
		return httpx.Decision{}, fmt.Errorf("script answered %d values, want 3", len(vals))
	}
	if vals[0] == 0 {
		return httpx.Decision{Limit: r.limit, RetryAfter: time.Duration(vals[2]) * time.Microsecond}, nil
	}
	return httpx.Decision{Allowed: true, Limit: r.limit, Remaining: int(vals[1])}, nil
}

// useRedis reports whether this decision goes to Redis: always while it
// answers; after a failure, only the first decision once Options.Retry has
// passed, which then probes for the others.
func (s *Store) useRedis() bool {
	until := s.downUntil.Load()
	if until == 0 {
		return true
	}
	now := time.Now().UnixNano()
	return now >= until && s.downUntil.CompareAndSwap(until, now+int64(s.o.Retry))
}

// failed notes that Redis did not answer a decision made for the request
// whose context is ctx.
func (s *Store) failed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		// The request went away: that says nothing about Redis.
		return
	}
	if s.downUntil.Swap(time.Now().Add(s.o.Retry).UnixNano()) == 0 {
		s.o.Log.Warn("rate limits fall back to this replica's own counts", "retry_in", s.o.Retry, "err", err)
	}
}

func (s *Store) recovered() {
	if s.downUntil.Swap(0) != 0 {
		s.o.Log.Info("rate limits counted in Redis again")
	}
}

func (s *Store) fellBack() { s.fallbacks.Add(1) }

// Fallbacks counts the decisions made on a process's own counts because
// Redis failed, for the role's metrics.
func (s *Store) Fallbacks() uint64 { return s.fallbacks.Load() }

var _ httpx.RateLimiter = (*Limiter)(nil)
