package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"
)

// Application tag numbers (clause 20.2.1.4).
const (
	TagNull            = 0
	TagBoolean         = 1
	TagUnsigned        = 2
	TagSigned          = 3
	TagReal            = 4
	TagDouble          = 5
	TagOctetString     = 6
	TagCharacterString = 7
	TagBitString       = 8
	TagEnumerated      = 9
	TagDate            = 10
	TagTime            = 11
	TagObjectID        = 12
)

// ErrTruncated is returned when a length points past the end of the data.
var ErrTruncated = errors.New("bacnet: truncated data")

// Tag is one decoded tag header.
type Tag struct {
	Number  uint8
	Context bool
	// Opening and Closing mark the brackets of a constructed context value.
	Opening, Closing bool
	// Length is the content length; for an application boolean it is the
	// value itself, since a boolean has no content octets.
	Length int
}

// DecodeTag reads a tag header at the start of b and returns it with the
// number of header bytes. The length is checked against b, so a caller may
// slice b[n:n+t.Length] for any tag but an application boolean.
func DecodeTag(b []byte) (Tag, int, error) {
	if len(b) < 1 {
		return Tag{}, 0, ErrTruncated
	}
	first := b[0]
	t := Tag{Number: first >> 4, Context: first&0x08 != 0}
	n := 1
	if t.Number == 0x0F {
		if len(b) < 2 {
			return Tag{}, 0, ErrTruncated
		}
		t.Number = b[1]
		n = 2
	}
	lvt := first & 0x07
	switch {
	case t.Context && lvt == 6:
		t.Opening = true
		return t, n, nil
	case t.Context && lvt == 7:
		t.Closing = true
		return t, n, nil
	case !t.Context && t.Number == TagBoolean:
		if lvt > 1 {
			return Tag{}, 0, fmt.Errorf("bacnet: boolean tag with value %d", lvt)
		}
		t.Length = int(lvt)
		return t, n, nil
	case lvt < 5:
		t.Length = int(lvt)
	default: // 5: the length follows
		if len(b) < n+1 {
			return Tag{}, 0, ErrTruncated
		}
		l := int(b[n])
		n++
		switch l {
		case 254:
			if len(b) < n+2 {
				return Tag{}, 0, ErrTruncated
			}
			l = int(binary.BigEndian.Uint16(b[n:]))
			n += 2
		case 255:
			if len(b) < n+4 {
				return Tag{}, 0, ErrTruncated
			}
			u := binary.BigEndian.Uint32(b[n:])
			n += 4
			if uint64(u) > uint64(len(b)) {
				return Tag{}, 0, ErrTruncated
			}
			l = int(u)
		}
		t.Length = l
	}
	if t.Length > len(b)-n {
		return Tag{}, 0, ErrTruncated
	}
	return t, n, nil
}

// appendTag writes a tag header with number num, class and length.
func appendTag(dst []byte, num uint8, context bool, length int) []byte {
	var first byte
	if context {
		first = 0x08
	}
	ext := num > 14
	if ext {
		first |= 0xF0
	} else {
		first |= num << 4
	}
	if length < 5 {
		first |= byte(length)
	} else {
		first |= 5
	}
	dst = append(dst, first)
	if ext {
		dst = append(dst, num)
	}
	switch {
	case length < 5:
	case length < 254:
		dst = append(dst, byte(length))
	case length <= math.MaxUint16:
		dst = append(dst, 254, byte(length>>8), byte(length))
	default:
		dst = append(dst, 255, byte(length>>24), byte(length>>16), byte(length>>8), byte(length))
	}
	return dst
}

// AppendOpening and AppendClosing write the brackets of context tag num.
func AppendOpening(dst []byte, num uint8) []byte { return appendBracket(dst, num, 6) }

// AppendClosing writes the closing bracket of context tag num.
func AppendClosing(dst []byte, num uint8) []byte { return appendBracket(dst, num, 7) }

func appendBracket(dst []byte, num uint8, lvt byte) []byte {
	if num > 14 {
		return append(dst, 0xF8|lvt, num)
	}
	return append(dst, num<<4|0x08|lvt)
}

func uintBytes(v uint64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], v)
	i := 0
	for i < 7 && buf[i] == 0 {
		i++
	}
	return buf[i:]
}

func intBytes(v int64) []byte {
	var buf [8]byte
	binary.BigEndian.PutUint64(buf[:], uint64(v))
	i := 0
	// Drop a leading byte while the next one still carries the sign.
	for i < 7 && ((buf[i] == 0 && buf[i+1]&0x80 == 0) || (buf[i] == 0xFF && buf[i+1]&0x80 != 0)) {
		i++
	}
	return buf[i:]
}

// AppendContextUnsigned writes an unsigned integer as context tag num.
func AppendContextUnsigned(dst []byte, num uint8, v uint64) []byte {
	b := uintBytes(v)
	return append(appendTag(dst, num, true, len(b)), b...)
}

// AppendContextObjectID writes an object identifier as context tag num.
func AppendContextObjectID(dst []byte, num uint8, id ObjectID) []byte {
	dst = appendTag(dst, num, true, 4)
	return binary.BigEndian.AppendUint32(dst, id.raw())
}

