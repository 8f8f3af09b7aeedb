package licence

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// testNow is the instant the tests verify at.
var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

type keyPair struct {
	privPEM []byte
	pubPEM  string
	pub     crypto.PublicKey
	signer  crypto.Signer
}

func edKeyPair(t *testing.T) keyPair {
	t.Helper()
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(string(pubPEM))
	if err != nil {
		t.Fatal(err)
	}
	signer, _, err := parsePrivateKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{privPEM: privPEM, pubPEM: string(pubPEM), pub: pub, signer: signer}
}

func rsaKeyPair(t *testing.T, bits int) keyPair {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	pkix, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return keyPair{
		privPEM: pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}),
		pubPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})),
		pub:     &k.PublicKey, signer: k,
	}
}

// goodClaims are claims Verify accepts at testNow.
func goodClaims() Claims {
	return Claims{Customer: "Acme Plant 3", MaxAgents: 25, Features: []string{FeatureExport, FeatureAI},
		IssuedAt: testNow.Add(-time.Hour), ExpiresAt: testNow.Add(30 * 24 * time.Hour)}
}

// signWire signs arbitrary claims, for licences Issue would refuse to make.
func signWire(t *testing.T, method jwt.SigningMethod, key any, claims jwt.Claims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wire(mod func(*wireClaims)) *wireClaims {
	w := &wireClaims{MaxAgents: 5, Features: []string{FeatureExport}, RegisteredClaims: jwt.RegisteredClaims{
		Issuer: Issuer, Subject: "Acme", IssuedAt: jwt.NewNumericDate(testNow.Add(-time.Hour)),
		ExpiresAt: jwt.NewNumericDate(testNow.Add(time.Hour)),
	}}
	if mod != nil {
		mod(w)
	}
	return w
}

func TestVerify(t *testing.T) {
	ed, ed2 := edKeyPair(t), edKeyPair(t)
	rs := rsaKeyPair(t, 2048)
	issue := func(k keyPair, c Claims) string {
		t.Helper()
		s, err := Issue(k.privPEM, c)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	expired := goodClaims()
	expired.IssuedAt, expired.ExpiresAt = testNow.Add(-48*time.Hour), testNow.Add(-time.Second)

	tests := []struct {
		name    string
		raw     string
		pub     crypto.PublicKey
		wantErr error // nil, ErrExpired or ErrInvalid
		detail  string
	}{
		{name: "valid EdDSA", raw: issue(ed, goodClaims()), pub: ed.pub},
		{name: "valid RS256", raw: issue(rs, goodClaims()), pub: rs.pub},
		{name: "surrounding whitespace", raw: "\n " + issue(ed, goodClaims()) + "\n", pub: ed.pub},
		{name: "alg none", raw: signWire(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, wire(nil)), pub: ed.pub,
			wantErr: ErrInvalid, detail: "signing method none is invalid"},
		{name: "HS256 keyed with the RSA public key", raw: signWire(t, jwt.SigningMethodHS256, []byte(rs.pubPEM), wire(nil)), pub: rs.pub,
			wantErr: ErrInvalid, detail: "signing method HS256 is invalid"},
		{name: "RS256 where the key is Ed25519", raw: issue(rs, goodClaims()), pub: ed.pub,
			wantErr: ErrInvalid, detail: "signing method RS256 is invalid"},
		{name: "wrong key", raw: issue(ed2, goodClaims()), pub: ed.pub, wantErr: ErrInvalid, detail: "signature is invalid"},
		{name: "expired", raw: issue(ed, expired), pub: ed.pub, wantErr: ErrExpired, detail: "expired on 2026-06-01T11:59:59Z"},
		{name: "no exp", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) { w.ExpiresAt = nil })), pub: ed.pub,
			wantErr: ErrInvalid, detail: "no expiry"},
		{name: "wrong issuer", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) { w.Issuer = "edgeplat" })), pub: ed.pub,
			wantErr: ErrInvalid, detail: `issuer "edgeplat"`},
		{name: "no customer", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) { w.Subject = " " })), pub: ed.pub,
			wantErr: ErrInvalid, detail: "no customer"},
		{name: "negative max agents", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) { w.MaxAgents = -1 })), pub: ed.pub,
			wantErr: ErrInvalid, detail: "negative"},
		{name: "issued in the future", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) {
			w.IssuedAt = jwt.NewNumericDate(testNow.Add(time.Hour))
			w.ExpiresAt = jwt.NewNumericDate(testNow.Add(2 * time.Hour))
		})), pub: ed.pub, wantErr: ErrInvalid, detail: "issued in the future"},
		{name: "not yet valid", raw: signWire(t, jwt.SigningMethodEdDSA, ed.signer, wire(func(w *wireClaims) { w.NotBefore = jwt.NewNumericDate(testNow.Add(time.Hour)) })), pub: ed.pub,
			wantErr: ErrInvalid, detail: "not valid before"},
		{name: "tampered payload", raw: tamper(issue(ed, goodClaims())), pub: ed.pub, wantErr: ErrInvalid},
		{name: "garbage", raw: "not.a.jwt", pub: ed.pub, wantErr: ErrInvalid},
		{name: "empty", raw: "", pub: ed.pub, wantErr: ErrInvalid},
		{name: "unsupported key type", raw: issue(ed, goodClaims()), pub: &ecdsa.PublicKey{}, wantErr: ErrInvalid, detail: "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Verify(tt.raw, tt.pub, testNow)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				want := goodClaims()
				if c.Customer != want.Customer || c.MaxAgents != want.MaxAgents || !c.HasFeature(FeatureExport) || !c.HasFeature(FeatureAI) ||
					c.HasFeature(FeatureCorrelationRules) || !c.ExpiresAt.Equal(want.ExpiresAt) || !c.IssuedAt.Equal(want.IssuedAt) || c.ID == "" || c.Demo {
					t.Errorf("claims %+v", c)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.detail) {
				t.Fatalf("Verify error %v, want %v containing %q", err, tt.wantErr, tt.detail)
			}
			if tt.wantErr == ErrExpired {
				if c.Customer != "Acme Plant 3" || !c.ExpiresAt.Equal(expired.ExpiresAt) {
					t.Errorf("an expired licence should keep its claims, got %+v", c)
				}
			} else if c.Customer != "" {
				t.Errorf("an invalid licence returned claims %+v", c)
			}
		})
	}
}

