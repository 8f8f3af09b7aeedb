package idp

import (
	"context"
	"crypto/elliptic"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

func TestNew(t *testing.T) {
	tests := []struct {
		name         string
		cfg          config.IDP
		opts         []Option
		wantErr      string
		wantDisco    string
		wantFallback string
		wantJWKS     string
	}{
		{
			name:      "keycloak issuer",
			cfg:       config.IDP{Issuer: "https://kc.example.com/realms/plant", Audience: "edgeplat-api"},
			wantDisco: "https://kc.example.com/realms/plant/.well-known/openid-configuration",
		},
		{
			name:         "auth0 issuer with slash and bare domain",
			cfg:          config.IDP{Issuer: "https://tenant.eu.auth0.com/", Domain: "tenant.eu.auth0.com", Audience: "https://api.example.com"},
			wantDisco:    "https://tenant.eu.auth0.com/.well-known/openid-configuration",
			wantFallback: "https://tenant.eu.auth0.com/.well-known/jwks.json",
		},
		{
			name:         "domain given as URL",
			cfg:          config.IDP{Issuer: "https://tenant.auth0.com/", Domain: "https://tenant.auth0.com/", Audience: "a"},
			wantDisco:    "https://tenant.auth0.com/.well-known/openid-configuration",
			wantFallback: "https://tenant.auth0.com/.well-known/jwks.json",
		},
		{
			name:      "http on loopback",
			cfg:       config.IDP{Issuer: "http://127.0.0.1:8080/realms/dev", Audience: "a"},
			wantDisco: "http://127.0.0.1:8080/realms/dev/.well-known/openid-configuration",
		},
		{
			name:      "http on localhost",
			cfg:       config.IDP{Issuer: "http://localhost:8080/realms/dev", Audience: "a"},
			wantDisco: "http://localhost:8080/realms/dev/.well-known/openid-configuration",
		},
		{
			name:     "jwks url option skips discovery",
			cfg:      config.IDP{Issuer: "urn:example:issuer", Audience: "a"},
			opts:     []Option{WithJWKSURL("https://keys.example.com/jwks")},
			wantJWKS: "https://keys.example.com/jwks",
		},
		{name: "no issuer", cfg: config.IDP{Audience: "a"}, wantErr: "IDP_ISSUER"},
		{name: "blank issuer", cfg: config.IDP{Issuer: " / ", Audience: "a"}, wantErr: "IDP_ISSUER"},
		{name: "no audience", cfg: config.IDP{Issuer: "https://idp.example.com"}, wantErr: "IDP_AUDIENCE"},
		{name: "plain http issuer", cfg: config.IDP{Issuer: "http://idp.example.com", Audience: "a"}, wantErr: "loopback"},
		{name: "issuer not a url", cfg: config.IDP{Issuer: "idp", Audience: "a"}, wantErr: "IDP_ISSUER"},
		{
			name:    "plain http jwks url",
			cfg:     config.IDP{Issuer: "https://idp.example.com", Audience: "a"},
			opts:    []Option{WithJWKSURL("http://idp.example.com/jwks")},
			wantErr: "jwks url",
		},
		{name: "domain with path", cfg: config.IDP{Issuer: "https://idp.example.com", Domain: "idp.example.com/x", Audience: "a"}, wantErr: "IDP_DOMAIN"},
		{name: "plain http domain", cfg: config.IDP{Issuer: "https://idp.example.com", Domain: "http://idp.example.com", Audience: "a"}, wantErr: "IDP_DOMAIN"},
		{name: "nil clock", cfg: config.IDP{Issuer: "https://idp.example.com", Audience: "a"}, opts: []Option{WithClock(nil)}, wantErr: "clock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := New(tt.cfg, tt.opts...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("New() error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("New() error = %v", err)
			}
			c := v.keys
			if c.discoveryURL != tt.wantDisco || c.fallbackURL != tt.wantFallback || c.jwksURL != tt.wantJWKS {
				t.Errorf("urls = discovery %q fallback %q jwks %q, want %q %q %q",
					c.discoveryURL, c.fallbackURL, c.jwksURL, tt.wantDisco, tt.wantFallback, tt.wantJWKS)
			}
		})
	}
}

