package cmd

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgeplat/edgeplat/config"
)

// jwtSecretFile is where all-in-one keeps the token secret it generated.
const jwtSecretFile = "jwt-secret"

// ensureJWTSecret gives all-in-one a token key when none is configured: a
// random secret generated once and kept in the data directory, so tokens
// survive restarts and no installation shares a built-in default. A
// configured key always wins. serve-api never does this: replicas must
// share a key, which only the operator can give them.
func ensureJWTSecret(cfg *config.Config, dataDir string) error {
	j := &cfg.JWT
	if j.Secret.IsSet() || j.PrivateKey.IsSet() || j.PublicKey != "" {
		return nil
	}
	path := filepath.Join(dataDir, jwtSecretFile)
	s, err := readJWTSecret(path)
	if err == nil {
		j.Secret = config.Secret(s)
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory (--data-dir): %w", err)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	s = base64.RawURLEncoding.EncodeToString(raw[:])
	// The secret is written whole to a private temporary file and then
	// linked into place: link fails if the name exists, so of two
	// instances starting on one directory exactly one secret wins, and
	// nobody ever reads a half-written one.
	tmp, err := os.CreateTemp(dataDir, jwtSecretFile+".*.tmp") // mode 0600
	if err != nil {
		return fmt.Errorf("create token secret: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(s + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write token secret: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write token secret: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write token secret: %w", err)
	}
	switch err := os.Link(tmp.Name(), path); {
	case errors.Is(err, fs.ErrExist):
		// Another instance won: use its secret. A name that exists but
		// cannot be read (a dangling link) is an error, not a retry.
		if s, err = readJWTSecret(path); err != nil {
			return fmt.Errorf("%w (the name exists: a dangling link?)", err)
		}
	case err != nil:
		return fmt.Errorf("create token secret: %w", err)
	}
	j.Secret = config.Secret(s)
	return nil
}

// readJWTSecret reads a secret ensureJWTSecret wrote.
func readJWTSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read token secret: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 32 {
		return "", fmt.Errorf("%s holds %d bytes, a token secret needs at least 32: delete it to generate a new one, or set JWT_SECRET", path, len(s))
	}
	return s, nil
}
