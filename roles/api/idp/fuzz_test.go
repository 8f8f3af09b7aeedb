package idp

import (
	"crypto/elliptic"
	"encoding/json"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
)

// FuzzParseKeySet feeds arbitrary bytes to the JWK set parser, as a hostile
// or broken provider could: it must not panic, and whatever it accepts must
// be usable.
func FuzzParseKeySet(f *testing.F) {
	rs := rsaSigner(f, 0, "rsa-1", jwt.SigningMethodRS256, true)
	ec := ecSigner(f, "ec-1", jwt.SigningMethodES256, elliptic.P256(), "P-256")
	good, err := json.Marshal(map[string]any{"keys": []map[string]any{rs.jwk, ec.jwk}})
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(good),
		`{"keys":[]}`,
		`{"keys":[{}]}`,
		`{"keys":[{"kty":"RSA","kid":"a","n":"AQAB","e":"AQAB"}]}`,
		`{"keys":[{"kty":"EC","kid":"a","crv":"P-256","x":"AA","y":"AA"}]}`,
		`{"keys":null}`,
		`[]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		set, _, err := parseKeySet(data)
		if err != nil {
			return
		}
		if len(set) == 0 {
			t.Fatal("parseKeySet() accepted a set without keys")
		}
		for kid, keys := range set {
			for _, k := range keys {
				if kid == "" || k.kid != kid || k.key == nil {
					t.Fatalf("parseKeySet() produced an unusable key %+v under kid %q", k, kid)
				}
				if k.alg != "" && !k.verifies(k.alg) {
					t.Fatalf("parseKeySet() kept key %q pinned to %q it cannot verify", kid, k.alg)
				}
			}
		}
	})
}

// FuzzVerify feeds arbitrary strings to Verify: it must not panic, and
// every refusal must wrap ErrInvalid. The verifier's keys are loaded up
// front and its clock stands still, so no input reaches the network.
func FuzzVerify(f *testing.F) {
	rs := rsaSigner(f, 0, "rsa-1", jwt.SigningMethodRS256, true)
	ec := ecSigner(f, "ec-1", jwt.SigningMethodES256, elliptic.P256(), "P-256")
	const iss = "https://idp.example.com/"
	now := time.Unix(1_900_000_000, 0)
	v, err := New(config.IDP{Enabled: true, Issuer: iss, Audience: testAudience},
		WithJWKSURL("https://idp.example.com/.well-known/jwks.json"),
		WithClock(func() time.Time { return now }),
		WithHTTPClient(&http.Client{Transport: noNetwork{}}),
	)
	if err != nil {
		f.Fatal(err)
	}
	doc, err := json.Marshal(map[string]any{"keys": []map[string]any{rs.jwk, ec.jwk}})
	if err != nil {
		f.Fatal(err)
	}
	set, _, err := parseKeySet(doc)
	if err != nil {
		f.Fatal(err)
	}
	c := v.keys
	c.mu.Lock()
	c.keys, c.fetched, c.expires = set, true, now.Add(time.Hour)
	c.tried, c.lastTry = true, now
	c.mu.Unlock()

	for _, seed := range []string{
		rs.sign(f, claimsAt(iss, now)),
		ec.sign(f, claimsAt(iss, now)),
		tamper(rs.sign(f, claimsAt(iss, now))),
		"eyJhbGciOiJub25lIiwia2lkIjoicnNhLTEifQ.eyJzdWIiOiJ4In0.",
		"eyJhbGciOiJSUzI1NiIsImtpZCI6Im5vcGUifQ.e30.AAAA",
		"a.b.c",
		"..",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		id, err := v.Verify(t.Context(), raw)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Verify() error = %v, does not wrap ErrInvalid", err)
			}
			return
		}
		if id.Subject == "" || normaliseIssuer(id.Issuer) != normaliseIssuer(iss) {
			t.Fatalf("Verify() accepted %q as %+v", raw, id)
		}
	})
}

// noNetwork fails every request; the fuzzed verifier must never need one.
type noNetwork struct{}

func (noNetwork) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("network not allowed in this test")
}
