package secret

import (
	"strings"
	"testing"
)

func TestRandom(t *testing.T) {
	seen := map[string]bool{}
	counts := map[rune]int{}
	for range 2000 {
		s := Random(16)
		if len(s) != 16 || !IsAlphanumeric(s) {
			t.Fatalf("Random(16) = %q", s)
		}
		if seen[s] {
			t.Fatalf("Random repeated %q", s)
		}
		seen[s] = true
		for _, r := range s {
			counts[r]++
		}
	}
	// 32000 draws over 62 characters: every one appears, none dominates.
	if len(counts) != 62 {
		t.Errorf("%d distinct characters, want 62", len(counts))
	}
	for r, n := range counts {
		if n < 300 || n > 760 {
			t.Errorf("%q drawn %d times of 32000, far from the 516 expected", r, n)
		}
	}
}

func TestHashAndMatches(t *testing.T) {
	h := Hash("ek_abc")
	if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
		t.Fatalf("Hash = %q, want 64 hex digits", h)
	}
	for _, tt := range []struct {
		presented string
		ok        bool
	}{{"ek_abc", true}, {"ek_abd", false}, {"", false}, {"EK_ABC", false}} {
		if got := Matches(h, tt.presented); got != tt.ok {
			t.Errorf("Matches(%q) = %v, want %v", tt.presented, got, tt.ok)
		}
	}
	if Matches("", "") {
		t.Error("an empty stored hash matched")
	}
}

func TestIsAlphanumeric(t *testing.T) {
	for _, tt := range []struct {
		s  string
		ok bool
	}{{"Ab12", true}, {"", true}, {"a_b", false}, {"ä", false}, {"a/b", false}} {
		if got := IsAlphanumeric(tt.s); got != tt.ok {
			t.Errorf("IsAlphanumeric(%q) = %v", tt.s, got)
		}
	}
}
