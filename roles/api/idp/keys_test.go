package idp

import (
	"bytes"
	"crypto/elliptic"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

func TestDiscoveryThenCache(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	for i := range 3 {
		if _, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now()))); err != nil {
			t.Fatalf("Verify() #%d error = %v", i, err)
		}
	}
	if d, j := p.discoveryHits.Load(), p.jwksHits.Load(); d != 1 || j != 1 {
		t.Errorf("discovery fetched %d times, jwks %d times; want 1 and 1", d, j)
	}
}

func TestDiscoveryFailures(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	tests := []struct {
		name      string
		setup     func(p *testIdP)
		domain    bool // configure IDP_DOMAIN as the test server
		wantOK    bool
		wantJWKSs int64
	}{
		{name: "no discovery document, domain fallback", setup: func(p *testIdP) { p.discovery = false }, domain: true, wantOK: true, wantJWKSs: 1},
		{name: "no discovery document, no domain", setup: func(p *testIdP) { p.discovery = false }},
		{name: "document for another issuer", setup: func(p *testIdP) { p.docIssuer = "https://evil.example.com" }, domain: true},
		{name: "document issuer with trailing slash", setup: func(p *testIdP) { p.docIssuer = p.srv.URL + "/" }, wantOK: true, wantJWKSs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestIdP(t, s)
			p.set(tt.setup)
			cfg := config.IDP{}
			if tt.domain {
				cfg.Domain = p.srv.URL
			}
			clk := newFakeClock()
			v := p.verifier(t, clk, cfg)
			_, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now())))
			if tt.wantOK && err != nil {
				t.Fatalf("Verify() error = %v", err)
			}
			if !tt.wantOK && (!errors.Is(err, ErrInvalid) || !errors.Is(err, ErrUnavailable)) {
				t.Fatalf("Verify() error = %v, want ErrInvalid and ErrUnavailable", err)
			}
			if got := p.jwksHits.Load(); got != tt.wantJWKSs {
				t.Errorf("jwks fetched %d times, want %d", got, tt.wantJWKSs)
			}
		})
	}
}

func TestJWKSURLOption(t *testing.T) {
	s := ecSigner(t, "ec-1", jwt.SigningMethodES256, elliptic.P256(), "P-256")
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{Issuer: "urn:example:idp"}, WithJWKSURL(p.srv.URL+"/jwks"))
	if _, err := v.Verify(t.Context(), s.sign(t, claimsAt("urn:example:idp", clk.Now()))); err != nil {
		t.Fatalf("Verify() error = %v", err)
	}
	if d := p.discoveryHits.Load(); d != 0 {
		t.Errorf("discovery fetched %d times with an explicit JWKS URL", d)
	}
}

// TestKeyRotation: a token signed with a key published after the first
// fetch is accepted once the throttle allows one refresh.
func TestKeyRotation(t *testing.T) {
	oldKey := rsaSigner(t, 0, "2024-key", jwt.SigningMethodRS256, true)
	newKey := rsaSigner(t, 1, "2025-key", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, oldKey)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	verify := func(s *signer) error {
		_, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now())))
		return err
	}

	if err := verify(oldKey); err != nil {
		t.Fatalf("Verify(old) error = %v", err)
	}
	p.setKeys(oldKey, newKey)

	// Right after a fetch the throttle holds: the new kid is unknown.
	if err := verify(newKey); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Verify(new) inside the throttle window error = %v, want ErrInvalid", err)
	}
	if got := p.jwksHits.Load(); got != 1 {
		t.Fatalf("jwks fetched %d times inside the throttle window, want 1", got)
	}

	clk.Advance(minRefreshInterval)
	if err := verify(newKey); err != nil {
		t.Fatalf("Verify(new) after the window error = %v", err)
	}
	if err := verify(oldKey); err != nil {
		t.Fatalf("Verify(old) after the refresh error = %v", err)
	}
	if got := p.jwksHits.Load(); got != 2 {
		t.Errorf("jwks fetched %d times, want 2 (one refresh for the new kid)", got)
	}
}