// AppendApp writes v with its application tag. v is one of the types
// DecodeApp returns: nil, bool, uint64, int64, float32, float64, []byte,
// string, BitString, Enumerated, ObjectID.
func AppendApp(dst []byte, v any) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return append(dst, 0x00), nil
	case bool:
		if x {
			return append(dst, 0x11), nil
		}
		return append(dst, 0x10), nil
	case uint64:
		b := uintBytes(x)
		return append(appendTag(dst, TagUnsigned, false, len(b)), b...), nil
	case int64:
		b := intBytes(x)
		return append(appendTag(dst, TagSigned, false, len(b)), b...), nil
	case float32:
		dst = appendTag(dst, TagReal, false, 4)
		return binary.BigEndian.AppendUint32(dst, math.Float32bits(x)), nil
	case float64:
		dst = appendTag(dst, TagDouble, false, 8)
		return binary.BigEndian.AppendUint64(dst, math.Float64bits(x)), nil
	case []byte:
		return append(appendTag(dst, TagOctetString, false, len(x)), x...), nil
	case string:
		dst = appendTag(dst, TagCharacterString, false, len(x)+1)
		return append(append(dst, charsetUTF8), x...), nil
	case BitString:
		if x.Len > 8*len(x.Bytes) || x.Len < 8*len(x.Bytes)-7 {
			return nil, fmt.Errorf("bacnet: bit string of %d bits in %d bytes", x.Len, len(x.Bytes))
		}
		dst = appendTag(dst, TagBitString, false, len(x.Bytes)+1)
		return append(append(dst, byte(8*len(x.Bytes)-x.Len)), x.Bytes...), nil
	case Enumerated:
		b := uintBytes(uint64(x))
		return append(appendTag(dst, TagEnumerated, false, len(b)), b...), nil
	case ObjectID:
		dst = appendTag(dst, TagObjectID, false, 4)
		return binary.BigEndian.AppendUint32(dst, x.raw()), nil
	}
	return nil, fmt.Errorf("bacnet: cannot encode %T", v)
}

// Enumerated is an application-tagged enumerated value; it is kept apart
// from Unsigned because the two mean different things to a device.
type Enumerated uint32

// BitString is a BACnet bit string: Len bits, the first in the high bit
// of Bytes[0].
type BitString struct {
	Len   int
	Bytes []byte
}

// Bit reports bit i; bits past Len are false.
func (b BitString) Bit(i int) bool {
	if i < 0 || i >= b.Len {
		return false
	}
	return b.Bytes[i/8]&(0x80>>(i%8)) != 0
}

// Date and Time are kept as their four raw octets; the adapter only passes
// them through.
type (
	Date [4]byte
	Time [4]byte
)

// ContextValue is a primitive context-tagged value inside a property
// value, kept raw since its meaning depends on the property.
type ContextValue struct {
	Tag  uint8
	Data []byte
}

// Character sets of a character string (clause 20.2.9).
const (
	charsetUTF8   = 0
	charsetUCS2   = 4
	charsetLatin1 = 5
)

// DecodeApp decodes one application-tagged value at the start of b and
// returns it with the bytes consumed. Go types: nil (null), bool, uint64,
// int64, float32, float64, []byte (a copy), string, BitString,
// Enumerated, ObjectID, Date, Time.
func DecodeApp(b []byte) (any, int, error) {
	t, n, err := DecodeTag(b)
	if err != nil {
		return nil, 0, err
	}
	if t.Context {
		return nil, 0, fmt.Errorf("bacnet: context tag %d where an application tag was expected", t.Number)
	}
	if t.Number == TagBoolean {
		return t.Length == 1, n, nil
	}
	c := b[n : n+t.Length]
	v, err := decodeAppContent(t.Number, c)
	if err != nil {
		return nil, 0, err
	}
	return v, n + t.Length, nil
}

func decodeAppContent(tag uint8, c []byte) (any, error) {
	switch tag {
	case TagNull:
		return nil, nil
	case TagUnsigned:
		return decodeUnsigned(c)
	case TagSigned:
		if len(c) < 1 || len(c) > 8 {
			return nil, fmt.Errorf("bacnet: signed integer of %d bytes", len(c))
		}
		v := int64(int8(c[0]))
		for _, x := range c[1:] {
			v = v<<8 | int64(x)
		}
		return v, nil
	case TagReal:
		if len(c) != 4 {
			return nil, fmt.Errorf("bacnet: real of %d bytes", len(c))
		}
		return math.Float32frombits(binary.BigEndian.Uint32(c)), nil
	case TagDouble:
		if len(c) != 8 {
			return nil, fmt.Errorf("bacnet: double of %d bytes", len(c))
		}
		return math.Float64frombits(binary.BigEndian.Uint64(c)), nil
	case TagOctetString:
		return append([]byte(nil), c...), nil
	case TagCharacterString:
		return decodeCharString(c)
	case TagBitString:
		if len(c) < 1 || c[0] > 7 || (len(c) == 1 && c[0] != 0) {
			return nil, errors.New("bacnet: malformed bit string")
		}
		return BitString{Len: 8*(len(c)-1) - int(c[0]), Bytes: append([]byte(nil), c[1:]...)}, nil
	case TagEnumerated:
		u, err := decodeUnsigned(c)
		if err != nil {
			return nil, err
		}
		if u > math.MaxUint32 {
			return nil, fmt.Errorf("bacnet: enumerated value %d out of range", u)
		}
		return Enumerated(u), nil
	case TagDate, TagTime:
		if len(c) != 4 {
			return nil, fmt.Errorf("bacnet: date or time of %d bytes", len(c))
		}
		if tag == TagDate {
			return Date(c), nil
		}
		return Time(c), nil
	case TagObjectID:
		if len(c) != 4 {
			return nil, fmt.Errorf("bacnet: object identifier of %d bytes", len(c))
		}
		return objectIDFromRaw(binary.BigEndian.Uint32(c)), nil
	}
	return nil, fmt.Errorf("bacnet: unknown application tag %d", tag)
}

