// Package secret makes and checks the Cloud API's generated credentials:
// API keys, device keys and MQTT passwords, provisioning keys, reset and
// invitation tokens. They are random strings of [A-Za-z0-9] (safe in URLs,
// headers and MQTT usernames) stored only as SHA-256 hashes: for secrets
// of 190 random bits and more a slow hash would only cost every
// authenticated request.
package secret

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// Alphabet is what generated secrets are made of.
const Alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// Random returns n characters of Alphabet from crypto/rand, without modulo
// bias (bytes of 248 and above are drawn again): 5.95 bits each.
func Random(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			// crypto/rand.Read does not fail on supported platforms.
			panic("BUG: crypto/rand: " + err.Error())
		}
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, Alphabet[b%62])
			}
		}
	}
	return string(out)
}

// Hash is the stored form of a generated secret: hex SHA-256.
func Hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// Matches compares a presented secret with a stored Hash in constant time.
func Matches(storedHash, presented string) bool {
	return subtle.ConstantTimeCompare([]byte(storedHash), []byte(Hash(presented))) == 1
}

// IsAlphanumeric reports whether s holds only Alphabet's characters.
func IsAlphanumeric(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// PEMBlock reads the first PEM block of a key given in configuration,
// either as PEM text or as the path of a file holding it.
func PEMBlock(v string) (*pem.Block, error) {
	b := []byte(v)
	if !strings.Contains(v, "-----BEGIN") {
		var err error
		if b, err = os.ReadFile(v); err != nil {
			return nil, fmt.Errorf("neither PEM text nor a readable file: %w", err)
		}
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("no PEM block found")
	}
	return blk, nil
}
