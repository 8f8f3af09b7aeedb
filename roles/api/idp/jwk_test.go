package idp

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// syntheticModulus is an odd number of the given bit length. Parsing does
// not test primality, so it stands in for a real modulus where only the
// size matters.
func syntheticModulus(bits int) string {
	b := bytes.Repeat([]byte{0xff}, bits/8)
	return b64(b)
}

func ecPoint(t *testing.T, curve elliptic.Curve) (x, y string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p, err := k.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	n := (len(p) - 1) / 2
	return b64(p[1 : 1+n]), b64(p[1+n:])
}

func TestParseKeySet(t *testing.T) {
	n2048 := syntheticModulus(2048)
	x256, y256 := ecPoint(t, elliptic.P256())
	x384, y384 := ecPoint(t, elliptic.P384())
	x521, y521 := ecPoint(t, elliptic.P521())
	// A point with y changed is no longer on the curve.
	yBad := []byte(y256)
	if yBad[5] == 'A' {
		yBad[5] = 'B'
	} else {
		yBad[5] = 'A'
	}
	rsaKey := func(extra string) string {
		return `{"kty":"RSA","kid":"r","n":"` + n2048 + `","e":"AQAB"` + extra + `}`
	}
	set := func(keys ...string) string { return `{"keys":[` + strings.Join(keys, ",") + `]}` }

	tests := []struct {
		name        string
		json        string
		wantKeys    int // distinct kids; 0 means the set must fail
		wantSkipped int
	}{
		{name: "rsa", json: set(rsaKey(`,"use":"sig","alg":"RS256"`)), wantKeys: 1},
		{name: "rsa without use or alg", json: set(rsaKey("")), wantKeys: 1},
		{name: "rsa with padded base64", json: set(`{"kty":"RSA","kid":"r","n":"` + n2048 + `==","e":"AQAB"}`), wantKeys: 1},
		{name: "rsa with key_ops verify", json: set(rsaKey(`,"key_ops":["verify"]`)), wantKeys: 1},
		{name: "ec p-256", json: set(`{"kty":"EC","kid":"e","crv":"P-256","x":"` + x256 + `","y":"` + y256 + `","alg":"ES256"}`), wantKeys: 1},
		{name: "ec p-384", json: set(`{"kty":"EC","kid":"e","crv":"P-384","x":"` + x384 + `","y":"` + y384 + `"}`), wantKeys: 1},
		{name: "one kid, two key types", json: set(rsaKey(""), `{"kty":"EC","kid":"r","crv":"P-256","x":"`+x256+`","y":"`+y256+`"}`), wantKeys: 1},
		{name: "good and bad keys", json: set(rsaKey(""), `{"kty":"oct","kid":"h","k":"c2VjcmV0"}`), wantKeys: 1, wantSkipped: 1},
		{name: "unknown members ignored", json: `{"keys":[` + rsaKey(`,"x5c":["MII..."],"x5t":"abc"`) + `],"extra":1}`, wantKeys: 1},

		{name: "not json", json: `<html>`},
		{name: "no keys member", json: `{}`},
		{name: "keys not a list", json: `{"keys":{}}`},
		{name: "empty key list", json: `{"keys":[]}`},
		{name: "key not an object", json: set(`"rsa"`), wantSkipped: 1},
		{name: "rsa 1024 bits", json: set(`{"kty":"RSA","kid":"r","n":"` + syntheticModulus(1024) + `","e":"AQAB"}`), wantSkipped: 1},
		{name: "rsa 2040 bits", json: set(`{"kty":"RSA","kid":"r","n":"` + syntheticModulus(2040) + `","e":"AQAB"}`), wantSkipped: 1},
		{name: "rsa over 8192 bits", json: set(`{"kty":"RSA","kid":"r","n":"` + syntheticModulus(8200) + `","e":"AQAB"}`), wantSkipped: 1},
		{name: "rsa even modulus", json: set(`{"kty":"RSA","kid":"r","n":"` + b64(append(bytes.Repeat([]byte{0xff}, 255), 0xfe)) + `","e":"AQAB"}`), wantSkipped: 1},
		{name: "rsa even exponent", json: set(`{"kty":"RSA","kid":"r","n":"` + n2048 + `","e":"Ag"}`), wantSkipped: 1},
		{name: "rsa exponent 1", json: set(`{"kty":"RSA","kid":"r","n":"` + n2048 + `","e":"AQ"}`), wantSkipped: 1},
		{name: "rsa exponent too long", json: set(`{"kty":"RSA","kid":"r","n":"` + n2048 + `","e":"AQAAAAAB"}`), wantSkipped: 1},
		{name: "rsa missing n", json: set(`{"kty":"RSA","kid":"r","e":"AQAB"}`), wantSkipped: 1},
		{name: "rsa bad base64", json: set(`{"kty":"RSA","kid":"r","n":"!!!","e":"AQAB"}`), wantSkipped: 1},
		{name: "ec short x", json: set(`{"kty":"EC","kid":"e","crv":"P-256","x":"` + b64(make([]byte, 31)) + `","y":"` + y256 + `"}`), wantSkipped: 1},
		{name: "ec point off the curve", json: set(`{"kty":"EC","kid":"e","crv":"P-256","x":"` + x256 + `","y":"` + string(yBad) + `"}`), wantSkipped: 1},
		{name: "ec p-384 coordinates under p-256", json: set(`{"kty":"EC","kid":"e","crv":"P-256","x":"` + x384 + `","y":"` + y384 + `"}`), wantSkipped: 1},
		{name: "ec p-521", json: set(`{"kty":"EC","kid":"e","crv":"P-521","x":"` + x521 + `","y":"` + y521 + `"}`), wantSkipped: 1},
		{name: "ec pinned to the wrong curve's alg", json: set(`{"kty":"EC","kid":"e","crv":"P-256","x":"` + x256 + `","y":"` + y256 + `","alg":"ES384"}`), wantSkipped: 1},
		{name: "symmetric key", json: set(`{"kty":"oct","kid":"h","k":"c2VjcmV0"}`), wantSkipped: 1},
		{name: "okp key", json: set(`{"kty":"OKP","kid":"o","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}`), wantSkipped: 1},
		{name: "encryption key", json: set(rsaKey(`,"use":"enc"`)), wantSkipped: 1},
		{name: "key_ops without verify", json: set(rsaKey(`,"key_ops":["encrypt"]`)), wantSkipped: 1},
		{name: "rsa pinned to ES256", json: set(rsaKey(`,"alg":"ES256"`)), wantSkipped: 1},
		{name: "rsa pinned to PS512", json: set(rsaKey(`,"alg":"PS512"`)), wantSkipped: 1},
		{name: "rsa pinned to HS256", json: set(rsaKey(`,"alg":"HS256"`)), wantSkipped: 1},
		{name: "no kid", json: set(`{"kty":"RSA","n":"` + n2048 + `","e":"AQAB"}`), wantSkipped: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, skipped, err := parseKeySet([]byte(tt.json))
			if tt.wantKeys == 0 {
				if err == nil {
					t.Fatalf("parseKeySet() = %v, want an error", got)
				}
			} else {
				if err != nil {
					t.Fatalf("parseKeySet() error = %v", err)
				}
				if len(got) != tt.wantKeys {
					t.Errorf("parseKeySet() has %d kids, want %d", len(got), tt.wantKeys)
				}
			}
			if len(skipped) != tt.wantSkipped {
				t.Errorf("parseKeySet() skipped %d (%v), want %d", len(skipped), skipped, tt.wantSkipped)
			}
		})
	}
}

