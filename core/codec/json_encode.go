package codec

import (
	"encoding/base64"
	"math"
	"strconv"
	"unicode/utf8"
)

// The JSON writer produces exactly encoding/json's bytes for the same value
// (with SetEscapeHTML(false)), which makes its output canonical: object keys
// sorted, no insignificant whitespace, shortest round-trip floats. It exists so
// that compaction can rewrite keys on the fly and so that encoding a batch
// needs no reflection. TestAppendJSONMatchesEncodingJSON holds it to that.

// AppendJSON appends v to dst as canonical JSON: object keys sorted
// bytewise, no insignificant whitespace, no HTML escaping, numbers as
// encoding/json writes them, NaN and ±Inf as null, invalid UTF-8 as U+FFFD.
// Two values that decode equal produce equal bytes, whatever format carried
// them, so the output is what tests compare and what content hashes cover.
// These are the bytes Encode produces for FormatJSON without compaction; any
// top-level value is accepted here, though.
func AppendJSON(dst []byte, v any) ([]byte, error) {
	e := getEncoder(EncodeOptions{MaxDepth: maxDepthCeiling}) // any depth Decode can be configured for
	defer putEncoder(e)
	n := len(dst)
	out, err := e.value(dst, v, 0, false)
	if err != nil {
		return dst[:n], err
	}
	return out, nil
}

const hexDigits = "0123456789abcdef"

func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s, false)
	return append(dst, '"')
}

// AppendJSONString appends s as a JSON string exactly as encoding/json
// writes it: json.Marshal escapes HTML (<, >, & as \u003c...), an Encoder
// with SetEscapeHTML(false) does not. Invalid UTF-8 becomes \ufffd.
func AppendJSONString(dst []byte, s string, escapeHTML bool) []byte {
	dst = append(dst, '"')
	dst = appendJSONStringBody(dst, s, escapeHTML)
	return append(dst, '"')
}

// appendJSONStringBody escapes as encoding/json does.
func appendJSONStringBody(dst []byte, s string, escapeHTML bool) []byte {
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && (!escapeHTML || (b != '<' && b != '>' && b != '&')) {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		// U+2028 and U+2029 are valid JSON but end lines in JavaScript
		// source; encoding/json escapes them, so we do too.
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	return append(dst, s[start:]...)
}

// appendJSONFloat is AppendJSONFloat, with null for what JSON cannot hold.
func appendJSONFloat(dst []byte, f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, "null"...)
	}
	return AppendJSONFloat(dst, f, bits)
}

// AppendJSONFloat formats a finite f of the given bit size (32 or 64) as
// encoding/json does: the shortest representation that round-trips,
// exponent form only outside [1e-6, 1e21). NaN and infinities are the
// caller's to refuse.
func AppendJSONFloat(dst []byte, f float64, bits int) []byte {
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	dst = strconv.AppendFloat(dst, f, format, -1, bits)
	if format == 'e' {
		// clean up e-09 to e-9
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
	}
	return dst
}

func appendJSONBytes(dst []byte, b []byte) []byte {
	if b == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// needsTilde reports whether a literal key of a compacted payload must be
// escaped with a leading '~' so that it is not read as an index.
func needsTilde(k string) bool {
	return k != "" && (k[0] == '~' || (k[0] >= '0' && k[0] <= '9'))
}

// appendJSONKey writes an object key, compacted when the encoder compacts:
// a dictionary name becomes its index as a string, and a literal key that
// starts with a digit or '~' gets a '~' prefix so it cannot be read as one.
func (e *encoder) appendJSONKey(dst []byte, k string) []byte {
	if e.compact {
		if i, ok := dictIndex[k]; ok {
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, int64(i), 10)
			return append(dst, '"')
		}
		if needsTilde(k) {
			dst = append(dst, '"', '~')
			dst = appendJSONStringBody(dst, k, false)
			return append(dst, '"')
		}
	}
	return appendJSONString(dst, k)
}
