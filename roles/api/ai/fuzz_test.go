package ai

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeResponse: whatever a provider sends, DecodeResponse returns a
// completion that keeps its promises, or a *ProviderError.
func FuzzDecodeResponse(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"message":{"role":"assistant","content":"hi"}}],"usage":{"total_tokens":3}}`,
		`{"choices":[{"message":{"content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"get_fleet","arguments":"{\"fleetId\":\"x\"}"}}]}}]}`,
		`{"error":{"message":"x"}}`, `{"choices":[]}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeResponse(b)
		if err != nil {
			var pe *ProviderError
			if !errors.As(err, &pe) {
				t.Fatalf("%T is no *ProviderError: %v", err, err)
			}
			return
		}
		if c.Message.Content == "" && len(c.Message.ToolCalls) == 0 {
			t.Fatal("a completion with neither content nor tool calls")
		}
		if len(c.Message.ToolCalls) > maxToolCalls || c.Usage.TotalTokens < 0 {
			t.Fatalf("bounds broken: %+v", c)
		}
		ids := map[string]bool{}
		for _, tc := range c.Message.ToolCalls {
			if tc.ID == "" || ids[tc.ID] || !utf8.ValidString(tc.ID) || !toolNamePattern.MatchString(tc.Function.Name) ||
				tc.Function.Arguments == "" || len(tc.Function.Arguments) > maxArgumentBytes || tc.Type != "function" {
				t.Fatalf("tool call breaks the promises: %+v", tc)
			}
			ids[tc.ID] = true
		}
	})
}
