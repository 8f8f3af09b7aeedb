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
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		s := strings.TrimSpace(string(b))
		if len(s) < 32 {
			return fmt.Errorf("%s holds %d bytes, a token secret needs at least 32: delete it to generate a new one, or set JWT_SECRET", path, len(s))
		}
		j.Secret = config.Secret(s)
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read token secret: %w", err)
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("create data directory (--data-dir): %w", err)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	s := base64.RawURLEncoding.EncodeToString(raw[:])
	// O_EXCL: two instances starting on one directory must not each write
	// their own secret; the loser reads the winner's.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return ensureJWTSecret(cfg, dataDir)
	}
	if err != nil {
		return fmt.Errorf("create token secret: %w", err)
	}
	if _, err := f.WriteString(s + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("write token secret: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write token secret: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write token secret: %w", err)
	}
	j.Secret = config.Secret(s)
	return nil
}
