package codec

import (
	"fmt"
	"strconv"
)

// Message ids have the form v2_{kid}_{sequence}. kid is the 8-character
// identifier of the device's v2 API key, drawn from [A-Za-z0-9]; sequence is
// the agent's message counter as a decimal uint64 without leading zeros. The
// cloud de-duplicates on the whole string, so each message must have exactly
// one spelling: that is why the alphabet is closed, the kid length fixed and
// leading zeros (which would make "v2_k_7" and "v2_k_07" two ids for one
// message) refused.

const (
	msgIDPrefix = "v2_"
	// KidLen is the length of the key identifier in a message id.
	KidLen = 8
	// maxMsgIDLen is the prefix, kid, separator and the 20 digits of MaxUint64.
	maxMsgIDLen = len(msgIDPrefix) + KidLen + 1 + 20
)

// FormatMsgID returns the message id for a key identifier and a sequence
// number.
func FormatMsgID(kid string, seq uint64) (string, error) {
	if !validKid(kid) {
		return "", fmt.Errorf("%w: key identifier %q must be %d characters of [A-Za-z0-9]", ErrInvalidMsgID, kid, KidLen)
	}
	b := make([]byte, 0, maxMsgIDLen)
	b = append(b, msgIDPrefix...)
	b = append(b, kid...)
	b = append(b, '_')
	b = strconv.AppendUint(b, seq, 10)
	return string(b), nil
}

// ParseMsgID splits a message id into its key identifier and sequence number,
// rejecting every other spelling.
func ParseMsgID(s string) (kid string, seq uint64, err error) {
	bad := func(why string) (string, uint64, error) {
		if len(s) > maxMsgIDLen+8 {
			s = s[:maxMsgIDLen+8] + "..."
		}
		return "", 0, fmt.Errorf("%w: %q: %s", ErrInvalidMsgID, s, why)
	}
	if len(s) < len(msgIDPrefix)+KidLen+2 || len(s) > maxMsgIDLen {
		return bad("wrong length")
	}
	if s[:len(msgIDPrefix)] != msgIDPrefix {
		return bad("want prefix " + msgIDPrefix)
	}
	kid = s[len(msgIDPrefix) : len(msgIDPrefix)+KidLen]
	if !validKid(kid) {
		return bad("key identifier must be 8 characters of [A-Za-z0-9]")
	}
	rest := s[len(msgIDPrefix)+KidLen:]
	if rest[0] != '_' {
		return bad("want '_' after the key identifier")
	}
	digits := rest[1:]
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return bad("sequence must be decimal digits")
		}
	}
	if len(digits) > 1 && digits[0] == '0' {
		return bad("sequence has a leading zero")
	}
	seq, perr := strconv.ParseUint(digits, 10, 64)
	if perr != nil {
		return bad("sequence exceeds 2^64-1")
	}
	return kid, seq, nil
}

func validKid(kid string) bool {
	if len(kid) != KidLen {
		return false
	}
	for i := 0; i < len(kid); i++ {
		if c := kid[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}
