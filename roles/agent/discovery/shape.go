package discovery

import (
	"bytes"
	"encoding/json"
	"sort"
	"unicode/utf8"
)

// Bounds of a payload shape: payloads are outside input of any size and
// depth, so the sampler reads at most this much of them.
const (
	ShapeMaxPayload = 64 << 10
	ShapeMaxFields  = 64
	ShapeMaxDepth   = 4
)

// Shape is the form of one sampled payload: a JSON object's fields
// (nested ones as "a.b") and their value types, another JSON value's
// type, or "text" or "binary".
type Shape struct {
	Format string            `json:"format"` // json, text or binary
	Type   string            `json:"type,omitempty"`
	Fields map[string]string `json:"fields,omitempty"`
	// Truncated: the object has more fields, or deeper ones, than listed.
	Truncated bool `json:"truncated,omitempty"`
	Size      int  `json:"size"`
}

// SampleShape describes payload. It never fails: what is not JSON is
// text (valid UTF-8) or binary, and a payload over ShapeMaxPayload is
// not parsed.
func SampleShape(payload []byte) Shape {
	s := Shape{Size: len(payload)}
	trimmed := bytes.TrimSpace(payload)
	if len(payload) > ShapeMaxPayload || len(trimmed) == 0 || !json.Valid(trimmed) {
		s.Format = "binary"
		if len(payload) <= ShapeMaxPayload && utf8.Valid(payload) && !bytes.ContainsRune(payload, 0) {
			s.Format = "text"
		}
		return s
	}
	s.Format = "json"
	var v any
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		s.Format = "binary"
		return s
	}
	obj, ok := v.(map[string]any)
	if !ok {
		s.Type = jsonType(v)
		return s
	}
	s.Type = "object"
	s.Fields = map[string]string{}
	s.Truncated = flatten(obj, "", 1, s.Fields)
	return s
}

// flatten lists obj's fields into out, nested objects as "a.b" down to
// ShapeMaxDepth; it reports whether anything was left out.
func flatten(obj map[string]any, prefix string, depth int, out map[string]string) bool {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	truncated := false
	for _, k := range keys {
		name := prefix + k
		if len(out) >= ShapeMaxFields {
			return true
		}
		if sub, ok := obj[k].(map[string]any); ok && len(sub) > 0 {
			if depth >= ShapeMaxDepth {
				out[name] = "object"
				truncated = true
				continue
			}
			if flatten(sub, name+".", depth+1, out) {
				truncated = true
			}
			continue
		}
		out[name] = jsonType(obj[k])
	}
	return truncated
}

func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "unknown"
}
