package db

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// StorableText returns s as a PostgreSQL text or jsonb value can hold it:
// valid UTF-8 without NUL, each offending byte or NUL replaced by U+FFFD.
// SQLite would store either, but both engines keep the same text. Use it
// for free text from outside (log lines, audit details), where refusing
// the record would lose more than the replaced characters.
func StorableText(s string) string {
	if strings.IndexByte(s, 0) < 0 && isValidUTF8(s) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func isValidUTF8(s string) bool { return strings.ToValidUTF8(s, "") == s }

var escapedNUL = []byte(`\u0000`)

// StorableJSON returns the JSON document raw with every string, keys
// included, made storable as StorableText makes it: jsonb refuses the
// escape \u0000 as PostgreSQL text refuses the byte. raw is returned as it
// is when it holds no such escape, the common case.
func StorableJSON(raw []byte) ([]byte, error) {
	if !bytes.Contains(raw, escapedNUL) {
		return raw, nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("storable json: %w", err)
	}
	out, err := json.Marshal(storableValue(v))
	if err != nil {
		return nil, fmt.Errorf("storable json: %w", err)
	}
	return out, nil
}

func storableValue(v any) any {
	switch x := v.(type) {
	case string:
		return StorableText(x)
	case []any:
		for i := range x {
			x[i] = storableValue(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[StorableText(k)] = storableValue(e)
		}
		return out
	}
	return v
}