// TestUnknownKidFlood: tokens with made-up kids cause at most one fetch per
// minRefreshInterval, however many arrive.
func TestUnknownKidFlood(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	if _, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now()))); err != nil {
		t.Fatal(err)
	}

	flood := func(round int) {
		t.Helper()
		var wg sync.WaitGroup
		for i := range 50 {
			wg.Go(func() {
				forged := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsAt(p.srv.URL, clk.Now()))
				forged.Header["kid"] = fmt.Sprintf("made-up-%d-%d", round, i)
				raw, err := forged.SignedString(s.priv)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := v.Verify(t.Context(), raw); !errors.Is(err, ErrInvalid) {
					t.Errorf("Verify(unknown kid) error = %v, want ErrInvalid", err)
				}
			})
		}
		wg.Wait()
	}

	steps := []struct {
		advance  time.Duration
		wantJWKS int64
	}{
		{0, 1},                                // just fetched: throttled
		{minRefreshInterval - time.Second, 1}, // still inside the window
		{time.Second, 2},                      // window over: exactly one refresh
		{0, 2},                                // and throttled again
		{minRefreshInterval / 2, 2},           // ...
		{minRefreshInterval / 2, 3},           // next window: one more
		{10 * minRefreshInterval, 4},          // a long pause still allows only one
	}
	for i, st := range steps {
		clk.Advance(st.advance)
		flood(i)
		if got := p.jwksHits.Load(); got != st.wantJWKS {
			t.Fatalf("step %d: jwks fetched %d times, want %d", i, got, st.wantJWKS)
		}
	}
	// The genuine key still verifies after all that.
	if _, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now()))); err != nil {
		t.Fatalf("Verify(genuine) error = %v", err)
	}
}

// TestConcurrentFirstUse: callers arriving together on a cold cache share
// one fetch and all succeed; none is turned away by the throttle.
func TestConcurrentFirstUse(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	tok := s.sign(t, claimsAt(p.srv.URL, clk.Now()))
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			if _, err := v.Verify(t.Context(), tok); err != nil {
				t.Errorf("Verify() error = %v", err)
			}
		})
	}
	wg.Wait()
	if d, j := p.discoveryHits.Load(), p.jwksHits.Load(); d != 1 || j != 1 {
		t.Errorf("discovery fetched %d times, jwks %d times; want 1 and 1", d, j)
	}
}

// TestProviderDown: once keys were fetched, an unreachable provider does
// not stop tokens signed with known keys, before or after the cache
// expires.
func TestProviderDown(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	verify := func() error {
		_, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now())))
		return err
	}
	if err := verify(); err != nil {
		t.Fatal(err)
	}
	p.srv.Close()

	if err := verify(); err != nil {
		t.Fatalf("Verify() with the provider down, cache fresh: %v", err)
	}
	clk.Advance(2 * defaultMaxAge)
	if err := verify(); err != nil {
		t.Fatalf("Verify() with the provider down, cache expired: %v", err)
	}
	v.keys.mu.Lock()
	lastErr := v.keys.lastErr
	v.keys.mu.Unlock()
	if lastErr == nil {
		t.Error("no refresh failure recorded after the cache expired")
	}
}

// TestRefreshErrorKeepsKeys: a provider answering errors or a bad set on
// refresh leaves the last good keys in place.
func TestRefreshErrorKeepsKeys(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	tests := []struct {
		name  string
		fault func(p *testIdP)
	}{
		{"status 503", func(p *testIdP) { p.jwksStatus = http.StatusServiceUnavailable }},
		{"not json", func(p *testIdP) { p.jwksBody = []byte("<html>maintenance</html>") }},
		{"no usable key", func(p *testIdP) { p.jwksBody = []byte(`{"keys":[{"kty":"oct","kid":"x","k":"c2VjcmV0"}]}`) }},
		{"body over the cap", func(p *testIdP) { p.jwksBody = oversizedSet() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestIdP(t, s)
			clk := newFakeClock()
			v := p.verifier(t, clk, config.IDP{})
			verify := func() error {
				_, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now())))
				return err
			}
			if err := verify(); err != nil {
				t.Fatal(err)
			}
			p.set(tt.fault)
			clk.Advance(2 * defaultMaxAge)
			if err := verify(); err != nil {
				t.Fatalf("Verify() after a failed refresh: %v", err)
			}
			if got := p.jwksHits.Load(); got != 2 {
				t.Errorf("jwks fetched %d times, want 2", got)
			}
		})
	}
}

// TestFirstFetchFails: with no keys ever fetched, Verify reports the
// provider as unavailable, and retries only after the throttle window.
func TestFirstFetchFails(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	tests := []struct {
		name  string
		fault func(p *testIdP)
	}{
		{"status 500", func(p *testIdP) { p.jwksStatus = http.StatusInternalServerError }},
		{"body over the cap", func(p *testIdP) { p.jwksBody = oversizedSet() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestIdP(t, s)
			p.set(tt.fault)
			clk := newFakeClock()
			v := p.verifier(t, clk, config.IDP{})
			tok := s.sign(t, claimsAt(p.srv.URL, clk.Now()))
			for range 2 {
				if _, err := v.Verify(t.Context(), tok); !errors.Is(err, ErrInvalid) || !errors.Is(err, ErrUnavailable) {
					t.Fatalf("Verify() error = %v, want ErrInvalid and ErrUnavailable", err)
				}
			}
			if got := p.jwksHits.Load(); got != 1 {
				t.Fatalf("jwks fetched %d times inside the window, want 1", got)
			}
			p.set(func(p *testIdP) { p.jwksStatus, p.jwksBody = 0, nil })
			clk.Advance(minRefreshInterval)
			if _, err := v.Verify(t.Context(), tok); err != nil {
				t.Fatalf("Verify() once the provider recovered: %v", err)
			}
		})
	}
}