// TestParseKeySetMatchesKeys checks that parsed keys equal the keys they
// were published from.
func TestParseKeySetMatchesKeys(t *testing.T) {
	k := testRSAKey(t, 0)
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	x, y := func() (string, string) {
		p, err := e.PublicKey.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		return b64(p[1:33]), b64(p[33:])
	}()
	doc, err := json.Marshal(map[string]any{"keys": []map[string]any{
		{"kty": "RSA", "kid": "r", "n": b64(k.N.Bytes()), "e": "AQAB"},
		{"kty": "EC", "kid": "e", "crv": "P-256", "x": x, "y": y},
	}})
	if err != nil {
		t.Fatal(err)
	}
	set, _, err := parseKeySet(doc)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := set.find("r", "RS256"); r == nil || !r.key.(*rsa.PublicKey).Equal(&k.PublicKey) {
		t.Error("RSA key differs from the published one")
	}
	if ec, _ := set.find("e", "ES256"); ec == nil || !ec.key.(*ecdsa.PublicKey).Equal(&e.PublicKey) {
		t.Error("EC key differs from the published one")
	}
}

func TestParseKeySetKeyLimit(t *testing.T) {
	keys := make([]string, maxKeys+5)
	for i := range keys {
		keys[i] = fmt.Sprintf(`{"kty":"RSA","kid":"k%d","n":"%s","e":"AQAB"}`, i, syntheticModulus(2048))
	}
	set, skipped, err := parseKeySet([]byte(`{"keys":[` + strings.Join(keys, ",") + `]}`))
	if err != nil {
		t.Fatal(err)
	}
	if len(set) != maxKeys || len(skipped) != 1 {
		t.Errorf("parseKeySet() kept %d keys and reported %d problems, want %d and 1", len(set), len(skipped), maxKeys)
	}
}

func TestKeyVerifies(t *testing.T) {
	tests := []struct {
		key  publicKey
		alg  string
		want bool
	}{
		{publicKey{kty: "RSA"}, "RS256", true},
		{publicKey{kty: "RSA"}, "RS384", true},
		{publicKey{kty: "RSA"}, "RS512", true},
		{publicKey{kty: "RSA"}, "PS256", true},
		{publicKey{kty: "RSA", alg: "RS256"}, "PS256", false},
		{publicKey{kty: "RSA", alg: "PS256"}, "PS256", true},
		{publicKey{kty: "RSA"}, "ES256", false},
		{publicKey{kty: "RSA"}, "HS256", false},
		{publicKey{kty: "RSA"}, "none", false},
		{publicKey{kty: "RSA"}, "PS512", false},
		{publicKey{kty: "EC", crv: "P-256"}, "ES256", true},
		{publicKey{kty: "EC", crv: "P-256"}, "ES384", false},
		{publicKey{kty: "EC", crv: "P-384"}, "ES384", true},
		{publicKey{kty: "EC", crv: "P-384"}, "RS256", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s-%s-%s/%s", tt.key.kty, tt.key.crv, tt.key.alg, tt.alg), func(t *testing.T) {
			if got := tt.key.verifies(tt.alg); got != tt.want {
				t.Errorf("verifies(%q) = %v, want %v", tt.alg, got, tt.want)
			}
		})
	}
}
