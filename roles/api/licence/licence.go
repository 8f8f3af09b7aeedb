// Package licence verifies and enforces the signed licence of the Cloud
// API: how many agents may be registered and which premium features are
// on. The API holds only the public key and accepts exactly its algorithm
// (EdDSA or RS256). A licence that is missing, expired or does not verify
// never stops the process: the API runs restricted, and expiry is checked
// on every question. The package also signs licences (Issue), makes key
// pairs, and mints all-in-one's demo licence (Demo). See docs/licence.md.
package licence

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"github.com/edgeplat/edgeplat/roles/api/secret"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is the iss claim of every licence.
const Issuer = "edgeplat-licence"

// Feature flags a licence can grant.
const (
	// FeatureCorrelationRules enables multi-metric correlation anomaly
	// rules.
	FeatureCorrelationRules = "correlation_rules"
	// FeatureExport enables the CSV and Parquet export endpoints.
	FeatureExport = "export"
	// FeatureAI enables the AI chat and dashboard suggestion endpoints.
	FeatureAI = "ai"
)

// Features lists every feature this version knows, in a stable order.
var Features = []string{FeatureCorrelationRules, FeatureExport, FeatureAI}

// KnownFeature reports whether name is one of Features.
func KnownFeature(name string) bool { return slices.Contains(Features, name) }

// clockSkew is how far a licence's iat and nbf may lie in the future: the
// machine that signed it need not share the server's clock.
const clockSkew = 5 * time.Minute

// minRSABits refuses RSA keys too short to be trusted with a signature.
const minRSABits = 2048

// Claims are what a licence grants.
type Claims struct {
	// Customer names the licensee (claim sub).
	Customer string
	// MaxAgents caps registered agents; 0 means unlimited.
	MaxAgents int
	// Features are the premium features granted, from Features. Names a
	// later version added are kept, so they show in the status.
	Features []string
	// Demo labels the self-signed licence all-in-one makes for itself.
	Demo bool
	// ID is the licence's unique id (jti), for support and audit.
	ID        string
	IssuedAt  time.Time
	ExpiresAt time.Time
}

// HasFeature reports whether c grants name.
func (c Claims) HasFeature(name string) bool { return slices.Contains(c.Features, name) }

// wireClaims is the JSON form.
type wireClaims struct {
	MaxAgents int      `json:"max_agents"`
	Features  []string `json:"features,omitempty"`
	Demo      bool     `json:"demo,omitempty"`
	jwt.RegisteredClaims
}

// Errors Verify wraps, so callers can tell an expired licence, whose
// claims are still returned, from one that cannot be trusted at all.
var (
	ErrExpired = errors.New("licence expired")
	ErrInvalid = errors.New("licence invalid")
)