// oversizedSet is a syntactically valid JWK set larger than maxBodyBytes.
func oversizedSet() []byte {
	var b bytes.Buffer
	b.WriteString(`{"keys":[],"pad":"`)
	b.Write(bytes.Repeat([]byte("x"), maxBodyBytes))
	b.WriteString(`"}`)
	return b.Bytes()
}

func TestCacheMaxAgeHonoured(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	tests := []struct {
		name         string
		cacheControl string
		fresh        time.Duration // still served from cache at this age
	}{
		{"max-age 600", "public, max-age=600", 600 * time.Second},
		{"absent", "", defaultMaxAge},
		{"below the floor", "max-age=10", minMaxAge},
		{"above the ceiling", "max-age=31536000", maxMaxAge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newTestIdP(t, s)
			p.set(func(p *testIdP) { p.cacheControl = tt.cacheControl })
			clk := newFakeClock()
			v := p.verifier(t, clk, config.IDP{})
			verify := func() {
				t.Helper()
				if _, err := v.Verify(t.Context(), s.sign(t, claimsAt(p.srv.URL, clk.Now()))); err != nil {
					t.Fatal(err)
				}
			}
			verify()
			clk.Advance(tt.fresh - time.Second)
			verify()
			if got := p.jwksHits.Load(); got != 1 {
				t.Fatalf("jwks fetched %d times before max-age, want 1", got)
			}
			clk.Advance(time.Second)
			verify()
			if got := p.jwksHits.Load(); got != 2 {
				t.Fatalf("jwks fetched %d times at max-age, want 2", got)
			}
		})
	}
}

func TestCacheMaxAge(t *testing.T) {
	tests := []struct {
		header string
		want   time.Duration
	}{
		{"", defaultMaxAge},
		{"max-age=3600", time.Hour},
		{"public, max-age=7200, must-revalidate", 2 * time.Hour},
		{"MAX-AGE=900", 15 * time.Minute},
		{`max-age="900"`, 15 * time.Minute},
		{"max-age=0", minMaxAge},
		{"max-age=60", minMaxAge},
		{"max-age=999999999999999999", maxMaxAge},
		{"max-age=-5", defaultMaxAge},
		{"max-age=soon", defaultMaxAge},
		{"no-cache", minMaxAge},
		{"no-store", minMaxAge},
		{"no-cache, max-age=1800", 30 * time.Minute},
		{"max-age=1800, max-age=60", 30 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.header, func(t *testing.T) {
			if got := cacheMaxAge(tt.header); got != tt.want {
				t.Errorf("cacheMaxAge(%q) = %v, want %v", tt.header, got, tt.want)
			}
		})
	}
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		url    string
		wantOK bool
	}{
		{"https://idp.example.com/jwks", true},
		{"https://idp.example.com:8443/realms/x/protocol/openid-connect/certs", true},
		{"http://127.0.0.1:8080/jwks", true},
		{"http://127.5.6.7/jwks", true},
		{"http://[::1]:8080/jwks", true},
		{"http://localhost:8080/jwks", true},
		{"http://LOCALHOST/jwks", true},
		{"http://idp.example.com/jwks", false},
		{"http://127.0.0.1.nip.io/jwks", false},
		{"http://10.0.0.1/jwks", false},
		{"ftp://idp.example.com/jwks", false},
		{"/jwks", false},
		{"https:///jwks", false},
		{"https://user:pw@idp.example.com/jwks", false},
		{"https://idp.example.com/jwks#x", false},
		{"://bad", false},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			err := checkURL(tt.url)
			if (err == nil) != tt.wantOK {
				t.Errorf("checkURL(%q) error = %v, want ok %v", tt.url, err, tt.wantOK)
			}
		})
	}
}

// TestDefaultClientRedirects: the default client refuses a redirect from
// https to plain http on a non-loopback host.
func TestDefaultClientRedirects(t *testing.T) {
	c := defaultClient()
	req, err := http.NewRequest(http.MethodGet, "http://idp.example.com/jwks", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckRedirect(req, []*http.Request{{}}); err == nil {
		t.Error("redirect to plain http allowed")
	}
	req, err = http.NewRequest(http.MethodGet, "https://cdn.example.com/jwks", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.CheckRedirect(req, []*http.Request{{}}); err != nil {
		t.Errorf("redirect to https refused: %v", err)
	}
	if err := c.CheckRedirect(req, make([]*http.Request, maxRedirects)); err == nil {
		t.Error("redirect chain over the limit allowed")
	}
}
