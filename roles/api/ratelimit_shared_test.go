package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/httpx/redislimit"
	"github.com/edgeplat/edgeplat/core/lifecycle"
	"github.com/edgeplat/edgeplat/core/rt"
	redisstore "github.com/edgeplat/edgeplat/core/streamstore/redis"
	goredis "github.com/redis/go-redis/v9"
)

// sharedLimits is a rate-limit store on the machine's Redis, through a
// stream store's connection as serve-api gets it, under a key prefix no
// other test uses; its keys are deleted at the end.
func sharedLimits(t *testing.T) *redislimit.Store {
	t.Helper()
	rs, err := redisstore.New(redisstore.Options{Addrs: []string{coretest.RedisAddr(t)}})
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("edgeplat:ratelimit-test:%s:%d:", t.Name(), time.Now().UnixNano())
	t.Cleanup(func() {
		for _, name := range []string{"global", "auth", "admin", "device", "refused-credentials", "login-account", "login-address", "ai"} {
			keys, _ := rs.Streams(t.Context(), prefix+name+":*")
			if len(keys) > 0 {
				_, _ = rs.Delete(t.Context(), keys...)
			}
		}
		_ = rs.Close()
	})
	return redislimit.NewStore(rs.Scripter(), redislimit.Options{Prefix: prefix})
}

// replicas builds n serve-api roles on one database and, when limits is
// not nil, one Redis for their rate limits, as n replicas of an
// installation are.
func replicas(t *testing.T, n int, limits *redislimit.Store, tune func(*config.Config)) []http.Handler {
	t.Helper()
	d := dbtest.Migrated(t, "sqlite")
	lic := testLicence(t, 0)
	hs := make([]http.Handler, n)
	for i := range hs {
		hs[i], _, _, _ = roleServicesWith(t, rt.Backends{DB: d, RateLimits: limits}, nil, lic, tune)
	}
	return hs
}

// TestWrongLoginsPerInstallationIntegration: with 2 replicas, 12 wrong
// logins spread over both meet the 429 at the same count as with one
// replica (docs/access.md, section Rate limits across replicas). Without
// the shared count each replica would allow its own 10.
func TestWrongLoginsPerInstallationIntegration(t *testing.T) {
	tune := func(c *config.Config) { c.Auth.RateLimitAuth = 10 }
	tests := []struct {
		name     string
		replicas int
		redis    bool
		want     int // the login answered 429 first; 0: none of the 12
	}{
		{"one replica", 1, true, 11},
		{"two replicas, counts in Redis", 2, true, 11},
		{"two replicas, counts per process", 2, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var limits *redislimit.Store
			if tt.redis {
				limits = sharedLimits(t)
			}
			hs := replicas(t, tt.replicas, limits, tune)
			got := 0
			for i := 1; i <= 12 && got == 0; i++ {
				r := call(t, hs[i%len(hs)], "POST", "/api/v1/auth/login", "", map[string]string{"email": "ops@example.com", "password": "wrong password"})
				switch r.status {
				case http.StatusUnauthorized:
				case http.StatusTooManyRequests:
					got = i
					if r.header.Get("Retry-After") == "" || !strings.Contains(r.raw, "rate_limited") {
						t.Errorf("429 without Retry-After or rate_limited: %v %s", r.header, r.raw)
					}
				default:
					t.Fatalf("login %d: %d %s", i, r.status, r.raw)
				}
			}
			if got != tt.want {
				t.Errorf("first 429 at login %d, want %d", got, tt.want)
			}
		})
	}
}

