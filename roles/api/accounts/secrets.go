package accounts

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
)

const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// randomString returns n characters of [A-Za-z0-9] from crypto/rand,
// without modulo bias: bytes of 248 and above are drawn again. Each
// character carries 5.95 bits.
func randomString(n int) string {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4+8)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			// crypto/rand.Read does not fail on supported platforms (Go 1.24+).
			panic("BUG: crypto/rand: " + err.Error())
		}
		for _, b := range buf {
			if b < 248 && len(out) < n {
				out = append(out, alphabet[b%62])
			}
		}
	}
	return string(out)
}

// hashSecret is the stored form of a generated key or token: SHA-256 is
// enough for secrets of 190+ random bits, where a slow hash would only cost
// every authenticated request.
func hashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// secretMatches compares a presented secret with a stored hash in constant
// time.
func secretMatches(storedHash, presented string) bool {
	return subtle.ConstantTimeCompare([]byte(storedHash), []byte(hashSecret(presented))) == 1
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic("BUG: crypto/rand: " + err.Error())
	}
	return b
}
