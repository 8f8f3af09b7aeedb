package codec

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"
)

// jsonDecoder decodes one JSON value (RFC 8259) into the package's value
// types in a single pass. It accepts exactly what encoding/json accepts and
// produces the same strings (invalid UTF-8 and lone surrogates become U+FFFD);
// the differential fuzz test holds it to that. It differs on purpose in three
// ways: numbers keep integer precision (int64/uint64), duplicate keys are an
// error, and the limits apply while parsing rather than after.
type jsonDecoder struct {
	*valueDecoder
	b []byte
	p int
}

func decodeJSON(vd *valueDecoder, b []byte) (any, error) {
	d := jsonDecoder{valueDecoder: vd, b: b}
	d.ws()
	v, err := d.value(true)
	if err != nil {
		return nil, err
	}
	d.ws()
	if d.p != len(d.b) {
		return nil, d.syntax("after top-level value")
	}
	return v, nil
}

// jsonStart returns the first byte after JSON whitespace.
func jsonStart(b []byte) byte {
	for _, c := range b {
		if !isSpace(c) {
			return c
		}
	}
	return 0
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (d *jsonDecoder) ws() {
	for d.p < len(d.b) && isSpace(d.b[d.p]) {
		d.p++
	}
}

func (d *jsonDecoder) syntax(where string) error {
	if d.p >= len(d.b) {
		return fmt.Errorf("%w: json: unexpected end of input %s", ErrMalformed, where)
	}
	return fmt.Errorf("%w: json: invalid character %q %s at offset %d", ErrMalformed, d.b[d.p], where, d.p)
}

func (d *jsonDecoder) value(top bool) (any, error) {
	if d.p >= len(d.b) {
		return nil, d.syntax("looking for a value")
	}
	if err := d.count(); err != nil {
		return nil, err
	}
	switch c := d.b[d.p]; c {
	case '{':
		return d.object(top)
	case '[':
		return d.array()
	case '"':
		b, err := d.str()
		if err != nil {
			return nil, err
		}
		return d.strs.get(b), nil
	case 't':
		return true, d.literal("true")
	case 'f':
		return false, d.literal("false")
	case 'n':
		return nil, d.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			return d.number()
		}
		return nil, d.syntax("looking for a value")
	}
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.b)-d.p < len(lit) || string(d.b[d.p:d.p+len(lit)]) != lit {
		return d.syntax("in literal " + lit)
	}
	d.p += len(lit)
	return nil
}

func (d *jsonDecoder) array() (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.p++ // '['
	d.ws()
	if d.p < len(d.b) && d.b[d.p] == ']' {
		d.p++
		d.depth--
		return []any{}, nil
	}
	// Elements collect on a shared stack, so each array costs one exact-size
	// allocation however many elements it has.
	start := len(d.stack)
	for {
		v, err := d.value(false)
		if err != nil {
			return nil, err
		}
		d.stack = append(d.stack, v)
		if len(d.stack)-start > d.lim.MaxContainerLen {
			return nil, fmt.Errorf("%w: json: array at offset %d has more than %d elements", ErrTooLarge, d.p, d.lim.MaxContainerLen)
		}
		d.ws()
		if d.p >= len(d.b) {
			return nil, d.syntax("in array")
		}
		if d.b[d.p] == ',' {
			d.p++
			d.ws()
			continue
		}
		if d.b[d.p] != ']' {
			return nil, d.syntax("after array element")
		}
		d.p++
		break
	}
	a := make([]any, len(d.stack)-start)
	copy(a, d.stack[start:])
	clear(d.stack[start:])
	d.stack = d.stack[:start]
	d.depth--
	return a, nil
}

