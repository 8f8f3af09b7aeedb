package token

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// TestLifetimeSettings: JWT_ACCESS_TOKEN_EXPIRY and JWT_REFRESH_TOKEN_EXPIRY,
// changed from 15m and 7d, are the lifetimes of the tokens signed, and
// verification holds to them.
func TestLifetimeSettings(t *testing.T) {
	s := mustNew(t, config.JWT{Secret: config.Secret(secret), AccessTokenExpiry: 3 * time.Minute, RefreshTokenExpiry: 2 * time.Hour})
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return start }
	for kind, ttl := range map[Kind]time.Duration{Access: 3 * time.Minute, Refresh: 2 * time.Hour} {
		raw, c, err := s.Sign(Claims{Subject: "u", Tenant: "t", Kind: kind})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.ExpiresAt.Sub(c.IssuedAt); got != ttl {
			t.Errorf("%v token lives %s, want %s", kind, got, ttl)
		}
		s.now = func() time.Time { return start.Add(ttl + time.Minute) }
		if _, err := s.Verify(raw, kind); err == nil {
			t.Errorf("%v token accepted a minute after its %s lifetime", kind, ttl)
		}
		s.now = func() time.Time { return start }
	}
}
