// Package token issues and verifies the Cloud API's own JWTs: short-lived
// access tokens that REST calls carry as `Authorization: Bearer`, and
// refresh tokens that only the refresh endpoint takes.
//
// One deployment signs with exactly one algorithm, HS256 with JWT_SECRET or
// RS256 with JWT_PRIVATE_KEY/JWT_PUBLIC_KEY, and verification accepts that
// algorithm only, so a token signed with the public key as an HMAC secret or
// with "none" is refused. Every token carries an expiry, the issuer and its
// kind; an access token is never accepted where a refresh token is expected
// and vice versa, because a leaked long-lived refresh token must not open
// the API.
package token

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	apisecret "github.com/edgeplat/edgeplat/roles/api/secret"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the iss claim of every token this API signs.
const Issuer = "edgeplat"

// Kind tells an access token from a refresh token (claim "typ").
type Kind string

// The two kinds of token.
const (
	Access  Kind = "access"
	Refresh Kind = "refresh"
)

// ErrInvalid wraps every verification failure. Callers answer 401 and do
// not show the detail to the client, which could otherwise probe for it.
var ErrInvalid = errors.New("invalid token")

// Claims are what a token asserts. Tenant comes from here and never from a
// request body, so a caller cannot reach another tenant's records.
type Claims struct {
	// Subject is the user id.
	Subject string
	Tenant  string
	Role    string
	Kind    Kind
	// Family is the session: the refresh tokens of one login, so reuse of
	// a rotated one can revoke them all, and the access tokens issued with
	// them, so that ending the session ends those too.
	Family string
	// Operator marks a token minted with the signing key itself (edgeplat
	// token) rather than at a sign-in: it belongs to no account or session,
	// so nothing but its expiry or a new key ends it.
	Operator bool
	// ID is the token's unique id (jti).
	ID        string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// wireClaims is the JSON form. Short names keep headers small.
type wireClaims struct {
	Tenant   string `json:"tid"`
	Role     string `json:"role,omitempty"`
	Kind     Kind   `json:"typ"`
	Family   string `json:"fam,omitempty"`
	Operator bool   `json:"op,omitempty"`
	jwt.RegisteredClaims
}

// Service signs and verifies tokens with one key.
type Service struct {
	method     jwt.SigningMethod
	signKey    any // nil: verify only
	verifyKey  any
	accessTTL  time.Duration
	refreshTTL time.Duration
	now        func() time.Time
}

// New builds a Service from the jwt section. An RS256 private key selects
// RS256 (its public half verifies unless JWT_PUBLIC_KEY is given); a public
// key alone makes a verify-only service for replicas that never sign;
// otherwise JWT_SECRET (config.ValidateJWTSecret) selects HS256. Key values are PEM
// text or a path to a PEM file.
func New(cfg config.JWT) (*Service, error) {
	s := &Service{accessTTL: cfg.AccessTokenExpiry, refreshTTL: cfg.RefreshTokenExpiry, now: time.Now}
	switch {
	case cfg.PrivateKey.IsSet() || cfg.PublicKey != "":
		s.method = jwt.SigningMethodRS256
		var pub *rsa.PublicKey
		if cfg.PrivateKey.IsSet() {
			priv, err := loadRSAPrivate(cfg.PrivateKey.Reveal())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", config.Label("jwt.private_key"), err)
			}
			s.signKey, pub = priv, &priv.PublicKey
		}
		if cfg.PublicKey != "" {
			p, err := loadRSAPublic(cfg.PublicKey)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", config.Label("jwt.public_key"), err)
			}
			if priv, ok := s.signKey.(*rsa.PrivateKey); ok && !priv.PublicKey.Equal(p) {
				return nil, fmt.Errorf("%s is not the public half of %s", config.Label("jwt.public_key"), config.Label("jwt.private_key"))
			}
			pub = p
		}
		if pub.N.BitLen() < 2048 {
			return nil, fmt.Errorf("jwt RSA key has %d bits, at least 2048 are required", pub.N.BitLen())
		}
		s.verifyKey = pub
	case cfg.Secret.IsSet():
		if err := config.ValidateJWTSecret(cfg.Secret.Reveal()); err != nil {
			return nil, err
		}
		secret := []byte(cfg.Secret.Reveal())
		s.method, s.signKey, s.verifyKey = jwt.SigningMethodHS256, secret, secret
	default:
		return nil, fmt.Errorf("no signing key: set %s, at least %d bytes, or %s", config.Label("jwt.secret"), config.MinJWTSecretLen, config.Label("jwt.private_key"))
	}
	if s.accessTTL <= 0 || s.refreshTTL <= 0 {
		return nil, fmt.Errorf("token lifetimes must be positive, got access %s, refresh %s", s.accessTTL, s.refreshTTL)
	}
	return s, nil
}