func (d *jsonDecoder) object(top bool) (any, error) {
	if err := d.enter(); err != nil {
		return nil, err
	}
	d.p++ // '{'
	d.ws()
	m := make(map[string]any)
	if d.p < len(d.b) && d.b[d.p] == '}' {
		d.p++
		d.depth--
		return m, nil
	}
	stored := 0
	var marker any // the marker's value when it is not the first key
	late := false
	for i := 0; ; i++ {
		if d.p >= len(d.b) || d.b[d.p] != '"' {
			return nil, d.syntax("looking for an object key")
		}
		keyAt := d.p
		kb, err := d.str()
		if err != nil {
			return nil, err
		}
		d.ws()
		if d.p >= len(d.b) || d.b[d.p] != ':' {
			return nil, d.syntax("after object key")
		}
		d.p++
		d.ws()
		if top && string(kb) == markerKey {
			v, err := d.value(false)
			if err != nil {
				return nil, err
			}
			if late || d.dict != nil {
				return nil, fmt.Errorf("%w: json: second %s at offset %d", ErrMalformed, markerKey, keyAt)
			}
			if i == 0 {
				if err := d.setMarker(v); err != nil {
					return nil, err
				}
			} else {
				marker, late = v, true
			}
		} else {
			var k string
			if d.dict != nil {
				k, err = d.compactedKey(kb, top)
				if err != nil {
					return nil, fmt.Errorf("json: offset %d: %w", keyAt, err)
				}
			} else {
				k = internKey(kb)
			}
			v, err := d.value(false)
			if err != nil {
				return nil, err
			}
			m[k] = v
			stored++
			if len(m) != stored {
				return nil, fmt.Errorf("%w: json: duplicate key %q at offset %d", ErrMalformed, k, keyAt)
			}
			if stored > d.lim.MaxContainerLen {
				return nil, fmt.Errorf("%w: json: object at offset %d has more than %d entries", ErrTooLarge, keyAt, d.lim.MaxContainerLen)
			}
		}
		d.ws()
		if d.p >= len(d.b) {
			return nil, d.syntax("in object")
		}
		if d.b[d.p] == ',' {
			d.p++
			d.ws()
			continue
		}
		if d.b[d.p] != '}' {
			return nil, d.syntax("after object value")
		}
		d.p++
		break
	}
	d.depth--
	if late {
		if err := d.setMarker(marker); err != nil {
			return nil, err
		}
		return d.expandLate(m, true)
	}
	return m, nil
}

// str reads a string at d.p (which is '"') and returns its bytes: a view of
// the input when nothing needs unescaping, else d.sbuf. The caller copies.
func (d *jsonDecoder) str() ([]byte, error) {
	start := d.p + 1
	i := start
	for i < len(d.b) {
		c := d.b[i]
		switch {
		case c == '"':
			d.p = i + 1
			return d.b[start:i], nil
		case c == '\\' || c < 0x20:
			return d.strSlow(start, i)
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(d.b[i:])
			if r == utf8.RuneError && size == 1 {
				return d.strSlow(start, i)
			}
			i += size
		}
	}
	d.p = len(d.b)
	return nil, d.syntax("in string")
}

func (d *jsonDecoder) strSlow(start, i int) ([]byte, error) {
	out, end, where := appendUnquoted(append(d.sbuf[:0], d.b[start:i]...), d.b, i)
	d.sbuf = out[:0]
	d.p = end
	if where != "" {
		return nil, d.syntax(where)
	}
	return out, nil
}

// AppendUnquotedJSON appends the value of the JSON string whose body starts
// at b[i] (just past the opening quote) to dst, as encoding/json decodes
// it: escapes undone, surrogate pairs joined, and U+FFFD for invalid UTF-8
// and lone surrogates. It returns the index just past the closing quote.
// Decoders of known schemas share it so that every string means the same
// whichever path read it.
func AppendUnquotedJSON(dst, b []byte, i int) ([]byte, int, error) {
	out, end, where := appendUnquoted(dst, b, i)
	if where != "" {
		return nil, end, fmt.Errorf("%w: json: invalid string %s at offset %d", ErrMalformed, where, end)
	}
	return out, end, nil
}

