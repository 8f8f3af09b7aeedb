package licence

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// Files Demo keeps in the data directory.
const (
	DemoPrivateKeyFile = "demo-licence-private.pem"
	DemoPublicKeyFile  = "demo-licence-public.pem"
	DemoLicenceFile    = "demo-licence.jwt"
)

// DemoCustomer is the customer of the demo licence.
const DemoCustomer = "local demo"

const (
	demoLifetime = 365 * 24 * time.Hour
	// demoRenewBefore re-mints a demo licence this close to its expiry,
	// so an all-in-one restarted in its last month does not turn
	// restricted soon after.
	demoRenewBefore = 30 * 24 * time.Hour
)

// Demo gives all-in-one a licence of its own when the operator configured
// none: an Ed25519 key pair made once and kept in dataDir, and a licence
// signed with it, labelled demo, for customer DemoCustomer, with unlimited
// agents and every feature, valid for a year and minted again when it has
// expired or is about to. It returns the configuration that points at
// these files. Everything is created with mode 0600 and written whole
// before it appears under its name, so instances starting together on one
// directory agree on one key and never read half a file.
//
// A self-signed licence grants nothing a user of all-in-one could not
// grant themselves: they own the machine and its data directory. It
// exists so a local trial has every feature, and is labelled so that
// nobody mistakes it for a sold one.
func Demo(dataDir string) (config.Licence, error) {
	return demo(dataDir, time.Now())
}

func demo(dataDir string, now time.Time) (config.Licence, error) {
	if dataDir == "" {
		return config.Licence{}, errors.New("demo licence: no data directory")
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return config.Licence{}, fmt.Errorf("demo licence: create data directory: %w", err)
	}
	privPath := filepath.Join(dataDir, DemoPrivateKeyFile)
	pubPath := filepath.Join(dataDir, DemoPublicKeyFile)
	licPath := filepath.Join(dataDir, DemoLicenceFile)

	privPEM, err := demoKey(privPath)
	if err != nil {
		return config.Licence{}, err
	}
	key, _, err := parsePrivateKey(privPEM)
	if err != nil {
		return config.Licence{}, fmt.Errorf("demo licence: %s: %w (delete it to make a new key)", privPath, err)
	}
	edKey, ok := key.(ed25519.PrivateKey)
	if !ok {
		return config.Licence{}, fmt.Errorf("demo licence: %s holds a %T, not an Ed25519 key (delete it to make a new key)", privPath, key)
	}
	pub := edKey.Public().(ed25519.PublicKey)
	pkix, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return config.Licence{}, fmt.Errorf("demo licence: encode public key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})
	// The public key is derived from the private one, so a missing or
	// stale copy is simply rewritten.
	if have, err := os.ReadFile(pubPath); err != nil || !bytes.Equal(have, pubPEM) {
		if err := replaceFile(pubPath, pubPEM, 0o600); err != nil {
			return config.Licence{}, fmt.Errorf("demo licence: %w", err)
		}
	}

	cfg := config.Licence{Key: licPath, PublicKey: pubPath}
	if raw, err := os.ReadFile(licPath); err == nil {
		c, err := Verify(string(raw), pub, now)
		if err == nil && c.ExpiresAt.Sub(now) > demoRenewBefore {
			return cfg, nil
		}
	}
	lic, err := Issue(privPEM, Claims{Customer: DemoCustomer, Features: Features, Demo: true,
		IssuedAt: now, ExpiresAt: now.Add(demoLifetime)})
	if err != nil {
		return config.Licence{}, fmt.Errorf("demo licence: %w", err)
	}
	// Two instances minting at once each rename a valid licence into
	// place; whichever lands last is the one both read.
	if err := replaceFile(licPath, []byte(lic+"\n"), 0o600); err != nil {
		return config.Licence{}, fmt.Errorf("demo licence: %w", err)
	}
	return cfg, nil
}

// demoKey returns the demo signing key in path, creating it if missing.
func demoKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("demo licence: read key: %w", err)
	}
	privPEM, _, err := GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("demo licence: %w", err)
	}
	switch err := createOnce(path, privPEM, 0o600); {
	case errors.Is(err, fs.ErrExist):
		// Another instance made one first: use it. A name that exists
		// but cannot be read (a dangling link) is an error.
		if b, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("demo licence: read key: %w (the name exists: a dangling link?)", err)
		}
		return b, nil
	case err != nil:
		return nil, fmt.Errorf("demo licence: %w", err)
	}
	return privPEM, nil
}
