package token

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

const secret = "0123456789abcdef0123456789abcdef"

func hsConfig() config.JWT {
	return config.JWT{Secret: config.Secret(secret), AccessTokenExpiry: 15 * time.Minute, RefreshTokenExpiry: 7 * 24 * time.Hour}
}

func newRSA(t *testing.T) (*rsa.PrivateKey, string, string) {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	priv := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	pubDER, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pub := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	return k, priv, pub
}

func mustNew(t *testing.T, cfg config.JWT) *Service {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTrip(t *testing.T) {
	_, priv, pub := newRSA(t)
	dir := t.TempDir()
	privFile := filepath.Join(dir, "jwt.pem")
	if err := os.WriteFile(privFile, []byte(priv), 0o600); err != nil {
		t.Fatal(err)
	}
	rs := hsConfig()
	rs.Secret = ""
	rsFile := rs
	rs.PrivateKey, rs.PublicKey = config.Secret(priv), pub
	rsFile.PrivateKey = config.Secret(privFile)

	for _, tt := range []struct {
		name string
		cfg  config.JWT
		alg  string
	}{
		{"HS256", hsConfig(), "HS256"},
		{"RS256 PEM text", rs, "RS256"},
		{"RS256 key file", rsFile, "RS256"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := mustNew(t, tt.cfg)
			if s.Algorithm() != tt.alg {
				t.Fatalf("algorithm %s, want %s", s.Algorithm(), tt.alg)
			}
			for _, kind := range []Kind{Access, Refresh} {
				raw, issued, err := s.Sign(Claims{Subject: "u1", Tenant: "t1", Role: "admin", Kind: kind, Family: "f1"})
				if err != nil {
					t.Fatal(err)
				}
				got, err := s.Verify(raw, kind)
				if err != nil {
					t.Fatalf("verify %s: %v", kind, err)
				}
				if got != issued {
					t.Errorf("claims %+v, issued %+v", got, issued)
				}
				ttl := tt.cfg.AccessTokenExpiry
				if kind == Refresh {
					ttl = tt.cfg.RefreshTokenExpiry
				}
				if got.ExpiresAt.Sub(got.IssuedAt) != ttl {
					t.Errorf("%s lifetime %s, want %s", kind, got.ExpiresAt.Sub(got.IssuedAt), ttl)
				}
			}
		})
	}
}

func TestVerifyRefuses(t *testing.T) {
	hs := mustNew(t, hsConfig())
	k, priv, pub := newRSA(t)
	rsCfg := hsConfig()
	rsCfg.Secret, rsCfg.PrivateKey = "", config.Secret(priv)
	rs := mustNew(t, rsCfg)

	sign := func(method jwt.SigningMethod, key any, claims jwt.Claims) string {
		raw, err := jwt.NewWithClaims(method, claims).SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	now := time.Now()
	good := func() wireClaims {
		return wireClaims{Tenant: "t1", Kind: Access, RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Subject: "u1", IssuedAt: jwt.NewNumericDate(now), ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute))}}
	}
	with := func(f func(*wireClaims)) wireClaims { c := good(); f(&c); return c }
	refresh, _, _ := hs.Sign(Claims{Subject: "u1", Tenant: "t1", Kind: Refresh})
	access, _, _ := hs.Sign(Claims{Subject: "u1", Tenant: "t1", Kind: Access})
	other := mustNew(t, config.JWT{Secret: config.Secret(strings.Repeat("x", 32)), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	foreign, _, _ := other.Sign(Claims{Subject: "u1", Tenant: "t1", Kind: Access})

	for _, tt := range []struct {
		name string
		svc  *Service
		raw  string
		want Kind
	}{
		{"refresh token used as access", hs, refresh, Access},
		{"access token used as refresh", hs, access, Refresh},
		{"signed with another secret", hs, foreign, Access},
		{"expired", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) {
			c.ExpiresAt = jwt.NewNumericDate(now.Add(-time.Minute))
		})), Access},
		{"no exp", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) { c.ExpiresAt = nil })), Access},
		{"wrong issuer", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) { c.Issuer = "someone" })), Access},
		{"no tenant", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) { c.Tenant = "" })), Access},
		{"no kind", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) { c.Kind = "" })), Access},
		{"issued in the future", hs, sign(jwt.SigningMethodHS256, []byte(secret), with(func(c *wireClaims) {
			c.IssuedAt = jwt.NewNumericDate(now.Add(time.Hour))
		})), Access},
		{"HS512 with the right secret", hs, sign(jwt.SigningMethodHS512, []byte(secret), good()), Access},
		{"alg none", hs, sign(jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, good()), Access},
		// The classic confusion: an RS256 verifier fed an HS256 token whose
		// HMAC key is the (public) RSA key.
		{"HS256 signed with the RSA public key", rs, sign(jwt.SigningMethodHS256, []byte(pub), good()), Access},
		{"RS256 token to an HS256 service", hs, sign(jwt.SigningMethodRS256, k, good()), Access},
		{"garbage", hs, "not.a.jwt", Access},
		{"empty", hs, "", Access},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := tt.svc.Verify(tt.raw, tt.want); !errors.Is(err, ErrInvalid) {
				t.Fatalf("Verify = %+v, %v; want ErrInvalid", c, err)
			}
		})
	}
}

