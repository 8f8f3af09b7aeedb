package codec

import (
	"encoding/base64"
	"fmt"

	"github.com/google/uuid"
)

// Tenant and agent ids are UUIDs. MQTT topics carry them as 22 characters of
// URL-safe Base64 without padding (RFC 4648 section 5) rather than the 36-character
// hyphenated form, because topic length is paid on every publish. A topic
// segment is compared as a string by the broker's ACLs, so each UUID must
// have exactly one 22-character spelling: 16 bytes are 128 bits and 22
// characters hold 132, so the last character's low 4 bits must be zero, and
// anything else (padding, the standard alphabet's '+' and '/', other lengths)
// is refused.

// IDLen is the length of the Base64 form of an id.
const IDLen = 22

// UUID is a 16-byte UUID. A [16]byte, or a github.com/google/uuid.UUID after
// conversion, can be used directly. It is a defined type rather than an
// alias of uuid.UUID on purpose: uuid.UUID's sql.Valuer and text marshalling
// would change how ids already stored and encoded as 16 bytes are written.
type UUID [16]byte

// String returns the canonical lowercase hyphenated form.
func (u UUID) String() string { return uuid.UUID(u).String() }

// ParseUUID parses the hyphenated 8-4-4-4-12 form, in either case. Other
// spellings (braces, urn:uuid:, no hyphens), which uuid.Parse also accepts,
// are refused so that every id has one text form in logs and URLs.
func ParseUUID(s string) (UUID, error) {
	if len(s) != 36 {
		return UUID{}, fmt.Errorf("%w: %q is not a hyphenated UUID", ErrInvalidID, truncate(s))
	}
	u, err := uuid.Parse(s)
	if err != nil {
		return UUID{}, fmt.Errorf("%w: %q is not a hyphenated UUID", ErrInvalidID, s)
	}
	return UUID(u), nil
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

// ParseIDOrUUID parses either text form of a UUID: the 22-character
// topic form or the hyphenated one. Commands and messages take both, as
// operators copy whichever one they see.
func ParseIDOrUUID(s string) (UUID, error) {
	if len(s) == IDLen {
		return DecodeID(s)
	}
	return ParseUUID(s)
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
func NewUUID() UUID { return UUID(uuid.New()) }