func TestVerify(t *testing.T) {
	rs256 := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	ps256 := rsaSigner(t, 1, "rsa-pss", jwt.SigningMethodPS256, true)
	rsAny := rsaSigner(t, 2, "rsa-any", jwt.SigningMethodRS512, false)
	es256 := ecSigner(t, "ec-256", jwt.SigningMethodES256, elliptic.P256(), "P-256")
	es384 := ecSigner(t, "ec-384", jwt.SigningMethodES384, elliptic.P384(), "P-384")
	p := newTestIdP(t, rs256, ps256, rsAny, es256, es384)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	iss := p.srv.URL
	now := clk.Now()

	// with returns good claims changed by f.
	with := func(f func(c jwt.MapClaims)) jwt.MapClaims {
		c := claimsAt(iss, now)
		f(c)
		return c
	}
	// as signs claims with s's key but names another kid or algorithm.
	as := func(s *signer, kid string, method jwt.SigningMethod, c jwt.MapClaims) string {
		tok := jwt.NewWithClaims(method, c)
		tok.Header["kid"] = kid
		raw, err := tok.SignedString(s.priv)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&testRSAKey(t, 0).PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})

	tests := []struct {
		name  string
		token string
		want  *Identity // nil: the token must be refused
	}{
		{
			name:  "RS256",
			token: rs256.sign(t, claimsAt(iss, now)),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{
			name:  "ES256",
			token: es256.sign(t, claimsAt(iss, now)),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{name: "ES384", token: es384.sign(t, claimsAt(iss, now)), want: &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss}},
		{name: "PS256", token: ps256.sign(t, claimsAt(iss, now)), want: &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss}},
		{name: "RS512 with a key that pins no alg", token: rsAny.sign(t, claimsAt(iss, now)), want: &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss}},
		{
			name:  "RS256 with a key that pins no alg",
			token: as(rsAny, "rsa-any", jwt.SigningMethodRS256, claimsAt(iss, now)),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{
			name:  "issuer with trailing slash",
			token: rs256.sign(t, with(func(c jwt.MapClaims) { c["iss"] = iss + "/" })),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss + "/"},
		},
		{
			name:  "audience list containing ours",
			token: rs256.sign(t, with(func(c jwt.MapClaims) { c["aud"] = []string{"https://tenant.auth0.com/userinfo", testAudience} })),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{
			name:  "email_verified as a string",
			token: rs256.sign(t, with(func(c jwt.MapClaims) { c["email_verified"] = "true" })),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{
			name:  "no e-mail claims",
			token: rs256.sign(t, with(func(c jwt.MapClaims) { delete(c, "email"); delete(c, "email_verified"); delete(c, "name") })),
			want:  &Identity{Subject: "auth0|user-1", Issuer: iss},
		},
		{
			name:  "expired within leeway",
			token: rs256.sign(t, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-30 * time.Second).Unix() })),
			want:  &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{
			name: "nbf and iat just ahead, within leeway",
			token: rs256.sign(t, with(func(c jwt.MapClaims) {
				c["nbf"] = now.Add(30 * time.Second).Unix()
				c["iat"] = now.Add(30 * time.Second).Unix()
			})),
			want: &Identity{Subject: "auth0|user-1", Email: "ada@example.com", EmailVerified: true, Name: "Ada Lovelace", Issuer: iss},
		},
		{name: "wrong issuer", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["iss"] = "https://evil.example.com/" }))},
		{name: "issuer prefix only", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["iss"] = iss + "/other" }))},
		{name: "no issuer", token: rs256.sign(t, with(func(c jwt.MapClaims) { delete(c, "iss") }))},
		{name: "wrong audience", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["aud"] = "https://other-api.example.com" }))},
		{name: "no audience", token: rs256.sign(t, with(func(c jwt.MapClaims) { delete(c, "aud") }))},
		{name: "expired", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["exp"] = now.Add(-2 * time.Minute).Unix() }))},
		{name: "no exp", token: rs256.sign(t, with(func(c jwt.MapClaims) { delete(c, "exp") }))},
		{name: "nbf in the future", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["nbf"] = now.Add(2 * time.Minute).Unix() }))},
		{name: "iat in the future", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["iat"] = now.Add(2 * time.Minute).Unix() }))},
		{name: "no sub", token: rs256.sign(t, with(func(c jwt.MapClaims) { delete(c, "sub") }))},
		{name: "email_verified of the wrong type", token: rs256.sign(t, with(func(c jwt.MapClaims) { c["email_verified"] = 1 }))},
		{name: "alg none", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodNone, claimsAt(iss, now))
			tok.Header["kid"] = "rsa-1"
			raw, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}()},
		{name: "HS256 keyed with the RSA public key", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodHS256, claimsAt(iss, now))
			tok.Header["kid"] = "rsa-1"
			raw, err := tok.SignedString(pubPEM)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}()},
		{name: "RS256 token naming an EC key", token: as(rs256, "ec-256", jwt.SigningMethodRS256, claimsAt(iss, now))},
		{name: "ES256 token naming an RSA key", token: as(es256, "rsa-1", jwt.SigningMethodES256, claimsAt(iss, now))},
		{name: "ES384 token naming a P-256 key", token: as(es384, "ec-256", jwt.SigningMethodES384, claimsAt(iss, now))},
		{name: "PS256 token naming a key pinned to RS256", token: as(rs256, "rsa-1", jwt.SigningMethodPS256, claimsAt(iss, now))},
		{name: "RS512 token naming a key pinned to RS256", token: as(rs256, "rsa-1", jwt.SigningMethodRS512, claimsAt(iss, now))},
		{name: "signed by another key under a known kid", token: as(rsAny, "rsa-1", jwt.SigningMethodRS256, claimsAt(iss, now))},
		{name: "tampered signature", token: tamper(rs256.sign(t, claimsAt(iss, now)))},
		{name: "tampered claims", token: func() string {
			raw := rs256.sign(t, claimsAt(iss, now))
			parts := strings.Split(raw, ".")
			parts[1] = b64([]byte(`{"iss":"` + iss + `","sub":"admin","aud":"` + testAudience + `","exp":4102444800}`))
			return strings.Join(parts, ".")
		}()},
		{name: "no kid", token: as(rs256, "", jwt.SigningMethodRS256, claimsAt(iss, now))},
		{name: "crit header", token: func() string {
			tok := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsAt(iss, now))
			tok.Header["kid"] = "rsa-1"
			tok.Header["crit"] = []string{"exp"}
			raw, err := tok.SignedString(rs256.priv)
			if err != nil {
				t.Fatal(err)
			}
			return raw
		}()},
		{name: "empty", token: ""},
		{name: "not a JWT", token: "not-a-jwt"},
		{name: "three empty parts", token: ".."},
		{name: "too long", token: strings.Repeat("a", maxTokenBytes+1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id, err := v.Verify(t.Context(), tt.token)
			if tt.want == nil {
				if err == nil {
					t.Fatalf("Verify() = %+v, want an error", id)
				}
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("Verify() error = %v, does not wrap ErrInvalid", err)
				}
				t.Logf("refused: %v", err)
				return
			}
			if err != nil {
				t.Fatalf("Verify() error = %v", err)
			}
			if id != *tt.want {
				t.Errorf("Verify() = %+v, want %+v", id, *tt.want)
			}
		})
	}
	// One fetch served every case: none of the refused tokens named an
	// unknown kid, and the clock never moved.
	if got := p.jwksHits.Load(); got != 1 {
		t.Errorf("jwks fetched %d times, want 1", got)
	}
}