// Algorithm names the signing algorithm, for logs.
func (s *Service) Algorithm() string { return s.method.Alg() }

// AccessTTL is the lifetime of access tokens (the login response's expiresIn).
func (s *Service) AccessTTL() time.Duration { return s.accessTTL }

// CanSign reports whether this service holds a signing key.
func (s *Service) CanSign() bool { return s.signKey != nil }

// Sign issues a token of c.Kind for c.Subject in c.Tenant. ID, IssuedAt and
// ExpiresAt are filled in; the filled claims are returned with the token.
func (s *Service) Sign(c Claims) (string, Claims, error) {
	if s.signKey == nil {
		return "", Claims{}, errors.New("sign token: this service has a public key only")
	}
	if c.Subject == "" || c.Tenant == "" {
		return "", Claims{}, errors.New("sign token: subject and tenant are required")
	}
	ttl := s.accessTTL
	switch c.Kind {
	case Access:
	case Refresh:
		ttl = s.refreshTTL
	default:
		return "", Claims{}, fmt.Errorf("sign token: unknown kind %q", c.Kind)
	}
	now := s.now().Truncate(time.Second)
	c.IssuedAt, c.ExpiresAt = now, now.Add(ttl)
	if c.ID == "" {
		c.ID = randomID()
	}
	w := wireClaims{Tenant: c.Tenant, Role: c.Role, Kind: c.Kind, Family: c.Family, Operator: c.Operator,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Subject: c.Subject, ID: c.ID,
			IssuedAt: jwt.NewNumericDate(c.IssuedAt), ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
		}}
	signed, err := jwt.NewWithClaims(s.method, w).SignedString(s.signKey)
	if err != nil {
		return "", Claims{}, fmt.Errorf("sign token: %w", err)
	}
	return signed, c, nil
}

// Verify checks raw's signature, algorithm, issuer, expiry and kind and
// returns its claims. Every failure wraps ErrInvalid.
func (s *Service) Verify(raw string, want Kind) (Claims, error) {
	var w wireClaims
	_, err := jwt.ParseWithClaims(raw, &w, func(*jwt.Token) (any, error) { return s.verifyKey, nil },
		jwt.WithValidMethods([]string{s.method.Alg()}),
		jwt.WithIssuer(Issuer),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(5*time.Second),
		jwt.WithTimeFunc(s.now),
	)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if w.Kind != want {
		return Claims{}, fmt.Errorf("%w: a %s token where a %s token is required", ErrInvalid, w.Kind, want)
	}
	if w.Subject == "" || w.Tenant == "" {
		return Claims{}, fmt.Errorf("%w: subject or tenant missing", ErrInvalid)
	}
	c := Claims{Subject: w.Subject, Tenant: w.Tenant, Role: w.Role, Kind: w.Kind, Family: w.Family, Operator: w.Operator, ID: w.ID,
		ExpiresAt: w.ExpiresAt.Time}
	if w.IssuedAt != nil {
		c.IssuedAt = w.IssuedAt.Time
	}
	return c, nil
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func loadRSAPrivate(v string) (*rsa.PrivateKey, error) {
	blk, err := apisecret.PEMBlock(v)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKCS1PrivateKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("private key is %T, RS256 needs RSA", k)
	}
	return rk, nil
}

func loadRSAPublic(v string) (*rsa.PublicKey, error) {
	blk, err := apisecret.PEMBlock(v)
	if err != nil {
		return nil, err
	}
	if k, err := x509.ParsePKCS1PublicKey(blk.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("public key is %T, RS256 needs RSA", k)
	}
	return rk, nil
}
