package licence

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issue signs a licence granting c with the Ed25519 or RSA private key in
// privateKeyPEM (EdDSA or RS256 after the key). IssuedAt defaults to now
// and ID to a random id; Customer and ExpiresAt are required, and features
// must be known to this version, since a misspelt feature would be granted
// silently to no one.
func Issue(privateKeyPEM []byte, c Claims) (string, error) {
	key, method, err := parsePrivateKey(privateKeyPEM)
	if err != nil {
		return "", fmt.Errorf("issue licence: %w", err)
	}
	c.Customer = strings.TrimSpace(c.Customer)
	if c.Customer == "" {
		return "", errors.New("issue licence: the customer must not be empty")
	}
	if c.MaxAgents < 0 {
		return "", fmt.Errorf("issue licence: max agents must be 0 (unlimited) or more, got %d", c.MaxAgents)
	}
	for _, f := range c.Features {
		if !KnownFeature(f) {
			return "", fmt.Errorf("issue licence: unknown feature %q (known: %s)", f, strings.Join(Features, ", "))
		}
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = time.Now()
	}
	if c.ExpiresAt.IsZero() || !c.ExpiresAt.After(c.IssuedAt) {
		return "", fmt.Errorf("issue licence: the expiry must be after the issue time %s", c.IssuedAt.UTC().Format(time.RFC3339))
	}
	if c.ID == "" {
		var b [12]byte
		_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
		c.ID = base64.RawURLEncoding.EncodeToString(b[:])
	}
	features := slices.Clone(c.Features)
	slices.Sort(features)
	w := wireClaims{MaxAgents: c.MaxAgents, Features: slices.Compact(features), Demo: c.Demo,
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: Issuer, Subject: c.Customer, ID: c.ID,
			IssuedAt: jwt.NewNumericDate(c.IssuedAt), ExpiresAt: jwt.NewNumericDate(c.ExpiresAt),
		}}
	signed, err := jwt.NewWithClaims(method, w).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("issue licence: %w", err)
	}
	return signed, nil
}

// GenerateKey makes an Ed25519 key pair for signing licences, as PEM: the
// private key in PKCS#8, the public key in PKIX (what licence.public_key
// takes).
func GenerateKey() (privatePEM, publicPEM []byte, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generate Ed25519 key: %w", err)
	}
	return encodeKeyPair(priv, pub)
}

func encodeKeyPair(priv ed25519.PrivateKey, pub ed25519.PublicKey) (privatePEM, publicPEM []byte, err error) {
	p8, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, fmt.Errorf("encode private key: %w", err)
	}
	pk, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: p8}),
		pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pk}), nil
}

// File names WriteKeyPair uses.
const (
	PrivateKeyFile = "licence-private.pem"
	PublicKeyFile  = "licence-public.pem"
)

// WriteKeyPair generates an Ed25519 key pair into dir (created 0700 when
// missing): PrivateKeyFile readable by its owner only, PublicKeyFile
// readable by all. It never overwrites: replacing a signing key would
// orphan every licence signed with it, so existing files are an error.
func WriteKeyPair(dir string) (privatePath, publicPath string, err error) {
	privatePath, publicPath = filepath.Join(dir, PrivateKeyFile), filepath.Join(dir, PublicKeyFile)
	for _, p := range []string{privatePath, publicPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("%s already exists; keys are never overwritten, remove it or choose another directory", p)
		}
	}
	privPEM, pubPEM, err := GenerateKey()
	if err != nil {
		return "", "", err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", fmt.Errorf("create key directory: %w", err)
	}
	if err := createOnce(privatePath, privPEM, 0o600); err != nil {
		return "", "", err
	}
	if err := createOnce(publicPath, pubPEM, 0o644); err != nil {
		return "", "", err
	}
	return privatePath, publicPath, nil
}

// createOnce writes data to path only if path does not exist. The data
// goes whole into a temporary file in the same directory that is then
// linked into place: link refuses an existing name, so of two writers
// exactly one wins, and no reader ever sees a half-written file. Returns
// an error wrapping fs.ErrExist when path exists.
func createOnce(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, path); err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return nil
}

// replaceFile writes data to path whole, replacing what is there in one
// rename, so readers see the old file or the new one and nothing between.
func replaceFile(path string, data []byte, perm fs.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("replace %s: %w", path, err)
	}
	return nil
}

// writeTemp writes data to a new temporary file beside path, synced, with
// mode perm, and returns its name.
func writeTemp(path string, data []byte, perm fs.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp") // mode 0600
	if err != nil {
		return "", fmt.Errorf("create %s: %w", path, err)
	}
	name := f.Name()
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if perm != 0o600 {
		if err := f.Chmod(perm); err != nil {
			return fail(err)
		}
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(name)
		return "", fmt.Errorf("write %s: %w", path, err)
	}
	return name, nil
}