// tamper raises max_agents in the payload, keeping the signature.
func tamper(raw string) string {
	parts := strings.Split(raw, ".")
	payload, _ := jwt.NewParser().DecodeSegment(parts[1])
	payload = []byte(strings.Replace(string(payload), `"max_agents":25`, `"max_agents":2500`, 1))
	parts[1] = base64.RawURLEncoding.EncodeToString(payload)
	return strings.Join(parts, ".")
}

func TestIssueRefuses(t *testing.T) {
	ed := edKeyPair(t)
	small := rsaKeyPair(t, 1024)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ecKey)
	ecPEM := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: ecDER})
	tests := []struct {
		name string
		key  []byte
		mod  func(*Claims)
		want string
	}{
		{"no customer", ed.privPEM, func(c *Claims) { c.Customer = "  " }, "customer must not be empty"},
		{"negative max agents", ed.privPEM, func(c *Claims) { c.MaxAgents = -3 }, "max agents must be 0"},
		{"unknown feature", ed.privPEM, func(c *Claims) { c.Features = []string{"exports"} }, `unknown feature "exports"`},
		{"no expiry", ed.privPEM, func(c *Claims) { c.ExpiresAt = time.Time{} }, "expiry must be after"},
		{"expiry before issue", ed.privPEM, func(c *Claims) { c.ExpiresAt = c.IssuedAt.Add(-time.Second) }, "expiry must be after"},
		{"not PEM", []byte("hello"), nil, "no PEM block"},
		{"public key as private", []byte(ed.pubPEM), nil, "parse private key"},
		{"short RSA key", small.privPEM, nil, "at least 2048"},
		{"EC key", ecPEM, nil, "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodClaims()
			if tt.mod != nil {
				tt.mod(&c)
			}
			s, err := Issue(tt.key, c)
			if err == nil || !strings.Contains(err.Error(), tt.want) || s != "" {
				t.Errorf("Issue = %q, %v; want an error containing %q", s, err, tt.want)
			}
		})
	}
}