// Verify checks raw's signature with pub and its claims at time now. pub
// picks the algorithm: an ed25519.PublicKey accepts EdDSA only, an
// *rsa.PublicKey RS256 only. A licence that verifies but has expired is
// returned with its claims and an error wrapping ErrExpired; every other
// failure wraps ErrInvalid and returns no claims.
func Verify(raw string, pub crypto.PublicKey, now time.Time) (Claims, error) {
	alg, err := algorithmFor(pub)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// The library checks the signature and algorithm; the claims are
	// checked below instead of by its validator, which would reject an
	// expired licence without its claims, and the status should still say
	// whose licence expired and when.
	var w wireClaims
	_, err = jwt.NewParser(jwt.WithValidMethods([]string{alg}), jwt.WithoutClaimsValidation()).
		ParseWithClaims(strings.TrimSpace(raw), &w, func(*jwt.Token) (any, error) { return pub, nil })
	if err != nil {
		return Claims{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	switch {
	case w.Issuer != Issuer:
		return Claims{}, fmt.Errorf("%w: issuer %q, want %q", ErrInvalid, w.Issuer, Issuer)
	case w.ExpiresAt == nil:
		return Claims{}, fmt.Errorf("%w: no expiry (exp)", ErrInvalid)
	case strings.TrimSpace(w.Subject) == "":
		return Claims{}, fmt.Errorf("%w: no customer (sub)", ErrInvalid)
	case w.MaxAgents < 0:
		return Claims{}, fmt.Errorf("%w: max_agents %d is negative", ErrInvalid, w.MaxAgents)
	case w.IssuedAt != nil && w.IssuedAt.After(now.Add(clockSkew)):
		return Claims{}, fmt.Errorf("%w: issued in the future (iat %s)", ErrInvalid, w.IssuedAt.UTC().Format(time.RFC3339))
	case w.NotBefore != nil && w.NotBefore.After(now.Add(clockSkew)):
		return Claims{}, fmt.Errorf("%w: not valid before %s", ErrInvalid, w.NotBefore.UTC().Format(time.RFC3339))
	}
	c := Claims{Customer: w.Subject, MaxAgents: w.MaxAgents, Features: w.Features, Demo: w.Demo, ID: w.ID,
		ExpiresAt: w.ExpiresAt.Time}
	if w.IssuedAt != nil {
		c.IssuedAt = w.IssuedAt.Time
	}
	if !now.Before(c.ExpiresAt) {
		return c, fmt.Errorf("%w on %s", ErrExpired, c.ExpiresAt.UTC().Format(time.RFC3339))
	}
	return c, nil
}

// algorithmFor names the one JWT algorithm pub verifies.
func algorithmFor(pub crypto.PublicKey) (string, error) {
	switch k := pub.(type) {
	case ed25519.PublicKey:
		return jwt.SigningMethodEdDSA.Alg(), nil
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return "", fmt.Errorf("RSA key has %d bits, at least %d are required", k.N.BitLen(), minRSABits)
		}
		return jwt.SigningMethodRS256.Alg(), nil
	}
	return "", fmt.Errorf("%T keys are not supported; use Ed25519 or RSA", pub)
}

// ParsePublicKey reads an Ed25519 or RSA public key from PEM text or from
// the PEM file v names (PKIX "PUBLIC KEY" or PKCS#1 "RSA PUBLIC KEY").
func ParsePublicKey(v string) (crypto.PublicKey, error) {
	blk, err := secret.PEMBlock(v)
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
	if _, err := algorithmFor(k); err != nil {
		return nil, err
	}
	return k, nil
}

// parsePrivateKey reads an Ed25519 or RSA private key from PEM bytes
// (PKCS#8 "PRIVATE KEY" or PKCS#1 "RSA PRIVATE KEY").
func parsePrivateKey(b []byte) (crypto.Signer, jwt.SigningMethod, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, nil, errors.New("no PEM block found")
	}
	key, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		if key, err = x509.ParsePKCS1PrivateKey(blk.Bytes); err != nil {
			return nil, nil, fmt.Errorf("parse private key: %w", err)
		}
	}
	switch k := key.(type) {
	case ed25519.PrivateKey:
		return k, jwt.SigningMethodEdDSA, nil
	case *rsa.PrivateKey:
		if k.N.BitLen() < minRSABits {
			return nil, nil, fmt.Errorf("RSA key has %d bits, at least %d are required", k.N.BitLen(), minRSABits)
		}
		return k, jwt.SigningMethodRS256, nil
	}
	return nil, nil, fmt.Errorf("%T keys are not supported; use Ed25519 or RSA", key)
}

// readLicence returns the licence JWT in v, which is either the token
// itself or the path of a file holding it. A JWT from any common library
// starts with the encoding of `{"`, "eyJ", and contains only base64url
// characters and two dots; anything else is taken for a path.
func readLicence(v string) (string, error) {
	v = strings.TrimSpace(v)
	if looksLikeJWT(v) {
		return v, nil
	}
	b, err := os.ReadFile(v)
	if err != nil {
		return "", fmt.Errorf("neither a JWT nor a readable file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func looksLikeJWT(v string) bool {
	if !strings.HasPrefix(v, "eyJ") || strings.Count(v, ".") != 2 {
		return false
	}
	for _, r := range v {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return false
		}
	}
	return true
}