// TestGlobalLimitPerInstallationIntegration: the global limit per user
// counts the user's requests on every replica: X-RateLimit-Remaining
// goes down across both and the 429 comes at the limit.
func TestGlobalLimitPerInstallationIntegration(t *testing.T) {
	hs := replicas(t, 2, sharedLimits(t), func(c *config.Config) { c.Auth.RateLimitGlobal = 5 })
	tok := admin(t, hs[0])
	list := func(i int) reply { return call(t, hs[i%2], "GET", "/api/v1/agents", tok, nil) }
	got := 0
	for i := 1; i <= 8 && got == 0; i++ {
		r := list(i)
		switch r.status {
		case http.StatusOK:
			if want := fmt.Sprint(5 - i); r.header.Get("X-RateLimit-Remaining") != want {
				t.Errorf("request %d: X-RateLimit-Remaining %q, want %s", i, r.header.Get("X-RateLimit-Remaining"), want)
			}
		case http.StatusTooManyRequests:
			got = i
		default:
			t.Fatalf("request %d: %d %s", i, r.status, r.raw)
		}
	}
	if got != 6 {
		t.Fatalf("requests alternating between replicas: first 429 at %d, want 6 (limit 5)", got)
	}
}

// TestWrongLoginsWithRedisStoppedIntegration: with the limits' Redis
// stopped, a replica still refuses the 11th wrong login, on its own counts
// (docs/access.md: the limits do not fail open), and counts the fallback.
func TestWrongLoginsWithRedisStoppedIntegration(t *testing.T) {
	srv := coretest.PrivateRedis(t)
	rs, err := redisstore.New(redisstore.Options{Addrs: []string{srv.Addr()}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	limits := redislimit.NewStore(rs.Scripter(), redislimit.Options{})
	d := dbtest.Migrated(t, "sqlite")
	h, r, _, _ := roleServicesWith(t, rt.Backends{DB: d, RateLimits: limits}, nil, testLicence(t, 0),
		func(c *config.Config) { c.Auth.RateLimitAuth = 10 })
	login := func() int {
		return call(t, h, "POST", "/api/v1/auth/login", "", map[string]string{"email": "ops@example.com", "password": "wrong password"}).status
	}
	for i := 1; i <= 4; i++ {
		if s := login(); s != http.StatusUnauthorized {
			t.Fatalf("login %d with Redis up: %d", i, s)
		}
	}
	srv.Stop()
	if n := firstStatus(8, http.StatusTooManyRequests, login); n != 7 {
		t.Fatalf("with Redis stopped: first 429 at login %d after the stop, want 7 (the 11th)", n)
	}
	if limits.Fallbacks() == 0 {
		t.Error("no fallback decision counted")
	}
	if got := coretest.MetricValue(t, r.Metrics, "edgeplat_api_ratelimit_fallback_decisions_total", nil); got != float64(limits.Fallbacks()) {
		t.Errorf("metric %v, store counted %d", got, limits.Fallbacks())
	}
}

// TestRateLimitScopeIsTheInstallationIntegration: once started, the role
// counts its shared rate limits under its installation's id, so two
// installations on one Redis never share a count (and the replicas of one,
// sharing its database, always do).
func TestRateLimitScopeIsTheInstallationIntegration(t *testing.T) {
	limits := sharedLimits(t)
	d := dbtest.Migrated(t, "sqlite")
	_, _, _, svcs := roleServicesWith(t, rt.Backends{DB: d, RateLimits: limits}, nil, testLicence(t, 0), nil)
	var scope lifecycle.Service
	for _, s := range svcs {
		if s.Name() == "api-ratelimit-scope" {
			scope = s
		}
	}
	if scope == nil {
		t.Fatal("the role has shared rate limits but no service that scopes them")
	}
	if err := scope.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	in, err := d.Installation(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	limits.Limiter("global", 5, time.Minute).Take(t.Context(), "ip:192.0.2.7")
	c := goredis.NewClient(&goredis.Options{Addr: coretest.RedisAddr(t)})
	defer c.Close()
	keys, err := c.Keys(t.Context(), "edgeplat:ratelimit-test:*"+in.ID+":global:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) > 0 {
		defer c.Del(context.Background(), keys...)
	}
	if len(keys) != 1 {
		t.Errorf("keys under installation %s: %v, want the one count", in.ID, keys)
	}
}
