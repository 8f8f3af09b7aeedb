package idp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
)

// Limits on what a key set may hold. The body cap bounds the bytes; these
// bound the work one fetched set can cause.
const (
	// maxKeys is far above what real identity providers publish (a handful
	// during a rotation) and keeps a hostile set from becoming a CPU sink.
	maxKeys = 100
	// minRSABits follows current guidance (NIST SP 800-131A) for RSA
	// signature verification.
	minRSABits = 2048
	// maxRSABits bounds the cost of one verification: a huge modulus would
	// make every signature check expensive.
	maxRSABits = 8192
)

// keyNeed says which kind of key an accepted algorithm verifies with.
type keyNeed struct {
	kty string
	crv string // EC only
}

// algorithms lists the token algorithms Verify accepts and the key each
// needs. "none" and the HMAC family are absent on purpose: a shared-secret
// algorithm keyed with a public key's bytes is the classic confusion attack.
var algorithms = map[string]keyNeed{
	"RS256": {kty: "RSA"},
	"RS384": {kty: "RSA"},
	"RS512": {kty: "RSA"},
	"PS256": {kty: "RSA"},
	"ES256": {kty: "EC", crv: "P-256"},
	"ES384": {kty: "EC", crv: "P-384"},
}

// validMethods is algorithms' key list, sorted, for the JWT parser.
var validMethods = func() []string {
	m := make([]string, 0, len(algorithms))
	for alg := range algorithms {
		m = append(m, alg)
	}
	slices.Sort(m)
	return m
}()

// publicKey is one usable verification key from a JWK set.
type publicKey struct {
	kid string
	kty string
	crv string
	// alg is the JWK's own "alg", empty when the set did not pin one.
	alg string
	key any // *rsa.PublicKey or *ecdsa.PublicKey
}

// verifies reports whether k may verify a token signed with alg: the key
// type and curve must be the ones alg needs, and a key that names its
// algorithm is used for that algorithm only (RFC 7517 section 4.4), so an RS256
// key never checks a PS256 signature.
func (k *publicKey) verifies(alg string) bool {
	need, ok := algorithms[alg]
	if !ok {
		return false
	}
	return k.kty == need.kty && k.crv == need.crv && (k.alg == "" || k.alg == alg)
}

// keySet maps a kid to its keys. A kid normally names one key, but nothing
// stops a provider from publishing the same kid for two algorithms, and the
// token's alg then picks the right one.
type keySet map[string][]*publicKey

// find returns the key with kid that verifies alg. known reports whether
// the kid is in the set at all, which tells a rotation (unknown kid) from a
// token that names a key of the wrong type.
func (s keySet) find(kid, alg string) (key *publicKey, known bool) {
	keys, known := s[kid]
	for _, k := range keys {
		if k.verifies(alg) {
			return k, true
		}
	}
	return nil, known
}

// jwk is the JSON form of one key (RFC 7517 section 4, RFC 7518 section 6). Private
// members such as "d" are ignored.
type jwk struct {
	Kty    string   `json:"kty"`
	Kid    string   `json:"kid"`
	Use    string   `json:"use"`
	Alg    string   `json:"alg"`
	KeyOps []string `json:"key_ops"`
	N      string   `json:"n"`
	E      string   `json:"e"`
	Crv    string   `json:"crv"`
	X      string   `json:"x"`
	Y      string   `json:"y"`
}

// parseKeySet parses a JWK set. Keys this package cannot use (encryption
// keys, other key types, weak or malformed keys) are skipped and reported
// in skipped rather than failing the set: providers publish such keys next
// to their signing keys, and one odd entry must not lock every user out.
// The set fails only when it is not a JWK set or holds no usable key.
func parseKeySet(data []byte) (set keySet, skipped []error, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("decode jwk set: %w", err)
	}
	if doc.Keys == nil {
		return nil, nil, errors.New("decode jwk set: no \"keys\" member")
	}
	if len(doc.Keys) > maxKeys {
		skipped = append(skipped, fmt.Errorf("jwk set has %d keys, only the first %d are read", len(doc.Keys), maxKeys))
		doc.Keys = doc.Keys[:maxKeys]
	}
	set = make(keySet)
	for i, raw := range doc.Keys {
		var j jwk
		if err := json.Unmarshal(raw, &j); err != nil {
			skipped = append(skipped, fmt.Errorf("key %d: %w", i, err))
			continue
		}
		k, err := parseKey(j)
		if err != nil {
			skipped = append(skipped, fmt.Errorf("key %d (kid %q): %w", i, j.Kid, err))
			continue
		}
		set[k.kid] = append(set[k.kid], k)
	}
	if len(set) == 0 {
		return nil, skipped, fmt.Errorf("jwk set has no usable signing key (%d skipped)", len(skipped))
	}
	return set, skipped, nil
}

