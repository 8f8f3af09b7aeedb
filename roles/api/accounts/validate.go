package accounts

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
)

// ErrInvalid marks input that breaks a rule; the message says which.
var ErrInvalid = errors.New("invalid input")

// CheckEmail accepts a bare address (no display name) of at most 254 bytes.
func CheckEmail(e string) error {
	if e == "" {
		return fmt.Errorf("%w: email is required", ErrInvalid)
	}
	a, err := mail.ParseAddress(e)
	if err != nil || a.Address != e || a.Name != "" || len(e) > 254 {
		return fmt.Errorf("%w: email %q is not an e-mail address", ErrInvalid, truncate(e))
	}
	return nil
}

// CheckUsername accepts 3 to 64 characters of [a-z0-9._-] starting with a
// letter or digit; a user name containing '@' could be taken for another
// account's e-mail at login.
func CheckUsername(n string) error {
	if len(n) < 3 || len(n) > 64 {
		return fmt.Errorf("%w: username must be 3 to 64 characters, got %d", ErrInvalid, len(n))
	}
	for i, r := range n {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || (i > 0 && strings.ContainsRune("._-", r))
		if !ok {
			return fmt.Errorf("%w: username %q may hold only a-z, 0-9, '.', '_' and '-', and must start with a letter or digit", ErrInvalid, truncate(n))
		}
	}
	return nil
}

func truncate(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
