package accounts

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Password rules. The upper bound keeps one login from costing a hash of a
// megabyte; 8 is the floor docs/access.md promises.
const (
	MinPasswordLen = 8
	MaxPasswordLen = 256
)

// argon2id parameters: OWASP's recommended minimum (19 MiB, two passes, one
// lane), about 25 ms on one core here. They are stored with every hash, so
// raising them later leaves old hashes verifiable.
const (
	argonTime    = 2
	argonMemory  = 19 * 1024
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// ErrWeakPassword marks a password that breaks the rules above.
var ErrWeakPassword = errors.New("password does not meet the rules")

// CheckPassword applies the password rules.
func CheckPassword(pw string) error {
	n := utf8.RuneCountInString(pw)
	switch {
	case !utf8.ValidString(pw):
		return fmt.Errorf("%w: it is not valid UTF-8", ErrWeakPassword)
	case n < MinPasswordLen:
		return fmt.Errorf("%w: at least %d characters are required, got %d", ErrWeakPassword, MinPasswordLen, n)
	case len(pw) > MaxPasswordLen:
		return fmt.Errorf("%w: at most %d bytes are allowed", ErrWeakPassword, MaxPasswordLen)
	case strings.TrimSpace(pw) == "":
		return fmt.Errorf("%w: it is blank", ErrWeakPassword)
	}
	return nil
}

// hashSlots bounds the argon2id computations running at once: each takes
// 19 MiB, and a burst of logins must queue for CPU rather than grow the
// heap by 19 MiB per request.
var hashSlots = make(chan struct{}, max(2, runtime.GOMAXPROCS(0)))

func withHashSlot[T any](fn func() T) T {
	hashSlots <- struct{}{}
	defer func() { <-hashSlots }()
	return fn()
}

// HashPassword returns the PHC string of an argon2id hash of pw.
func HashPassword(pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("password salt: %w", err)
	}
	key := withHashSlot(func() []byte {
		return argon2.IDKey([]byte(pw), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	})
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

// VerifyPassword reports whether pw matches the PHC string hash. A hash it
// cannot read never matches.
func VerifyPassword(hash, pw string) bool {
	parts := strings.Split(hash, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != fmt.Sprintf("v=%d", argon2.Version) {
		return false
	}
	var mem, t uint32
	var p uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &t, &p); err != nil {
		return false
	}
	// Bounds on what a stored hash may ask for, so a tampered row cannot
	// make a login allocate gigabytes.
	if mem == 0 || mem > 1<<20 || t == 0 || t > 16 || p == 0 {
		return false
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) < 16 || len(want) > 64 {
		return false
	}
	got := withHashSlot(func() []byte { return argon2.IDKey([]byte(pw), salt, t, mem, p, uint32(len(want))) })
	return subtle.ConstantTimeCompare(got, want) == 1
}

// dummyHash is verified against when a login names no account, so an
// unknown account costs what a wrong password costs and the two cannot be
// told apart by timing. It is made on first use: at package init it cost
// every edgeplat process, the agent included, 115 ms and a 19 MiB argon2
// buffer whose pages stayed resident.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("edgeplat-no-such-account")
	if err != nil {
		panic("BUG: hash the dummy password: " + err.Error())
	}
	return h
})
