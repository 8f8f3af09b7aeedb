package memory

import (
	"strings"
	"testing"
)

// The expectations were checked against Redis 7.0's KEYS.
func TestMatchGlob(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "anything", true},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"tenant:*:agent:devices:ingestion", "tenant:abc:agent:devices:ingestion", true},
		{"tenant:*:agent:devices:ingestion", "tenant:a:b:agent:devices:ingestion", true},
		{"tenant:*:agent:devices:ingestion", "tenant:abc:agent:devices:dlq", false},
		{"tenant:*:agent:devices:ingestion", "xtenant:abc:agent:devices:ingestion", false},
		{"a/*", "a/b/c", true}, // unlike path.Match, * crosses '/'
		{"h?llo", "hello", true},
		{"h?llo", "hllo", false},
		{"h[ae]llo", "hallo", true},
		{"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true},
		{"h[^e]llo", "hello", false},
		{"h[a-b]llo", "hbllo", true},
		{"h[b-a]llo", "hbllo", true}, // reversed range
		{"h[a-b]llo", "hcllo", false},
		{`h\*llo`, "h*llo", true},
		{`h\*llo`, "hello", false},
		{`a\`, `a\`, true}, // trailing backslash is literal
		{"[", "[", false},  // unterminated class matches nothing
		{"[^", "x", true},  // ...unless negated
		{"a[", "a", false},
		{"[]", "]", false},
		{"[\\]]", "]", true},
		{"**a", "a", true},
		{"a*", "a", true},
		{"a**", "a", true},
		{"*a*b*c*", "xaybzc", true},
		{"*a*b*c*", "xaybz", false},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.name); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
	// Redis's guard against exponential backtracking: this returns at once.
	if matchGlob(strings.Repeat("a*", 30)+"b", strings.Repeat("a", 60)) {
		t.Error("pathological pattern matched")
	}
}

// FuzzMatchGlob checks matching never panics and that a name, with the
// glob characters escaped, matches itself.
func FuzzMatchGlob(f *testing.F) {
	f.Add("tenant:*:agent", "tenant:x:agent")
	f.Add("[a-", "a")
	f.Add(`\`, `\`)
	f.Fuzz(func(t *testing.T, pattern, name string) {
		_ = matchGlob(pattern, name)
		var escaped strings.Builder
		for i := 0; i < len(name); i++ {
			if strings.IndexByte(`*?[]\`, name[i]) >= 0 {
				escaped.WriteByte('\\')
			}
			escaped.WriteByte(name[i])
		}
		if !matchGlob(escaped.String(), name) {
			t.Fatalf("escaped %q does not match %q", escaped.String(), name)
		}
	})
}
