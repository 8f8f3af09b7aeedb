package codec

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// Tenant and agent ids are UUIDs. MQTT topics carry them as 22 characters of
// URL-safe Base64 without padding (RFC 4648 §5) rather than the 36-character
// hyphenated form, because topic length is paid on every publish. A topic
// segment is compared as a string by the broker's ACLs, so each UUID must
// have exactly one 22-character spelling: 16 bytes are 128 bits and 22
// characters hold 132, so the last character's low 4 bits must be zero, and
// anything else (padding, the standard alphabet's '+' and '/', other lengths)
// is refused.

// IDLen is the length of the Base64 form of an id.
const IDLen = 22

// UUID is a 16-byte UUID. A [16]byte, or a github.com/google/uuid.UUID after
// conversion, can be used directly.
type UUID [16]byte

// String returns the canonical lowercase hyphenated form.
func (u UUID) String() string {
	var b [36]byte
	j := 0
	for i, x := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b[j] = '-'
			j++
		}
		b[j], b[j+1] = hexDigits[x>>4], hexDigits[x&0xf]
		j += 2
	}
	return string(b[:])
}

// ParseUUID parses the hyphenated 8-4-4-4-12 form, in either case. Other
// spellings (braces, urn:uuid:, no hyphens) are refused so that every id has
// one text form in logs and URLs.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, fmt.Errorf("%w: %q is not a hyphenated UUID", ErrInvalidID, truncate(s))
	}
	j := 0
	for i := 0; i < 36; {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i++
			continue
		}
		hi, ok1 := unhex(s[i])
		lo, ok2 := unhex(s[i+1])
		if !ok1 || !ok2 {
			return UUID{}, fmt.Errorf("%w: %q is not a hyphenated UUID", ErrInvalidID, s)
		}
		u[j] = hi<<4 | lo
		j++
		i += 2
	}
	return u, nil
}

func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// EncodeID returns the 22-character topic form of u.
func EncodeID(u UUID) string {
	return base64.RawURLEncoding.EncodeToString(u[:])
}

// DecodeID parses the 22-character topic form of a UUID.
func DecodeID(s string) (UUID, error) {
	var u UUID
	if len(s) != IDLen {
		return u, fmt.Errorf("%w: %q has %d characters, want %d", ErrInvalidID, truncate(s), len(s), IDLen)
	}
	// The alphabet is checked by hand because the base64 package skips
	// '\r' and '\n' while decoding, which would let two spellings through.
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return u, fmt.Errorf("%w: %q: character %q is not URL-safe Base64", ErrInvalidID, s, c)
		}
	}
	// Strict rejects non-zero trailing bits: the one-spelling rule above.
	n, err := base64.RawURLEncoding.Strict().Decode(u[:], []byte(s))
	if err != nil || n != len(u) {
		return UUID{}, fmt.Errorf("%w: %q: last character must encode four zero bits", ErrInvalidID, s)
	}
	return u, nil
}

// IDFromUUID converts a hyphenated UUID to its 22-character form.
func IDFromUUID(s string) (string, error) {
	u, err := ParseUUID(s)
	if err != nil {
		return "", err
	}
	return EncodeID(u), nil
}

// UUIDFromID converts a 22-character id to the hyphenated UUID form.
func UUIDFromID(s string) (string, error) {
	u, err := DecodeID(s)
	if err != nil {
		return "", err
	}
	return u.String(), nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// NewUUID returns a random (version 4, RFC 9562) UUID.
func NewUUID() UUID {
	var u UUID
	if _, err := rand.Read(u[:]); err != nil {
		// crypto/rand.Read does not fail on supported platforms.
		panic("BUG: crypto/rand: " + err.Error())
	}
	u[6] = u[6]&0x0f | 0x40
	u[8] = u[8]&0x3f | 0x80
	return u
}
