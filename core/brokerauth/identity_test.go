package brokerauth

import (
	"errors"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestValidateIdentifier(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"api key", "dk_live_7Qm2xZ-abc.def", true},
		{"client id", "agent-" + agentUUID, true},
		{"non-ASCII letters", "gerät-ü", true},
		{"space", "a b", true},
		{"longest", strings.Repeat("k", MaxIdentifierLen), true},
		{"empty", "", false},
		{"too long", strings.Repeat("k", MaxIdentifierLen+1), false},
		{"plus", "a+b", false},
		{"hash", "a#", false},
		{"slash", "a/b", false},
		{"dollar", "$SYS", false},
		{"dollar inside", "a$b", false},
		{"NUL", "a\x00b", false},
		{"newline", "a\nb", false},
		{"DEL", "a\x7fb", false},
		{"C1", "a\u0085b", false},
		{"invalid UTF-8", "a\xffb", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateIdentifier(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("ValidateIdentifier(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidIdentifier) {
				t.Errorf("error %v does not wrap ErrInvalidIdentifier", err)
			}
		})
	}
}

func TestAgentFromClientID(t *testing.T) {
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"agent-" + agentUUID, agentUUID, true},
		{"agent-" + strings.ToUpper(agentUUID), "", false},
		{"Agent-" + agentUUID, "", false},
		{agentUUID, "", false},
		{"agent-", "", false},
		{"agent-" + agentUUID + "x", "", false},
		{"agent-" + strings.ReplaceAll(agentUUID, "-", ""), "", false},
		{"device-" + agentUUID, "", false},
	}
	for _, tt := range tests {
		got, ok := agentFromClientID(tt.in)
		if got != tt.want || ok != tt.ok {
			t.Errorf("agentFromClientID(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzIdentifier checks the identity parsers on any input: an accepted
// identifier holds none of the refused characters, and an accepted client
// id is exactly "agent-" and the canonical UUID it yields.
func FuzzIdentifier(f *testing.F) {
	for _, s := range []string{"agent-" + agentUUID, "agent-" + strings.ToUpper(agentUUID), "dk_1", "a/b", "$x", "a\x00", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ValidateIdentifier(s) == nil {
			if s == "" || len(s) > MaxIdentifierLen || !utf8.ValidString(s) || strings.ContainsAny(s, "+#/$") {
				t.Fatalf("ValidateIdentifier accepted %q", s)
			}
			for _, r := range s {
				if unicode.IsControl(r) {
					t.Fatalf("ValidateIdentifier accepted control character %U in %q", r, s)
				}
			}
		}
		if u, ok := agentFromClientID(s); ok {
			if s != AgentClientID(u) {
				t.Fatalf("agentFromClientID(%q) = %q, not its canonical spelling", s, u)
			}
			if ValidateIdentifier(s) != nil {
				t.Fatalf("client id %q is accepted as an agent's but fails ValidateIdentifier", s)
			}
		}
	})
}