func TestIssueDeduplicatesFeatures(t *testing.T) {
	ed := edKeyPair(t)
	c := goodClaims()
	c.Features = []string{FeatureAI, FeatureExport, FeatureAI}
	raw, err := Issue(ed.privPEM, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Verify(raw, ed.pub, testNow)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got.Features, ",") != "ai,export" {
		t.Errorf("features %v, want [ai export]", got.Features)
	}
}

func TestParsePublicKey(t *testing.T) {
	ed := edKeyPair(t)
	rs := rsaKeyPair(t, 2048)
	small := rsaKeyPair(t, 1024)
	dir := t.TempDir()
	file := filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(file, []byte(ed.pubPEM), 0o644); err != nil {
		t.Fatal(err)
	}
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(rs.pub.(*rsa.PublicKey))}))
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	tests := []struct {
		name, v, wantType, wantErr string
	}{
		{name: "Ed25519 PEM text", v: ed.pubPEM, wantType: "ed25519.PublicKey"},
		{name: "Ed25519 file", v: file, wantType: "ed25519.PublicKey"},
		{name: "RSA PKIX", v: rs.pubPEM, wantType: "*rsa.PublicKey"},
		{name: "RSA PKCS#1", v: pkcs1, wantType: "*rsa.PublicKey"},
		{name: "missing file", v: filepath.Join(dir, "nope.pem"), wantErr: "neither PEM text nor a readable file"},
		{name: "PEM without a key", v: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", wantErr: "parse public key"},
		{name: "short RSA", v: small.pubPEM, wantErr: "at least 2048"},
		{name: "EC", v: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ecDER})), wantErr: "not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := ParsePublicKey(tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePublicKey error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got string
			switch k.(type) {
			case ed25519.PublicKey:
				got = "ed25519.PublicKey"
			case *rsa.PublicKey:
				got = "*rsa.PublicKey"
			}
			if got != tt.wantType {
				t.Errorf("key %T, want %s", k, tt.wantType)
			}
		})
	}
}

func TestReadLicence(t *testing.T) {
	ed := edKeyPair(t)
	raw, err := Issue(ed.privPEM, goodClaims())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "my.licence.jwt") // two dots, like a token
	if err := os.WriteFile(file, []byte(raw+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, v, want, wantErr string }{
		{name: "token text", v: raw, want: raw},
		{name: "token text with newline", v: raw + "\n", want: raw},
		{name: "file", v: file, want: raw},
		{name: "relative-looking name", v: "my.licence.jwt", wantErr: "neither a JWT nor a readable file"},
		{name: "missing file", v: filepath.Join(dir, "nope"), wantErr: "neither a JWT nor a readable file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readLicence(tt.v)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("readLicence error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("readLicence = %q, %v", got, err)
			}
		})
	}
}

func TestWriteKeyPair(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	privPath, pubPath, err := WriteKeyPair(dir)
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{privPath: 0o600, pubPath: 0o644} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s mode %o, want %o", filepath.Base(path), fi.Mode().Perm(), want)
		}
	}
	privPEM, err := os.ReadFile(privPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := ParsePublicKey(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := Issue(privPEM, goodClaims())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(raw, pub, testNow); err != nil {
		t.Errorf("a licence signed with the written key does not verify with the written public key: %v", err)
	}
	if _, _, err := WriteKeyPair(dir); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("second WriteKeyPair = %v, want a refusal to overwrite", err)
	}
	again, _ := os.ReadFile(privPath)
	if string(again) != string(privPEM) {
		t.Error("the private key was overwritten")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("directory holds %d entries, want the 2 key files", len(entries))
	}
}