// appendUnquoted is AppendUnquotedJSON; on a fault it returns the fault's
// offset and where it is ("in string", ...), else "" and the end.
func appendUnquoted(out, b []byte, i int) ([]byte, int, string) {
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			return out, i + 1, ""
		case c < 0x20:
			return out, i, "in string"
		case c == '\\':
			if i+1 >= len(b) {
				return out, len(b), "in string escape"
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/':
				out = append(out, e)
			case 'b':
				out = append(out, '\b')
			case 'f':
				out = append(out, '\f')
			case 'n':
				out = append(out, '\n')
			case 'r':
				out = append(out, '\r')
			case 't':
				out = append(out, '\t')
			case 'u':
				r := getu4(b[i:])
				if r < 0 {
					return out, i, "in \\u escape"
				}
				i += 6
				if utf16.IsSurrogate(r) {
					if r2 := getu4(b[i:]); r2 >= 0 {
						if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
							out = utf8.AppendRune(out, dec)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				out = utf8.AppendRune(out, r)
				continue
			default:
				return out, i + 1, "in string escape"
			}
			i += 2
		case c < utf8.RuneSelf:
			out = append(out, c)
			i++
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				out = utf8.AppendRune(out, utf8.RuneError)
			} else {
				out = append(out, b[i:i+size]...)
			}
			i += size
		}
	}
	return out, len(b), "in string"
}

// getu4 decodes \uXXXX at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}

// number parses a JSON number. Integers keep full precision as int64 (or
// uint64 above MaxInt64); everything else, and integers too large for either,
// is a float64. "-0" is a float64 negative zero, since int64 has none.
func (d *jsonDecoder) number() (any, error) {
	b := d.b
	start := d.p
	p := d.p
	if b[p] == '-' {
		p++
	}
	digitsAt := p
	switch {
	case p < len(b) && b[p] == '0':
		p++
	case p < len(b) && b[p] >= '1' && b[p] <= '9':
		for p < len(b) && b[p] >= '0' && b[p] <= '9' {
			p++
		}
	default:
		d.p = p
		return nil, d.syntax("in number")
	}
	isInt := true
	if p < len(b) && b[p] == '.' {
		p++
		if p >= len(b) || b[p] < '0' || b[p] > '9' {
			d.p = p
			return nil, d.syntax("after decimal point in number")
		}
		for p < len(b) && b[p] >= '0' && b[p] <= '9' {
			p++
		}
		isInt = false
	}
	if p < len(b) && (b[p] == 'e' || b[p] == 'E') {
		p++
		if p < len(b) && (b[p] == '+' || b[p] == '-') {
			p++
		}
		if p >= len(b) || b[p] < '0' || b[p] > '9' {
			d.p = p
			return nil, d.syntax("in exponent of number")
		}
		for p < len(b) && b[p] >= '0' && b[p] <= '9' {
			p++
		}
		isInt = false
	}
	d.p = p
	lit := b[start:p]
	if isInt {
		digits := b[digitsAt:p]
		neg := digitsAt > start
		if len(digits) <= 18 { // below 10^18, so no overflow
			var n int64
			for _, c := range digits {
				n = n*10 + int64(c-'0')
			}
			if neg {
				if n == 0 {
					return math.Copysign(0, -1), nil
				}
				return -n, nil
			}
			return n, nil
		}
		if neg {
			if n, err := strconv.ParseInt(bytesString(lit), 10, 64); err == nil {
				return n, nil
			}
		} else if n, err := strconv.ParseUint(bytesString(lit), 10, 64); err == nil {
			if n > math.MaxInt64 {
				return n, nil
			}
			return int64(n), nil
		}
	}
	f, err := strconv.ParseFloat(bytesString(lit), 64)
	if err != nil {
		return nil, fmt.Errorf("%w: json: number %s at offset %d out of range", ErrMalformed, lit, start)
	}
	return f, nil
}

// bytesString views b as a string without copying. Only for strconv calls
// whose result does not keep the string: the bytes may be a pooled buffer.
func bytesString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}
