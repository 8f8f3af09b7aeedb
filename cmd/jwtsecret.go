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
	s, err := dataDirSecret(dataDir, jwtSecretFile, "token secret")
	if err != nil {
		return err
	}
	j.Secret = config.Secret(s)
	return nil
}

// mqttServiceUser and mqttServicePasswordFile are the embedded broker's
// account for all-in-one's own MQTT client (the API's subscriber).
const (
	mqttServiceUser         = "edgeplat-api"
	mqttServicePasswordFile = "mqtt-service-password"
)

// ensureServiceUser gives all-in-one's API client a broker account when
// none is configured: the embedded broker admits devices by their keys
// and the API by this service user, whose password is generated once and
// kept in the data directory like the token secret.
func ensureServiceUser(cfg *config.Config, dataDir string) error {
	m := &cfg.MQTT
	switch {
	case m.Username == "" && !m.Password.IsSet():
		s, err := dataDirSecret(dataDir, mqttServicePasswordFile, "MQTT service password")
		if err != nil {
			return err
		}
		m.Username, m.Password = mqttServiceUser, config.Secret(s)
	case m.Username == "" || !m.Password.IsSet():
		return errors.New("mqtt.username and mqtt.password must be set together: they are the API's account on the embedded broker")
	}
	return nil
}

// dataDirSecret returns the secret kept in dataDir/file, generating it
// first when the file does not exist.
func dataDirSecret(dataDir, file, what string) (string, error) {
	path := filepath.Join(dataDir, file)
	s, err := readSecretFile(path, what)
	if err == nil {
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return "", fmt.Errorf("create data directory (--data-dir): %w", err)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	s = base64.RawURLEncoding.EncodeToString(raw[:])
	// The secret is written whole to a private temporary file and then
	// linked into place: link fails if the name exists, so of two
	// instances starting on one directory exactly one secret wins, and
	// nobody ever reads a half-written one.
	tmp, err := os.CreateTemp(dataDir, file+".*.tmp") // mode 0600
	if err != nil {
		return "", fmt.Errorf("create %s: %w", what, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(s + "\n"); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write %s: %w", what, err)
	}
	switch err := os.Link(tmp.Name(), path); {
	case errors.Is(err, fs.ErrExist):
		// Another instance won: use its secret. A name that exists but
		// cannot be read (a dangling link) is an error, not a retry.
		if s, err = readSecretFile(path, what); err != nil {
			return "", fmt.Errorf("%w (the name exists: a dangling link?)", err)
		}
	case err != nil:
		return "", fmt.Errorf("create %s: %w", what, err)
	}
	return s, nil
}

// readJWTSecret reads a secret ensureJWTSecret wrote.
func readJWTSecret(path string) (string, error) { return readSecretFile(path, "token secret") }

// readSecretFile reads a secret dataDirSecret wrote.
func readSecretFile(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", what, err)
	}
	s := strings.TrimSpace(string(b))
	if len(s) < 32 {
		return "", fmt.Errorf("%s holds %d bytes, a %s needs at least 32: delete it to generate a new one", path, len(s), what)
	}
	return s, nil
}