// TestVerifyDetachedClaims checks that a token's claims cannot be reused
// with another signature: a valid signature from one token on another
// token's payload must fail.
func TestVerifyDetachedClaims(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	a := strings.Split(s.sign(t, claimsAt(p.srv.URL, clk.Now())), ".")
	other := claimsAt(p.srv.URL, clk.Now())
	other["sub"] = "someone-else"
	b := strings.Split(s.sign(t, other), ".")
	spliced := a[0] + "." + b[1] + "." + a[2]
	if _, err := v.Verify(t.Context(), spliced); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Verify(spliced) error = %v, want ErrInvalid", err)
	}
}

func TestVerifyContextCancelled(t *testing.T) {
	s := rsaSigner(t, 0, "rsa-1", jwt.SigningMethodRS256, true)
	p := newTestIdP(t, s)
	gate := make(chan struct{})
	p.set(func(p *testIdP) { p.gate = gate })
	clk := newFakeClock()
	v := p.verifier(t, clk, config.IDP{})
	tok := s.sign(t, claimsAt(p.srv.URL, clk.Now()))

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := v.Verify(ctx, tok)
	if !errors.Is(err, ErrInvalid) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Verify(cancelled) error = %v, want ErrInvalid and context.Canceled", err)
	}
	// The fetch the cancelled caller started carries on for others: once
	// the provider answers, the next caller joins it or finds its keys.
	close(gate)
	if _, err := v.Verify(t.Context(), tok); err != nil {
		t.Fatalf("Verify() after the fetch error = %v", err)
	}
	if got := p.jwksHits.Load(); got != 1 {
		t.Errorf("jwks fetched %d times, want 1", got)
	}
}