func TestNewRefuses(t *testing.T) {
	_, priv, _ := newRSA(t)
	_, _, otherPub := newRSA(t)
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	smallPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)}))
	base := hsConfig()
	for _, tt := range []struct {
		name string
		edit func(*config.JWT)
		want string
	}{
		{"no key", func(c *config.JWT) { c.Secret = "" }, "no signing key"},
		{"short secret", func(c *config.JWT) { c.Secret = "short" }, "at least 32 bytes, got 5"},
		{"bad private key", func(c *config.JWT) { c.PrivateKey = "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n" }, "JWT_PRIVATE_KEY"},
		{"missing key file", func(c *config.JWT) { c.PrivateKey = "/nonexistent/key.pem" }, "neither PEM text nor a readable file"},
		{"mismatched public key", func(c *config.JWT) { c.PrivateKey, c.PublicKey = config.Secret(priv), otherPub }, "not the public half"},
		{"1024-bit key", func(c *config.JWT) { c.PrivateKey = config.Secret(smallPEM) }, "at least 2048"},
		{"zero lifetime", func(c *config.JWT) { c.AccessTokenExpiry = 0 }, "lifetimes must be positive"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := base
			tt.edit(&c)
			if _, err := New(c); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, want error containing %q", err, tt.want)
			}
		})
	}
}

func TestVerifyOnly(t *testing.T) {
	_, priv, pub := newRSA(t)
	signer := mustNew(t, config.JWT{PrivateKey: config.Secret(priv), AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	verifier := mustNew(t, config.JWT{PublicKey: pub, AccessTokenExpiry: time.Minute, RefreshTokenExpiry: time.Hour})
	if verifier.CanSign() {
		t.Fatal("a public key alone must not sign")
	}
	if _, _, err := verifier.Sign(Claims{Subject: "u", Tenant: "t", Kind: Access}); err == nil {
		t.Fatal("verify-only service signed a token")
	}
	raw, _, err := signer.Sign(Claims{Subject: "u", Tenant: "t", Kind: Access})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(raw, Access); err != nil {
		t.Fatalf("verifier refused the signer's token: %v", err)
	}
}

func TestExpiryUsesClock(t *testing.T) {
	s := mustNew(t, hsConfig())
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return start }
	raw, _, err := s.Sign(Claims{Subject: "u", Tenant: "t", Kind: Access})
	if err != nil {
		t.Fatal(err)
	}
	s.now = func() time.Time { return start.Add(15*time.Minute - time.Second) }
	if _, err := s.Verify(raw, Access); err != nil {
		t.Fatalf("valid just before expiry: %v", err)
	}
	s.now = func() time.Time { return start.Add(15*time.Minute + 6*time.Second) }
	if _, err := s.Verify(raw, Access); !errors.Is(err, ErrInvalid) {
		t.Fatalf("accepted after expiry and leeway: %v", err)
	}
}