func decodeUnsigned(c []byte) (uint64, error) {
	if len(c) < 1 || len(c) > 8 {
		return 0, fmt.Errorf("bacnet: unsigned integer of %d bytes", len(c))
	}
	var v uint64
	for _, x := range c {
		v = v<<8 | uint64(x)
	}
	return v, nil
}

func decodeCharString(c []byte) (string, error) {
	if len(c) < 1 {
		return "", errors.New("bacnet: character string without a character set")
	}
	s := c[1:]
	switch c[0] {
	case charsetUTF8:
		return string(s), nil
	case charsetLatin1:
		r := make([]rune, len(s))
		for i, x := range s {
			r[i] = rune(x)
		}
		return string(r), nil
	case charsetUCS2:
		if len(s)%2 != 0 {
			return "", errors.New("bacnet: UCS-2 string of odd length")
		}
		u := make([]uint16, len(s)/2)
		for i := range u {
			u[i] = binary.BigEndian.Uint16(s[2*i:])
		}
		return string(utf16.Decode(u)), nil
	}
	return "", fmt.Errorf("bacnet: unsupported character set %d", c[0])
}

// expectContext reads a primitive context tag num at the start of b and
// returns its content and the bytes consumed.
func expectContext(b []byte, num uint8) ([]byte, int, error) {
	t, n, err := DecodeTag(b)
	if err != nil {
		return nil, 0, err
	}
	if !t.Context || t.Number != num || t.Opening || t.Closing {
		return nil, 0, fmt.Errorf("bacnet: want context tag %d, got %s", num, t)
	}
	return b[n : n+t.Length], n + t.Length, nil
}

// peekContext reports whether b starts with a primitive context tag num.
func peekContext(b []byte, num uint8) bool {
	t, _, err := DecodeTag(b)
	return err == nil && t.Context && !t.Opening && !t.Closing && t.Number == num
}

// expectBracket reads an opening (open) or closing bracket of context tag
// num and returns the bytes consumed.
func expectBracket(b []byte, num uint8, open bool) (int, error) {
	t, n, err := DecodeTag(b)
	if err != nil {
		return 0, err
	}
	if !t.Context || t.Number != num || (open && !t.Opening) || (!open && !t.Closing) {
		what := "closing"
		if open {
			what = "opening"
		}
		return 0, fmt.Errorf("bacnet: want %s tag %d, got %s", what, num, t)
	}
	return n, nil
}

func (t Tag) String() string {
	switch {
	case t.Opening:
		return fmt.Sprintf("opening tag %d", t.Number)
	case t.Closing:
		return fmt.Sprintf("closing tag %d", t.Number)
	case t.Context:
		return fmt.Sprintf("context tag %d", t.Number)
	}
	return fmt.Sprintf("application tag %d", t.Number)
}

// maxDepth bounds the nesting of constructed values, so a hostile frame of
// opening tags costs a bounded amount of work.
const maxDepth = 32

// DecodeValues decodes the values inside a property's brackets, up to the
// closing tag num (not consumed), and returns them with the bytes
// consumed. Application values are decoded; primitive context values are
// kept as ContextValue; nested constructed values are flattened, since the
// adapter reads only primitive properties and lists of them.
func DecodeValues(b []byte, num uint8) ([]any, int, error) {
	var out []any
	off, depth := 0, 0
	for {
		t, n, err := DecodeTag(b[off:])
		if err != nil {
			return nil, 0, err
		}
		switch {
		case t.Closing && depth == 0:
			if t.Number != num {
				return nil, 0, fmt.Errorf("bacnet: closing tag %d inside value bracket %d", t.Number, num)
			}
			return out, off, nil
		case t.Closing:
			depth--
			off += n
		case t.Opening:
			depth++
			if depth > maxDepth {
				return nil, 0, errors.New("bacnet: values nested too deep")
			}
			off += n
		case t.Context:
			out = append(out, ContextValue{Tag: t.Number, Data: append([]byte(nil), b[off+n:off+n+t.Length]...)})
			off += n + t.Length
		default:
			v, m, err := DecodeApp(b[off:])
			if err != nil {
				return nil, 0, err
			}
			out = append(out, v)
			off += m
		}
	}
}
