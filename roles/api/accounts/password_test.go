package accounts

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckPassword(t *testing.T) {
	tests := []struct {
		pw string
		ok bool
	}{
		{"correct horse", true},
		{"12345678", true},
		{"ünïcødé!", true}, // 8 characters, more bytes
		{"1234567", false},
		{"        ", false},
		{strings.Repeat("x", MaxPasswordLen+1), false},
		{"bad\xffutf8", false},
	}
	for _, tt := range tests {
		err := CheckPassword(tt.pw)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrWeakPassword)) {
			t.Errorf("CheckPassword(%q) = %v, want ok=%v", tt.pw, err, tt.ok)
		}
	}
}

func TestHashPassword(t *testing.T) {
	h1, err := HashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	h2, _ := HashPassword("correct horse")
	if h1 == h2 {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
	if !strings.HasPrefix(h1, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Errorf("hash %q is not a PHC argon2id string with the chosen parameters", h1)
	}
	for _, tt := range []struct {
		hash, pw string
		want     bool
	}{
		{h1, "correct horse", true},
		{h1, "correct horsf", false},
		{h1, "", false},
		{strings.Replace(h1, "m=19456", "m=4294967295", 1), "correct horse", false}, // a tampered cost is refused, not run
		{strings.Replace(h1, "argon2id", "argon2i", 1), "correct horse", false},
		{"", "correct horse", false},
		{"$argon2id$v=19$m=19456,t=2,p=1$!!$!!", "correct horse", false},
	} {
		if got := VerifyPassword(tt.hash, tt.pw); got != tt.want {
			t.Errorf("VerifyPassword(%.40q, %q) = %v, want %v", tt.hash, tt.pw, got, tt.want)
		}
	}
}

func TestCheckEmailAndUsername(t *testing.T) {
	for _, tt := range []struct {
		email string
		ok    bool
	}{
		{"a@example.com", true},
		{"first.last+tag@sub.example.org", true},
		{"", false},
		{"no-at-sign", false},
		{"Name <a@example.com>", false},
		{"a@example.com\r\nBcc: x@y.z", false},
	} {
		if err := CheckEmail(tt.email); (err == nil) != tt.ok {
			t.Errorf("CheckEmail(%q) = %v, want ok=%v", tt.email, err, tt.ok)
		}
	}
	for _, tt := range []struct {
		name string
		ok   bool
	}{
		{"root", true},
		{"ops.team-1_x", true},
		{"ab", false},
		{".hidden", false},
		{"a@b.c", false},
		{"with space", false},
		{strings.Repeat("a", 65), false},
	} {
		if err := CheckUsername(tt.name); (err == nil) != tt.ok {
			t.Errorf("CheckUsername(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

// BenchmarkPassword is the cost of one login's password check (and of the
// dummy check an unknown account gets): argon2id at the stored parameters.
func BenchmarkPassword(b *testing.B) {
	h, err := HashPassword("correct horse battery")
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if !VerifyPassword(h, "correct horse battery") {
			b.Fatal("no match")
		}
	}
}
