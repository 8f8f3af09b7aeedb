package idp

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/golang-jwt/jwt/v5"
	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind, such as a key
// fetch that never ended.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const testAudience = "https://api.edgeplat.test"

// fakeClock is a clock the test moves by hand, so cache expiry and the
// refresh throttle are tested without sleeping.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_900_000_000, 0)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// signer is a provider key: it signs tokens and publishes its JWK.
type signer struct {
	kid    string
	method jwt.SigningMethod
	priv   any
	jwk    map[string]any
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

var (
	rsaKeyOnce sync.Once
	rsaKeys    []*rsa.PrivateKey
)

// testRSAKey returns one of a few RSA keys made once per run: generating
// 2048-bit keys per test would make the suite slow under -race.
func testRSAKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaKeyOnce.Do(func() {
		for range 4 {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys = append(rsaKeys, k)
		}
	})
	return rsaKeys[i]
}

// rsaSigner makes an RSA signer. pinAlg publishes the JWK's alg.
func rsaSigner(t testing.TB, keyIndex int, kid string, method jwt.SigningMethod, pinAlg bool) *signer {
	t.Helper()
	k := testRSAKey(t, keyIndex)
	j := map[string]any{
		"kty": "RSA", "kid": kid, "use": "sig",
		"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()),
	}
	if pinAlg {
		j["alg"] = method.Alg()
	}
	return &signer{kid: kid, method: method, priv: k, jwk: j}
}

func ecSigner(t testing.TB, kid string, method jwt.SigningMethod, curve elliptic.Curve, crv string) *signer {
	t.Helper()
	k, err := ecdsa.GenerateKey(curve, rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := k.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	size := (len(point) - 1) / 2
	j := map[string]any{
		"kty": "EC", "kid": kid, "use": "sig", "alg": method.Alg(), "crv": crv,
		"x": b64(point[1 : 1+size]), "y": b64(point[1+size:]),
	}
	return &signer{kid: kid, method: method, priv: k, jwk: j}
}

// sign signs claims with s's key and kid.
func (s *signer) sign(t testing.TB, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(s.method, c)
	tok.Header["kid"] = s.kid
	raw, err := tok.SignedString(s.priv)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// claimsAt are the claims of a good token issued by iss at now.
func claimsAt(iss string, now time.Time) jwt.MapClaims {
	return jwt.MapClaims{
		"iss":            iss,
		"sub":            "auth0|user-1",
		"aud":            testAudience,
		"email":          "ada@example.com",
		"email_verified": true,
		"name":           "Ada Lovelace",
		"iat":            now.Unix(),
		"exp":            now.Add(10 * time.Minute).Unix(),
	}
}

// testIdP is a local identity provider: a discovery document, a JWK set at
// its jwks_uri and the same set at the Auth0-style well-known path. It
// counts requests so tests can check how often keys are fetched.
type testIdP struct {
	srv *httptest.Server

	mu           sync.Mutex
	keys         []map[string]any
	discovery    bool   // serve the discovery document (404 otherwise)
	docIssuer    string // issuer in the discovery document, default srv.URL
	jwksStatus   int    // answer the JWK set with this status when set
	jwksBody     []byte // answer the JWK set with these bytes when set
	cacheControl string
	gate         chan struct{} // when set, JWK set requests wait for it to close

	discoveryHits atomic.Int64
	jwksHits      atomic.Int64
}

func newTestIdP(t testing.TB, keys ...*signer) *testIdP {
	t.Helper()
	p := &testIdP{discovery: true}
	p.setKeys(keys...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/openid-configuration", p.serveDiscovery)
	mux.HandleFunc("GET /jwks", p.serveJWKS)
	mux.HandleFunc("GET /.well-known/jwks.json", p.serveJWKS)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *testIdP) setKeys(keys ...*signer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = p.keys[:0]
	for _, k := range keys {
		p.keys = append(p.keys, k.jwk)
	}
}

func (p *testIdP) set(f func(p *testIdP)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f(p)
}

func (p *testIdP) serveDiscovery(w http.ResponseWriter, _ *http.Request) {
	p.discoveryHits.Add(1)
	p.mu.Lock()
	on, iss := p.discovery, p.docIssuer
	p.mu.Unlock()
	if !on {
		http.NotFound(w, nil)
		return
	}
	if iss == "" {
		iss = p.srv.URL
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"issuer": iss, "jwks_uri": p.srv.URL + "/jwks"})
}

func (p *testIdP) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	p.jwksHits.Add(1)
	p.mu.Lock()
	status, body, cc, gate := p.jwksStatus, p.jwksBody, p.cacheControl, p.gate
	if body == nil {
		body, _ = json.Marshal(map[string]any{"keys": p.keys})
	}
	p.mu.Unlock()
	if gate != nil {
		<-gate
	}
	if status != 0 {
		http.Error(w, "unavailable", status)
		return
	}
	w.Header().Set("Content-Type", "application/jwk-set+json")
	if cc != "" {
		w.Header().Set("Cache-Control", cc)
	}
	_, _ = w.Write(body)
}

// verifier builds a Verifier for p with the issuer p.srv.URL.
func (p *testIdP) verifier(t testing.TB, clk *fakeClock, cfg config.IDP, opts ...Option) *Verifier {
	t.Helper()
	if cfg.Issuer == "" {
		cfg.Issuer = p.srv.URL
	}
	if cfg.Audience == "" {
		cfg.Audience = testAudience
	}
	cfg.Enabled = true
	opts = append([]Option{WithHTTPClient(p.srv.Client()), WithClock(clk.Now)}, opts...)
	v, err := New(cfg, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// tamper changes one character in the middle of the signature, where every
// base64 character carries six bits of it.
func tamper(raw string) string {
	i := strings.LastIndexByte(raw, '.')
	sig := []byte(raw[i+1:])
	m := len(sig) / 2
	if sig[m] == 'A' {
		sig[m] = 'B'
	} else {
		sig[m] = 'A'
	}
	return raw[:i+1] + string(sig)
}