// parseKey turns one JWK into a verification key.
func parseKey(j jwk) (*publicKey, error) {
	if j.Kid == "" {
		// Tokens pick their key by kid only, so a key without one could
		// never be chosen.
		return nil, errors.New("no kid")
	}
	if j.Use != "" && j.Use != "sig" {
		return nil, fmt.Errorf("use %q is not sig", j.Use)
	}
	if j.KeyOps != nil && !slices.Contains(j.KeyOps, "verify") {
		return nil, errors.New("key_ops does not include verify")
	}
	k := &publicKey{kid: j.Kid, kty: j.Kty, alg: j.Alg}
	switch j.Kty {
	case "RSA":
		pub, err := parseRSA(j.N, j.E)
		if err != nil {
			return nil, err
		}
		k.key = pub
	case "EC":
		pub, err := parseEC(j.Crv, j.X, j.Y)
		if err != nil {
			return nil, err
		}
		k.key, k.crv = pub, j.Crv
	default:
		return nil, fmt.Errorf("unsupported kty %q", j.Kty)
	}
	if j.Alg != "" && !k.verifies(j.Alg) {
		// The key is pinned to an algorithm Verify refuses (PS512,
		// RSA-OAEP, ...) or one that does not fit its own type.
		return nil, fmt.Errorf("alg %q is not accepted for a %s key", j.Alg, j.Kty)
	}
	return k, nil
}

func parseRSA(n, e string) (*rsa.PublicKey, error) {
	nb, err := decodeB64(n)
	if err != nil {
		return nil, fmt.Errorf("rsa n: %w", err)
	}
	eb, err := decodeB64(e)
	if err != nil {
		return nil, fmt.Errorf("rsa e: %w", err)
	}
	mod := new(big.Int).SetBytes(nb)
	if bits := mod.BitLen(); bits < minRSABits || bits > maxRSABits {
		return nil, fmt.Errorf("rsa modulus has %d bits, want %d..%d", bits, minRSABits, maxRSABits)
	}
	if mod.Bit(0) == 0 {
		return nil, errors.New("rsa modulus is even")
	}
	// e fits in 32 bits in every real key (65537 nearly always); larger
	// values would not fit rsa.PublicKey.E on all platforms.
	eb = trimLeadingZeros(eb)
	if len(eb) == 0 || len(eb) > 4 {
		return nil, fmt.Errorf("rsa exponent of %d bytes", len(eb))
	}
	var exp uint32
	for _, b := range eb {
		exp = exp<<8 | uint32(b)
	}
	if exp < 3 || exp%2 == 0 || exp > 1<<31-1 {
		return nil, fmt.Errorf("rsa exponent %d is not an odd number in 3..2^31-1", exp)
	}
	return &rsa.PublicKey{N: mod, E: int(exp)}, nil
}

func parseEC(crv, x, y string) (*ecdsa.PublicKey, error) {
	var curve elliptic.Curve
	var size int
	switch crv {
	case "P-256":
		curve, size = elliptic.P256(), 32
	case "P-384":
		curve, size = elliptic.P384(), 48
	default:
		return nil, fmt.Errorf("unsupported crv %q", crv)
	}
	xb, err := decodeB64(x)
	if err != nil {
		return nil, fmt.Errorf("ec x: %w", err)
	}
	yb, err := decodeB64(y)
	if err != nil {
		return nil, fmt.Errorf("ec y: %w", err)
	}
	// RFC 7518 section 6.2.1.2 fixes the length: coordinates are padded to the
	// field size, never shortened.
	if len(xb) != size || len(yb) != size {
		return nil, fmt.Errorf("ec coordinates of %d and %d bytes, want %d", len(xb), len(yb), size)
	}
	point := make([]byte, 0, 1+2*size)
	point = append(point, 4) // uncompressed point
	point = append(point, xb...)
	point = append(point, yb...)
	// ParseUncompressedPublicKey rejects points off the curve, which would
	// otherwise open invalid-curve attacks.
	pub, err := ecdsa.ParseUncompressedPublicKey(curve, point)
	if err != nil {
		return nil, fmt.Errorf("ec point: %w", err)
	}
	return pub, nil
}

// decodeB64 decodes base64url. JWKs use the unpadded form; padding is
// tolerated because some providers have published it.
func decodeB64(s string) ([]byte, error) {
	if s == "" {
		return nil, errors.New("missing")
	}
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}

func trimLeadingZeros(b []byte) []byte {
	for len(b) > 0 && b[0] == 0 {
		b = b[1:]
	}
	return b
}
