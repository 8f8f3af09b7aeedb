package httpx

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzDecodeStrictNUL: for any body, DecodeStrict never lets a string
// holding U+0000 through, and refuses one for a NUL only when the document
// (as encoding/json reads it) really has one.
func FuzzDecodeStrictNUL(f *testing.F) {
	for _, s := range []string{
		`{"a": "b"}`, `{"a": "x\\u0000y"}`, `{"tags": {"location": "\u0000"}}`, `[{"a": 1}, {"b": "\u0000"}]`,
		`{"a\u0000": 1}`, `"\u0000"`, `{"a": [1, null, true, {"b": ["\u0000"]}]}`, `{"a": "\ud800\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v any
		err := DecodeStrict(body, &v)
		var ne *nulError
		switch {
		case err == nil:
			if hasNUL(v) {
				t.Fatalf("DecodeStrict(%q) let a NUL through: %#v", body, v)
			}
		case errors.As(err, &ne):
			var std any
			if json.Unmarshal(body, &std) != nil {
				// A document with a NUL before its syntax error: refusing
				// it for the NUL is as good as for the syntax.
				return
			}
			if !hasNUL(std) {
				t.Fatalf("DecodeStrict(%q) = %v, but the document has no NUL", body, err)
			}
		}
	})
}

func hasNUL(v any) bool {
	switch x := v.(type) {
	case string:
		return strings.ContainsRune(x, 0)
	case []any:
		for _, e := range x {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range x {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}
