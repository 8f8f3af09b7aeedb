package codec

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
)

// MessagePack writers; each picks the shortest form, as the reference
// encoders in other languages do, so payloads are byte-comparable with theirs.

func appendMPUint(dst []byte, u uint64) []byte {
	switch {
	case u <= 0x7f:
		return append(dst, byte(u))
	case u <= math.MaxUint8:
		return append(dst, 0xcc, byte(u))
	case u <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xcd), uint16(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, 0xce), uint32(u))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xcf), u)
}

func appendMPInt(dst []byte, i int64) []byte {
	switch {
	case i >= 0:
		return appendMPUint(dst, uint64(i))
	case i >= -32:
		return append(dst, byte(int8(i)))
	case i >= math.MinInt8:
		return append(dst, 0xd0, byte(int8(i)))
	case i >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(dst, 0xd1), uint16(int16(i)))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(dst, 0xd2), uint32(int32(i)))
	}
	return binary.BigEndian.AppendUint64(append(dst, 0xd3), uint64(i))
}

func appendMPFloat64(dst []byte, f float64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, 0xcb), math.Float64bits(f))
}

func appendMPFloat32(dst []byte, f float32) []byte {
	return binary.BigEndian.AppendUint32(append(dst, 0xca), math.Float32bits(f))
}

// appendMPString writes s as a str. Strings longer than 4 GiB cannot occur in
// a payload that passes the size limits, so the length is not checked here.
func appendMPString(dst []byte, s string) []byte {
	return append(appendMPStringHeader(dst, len(s)), s...)
}

func appendMPStringHeader(dst []byte, n int) []byte {
	switch {
	case n < 32:
		return append(dst, 0xa0|byte(n))
	case n <= math.MaxUint8:
		return append(dst, 0xd9, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, 0xda), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(dst, 0xdb), uint32(n))
}

func appendMPBin(dst []byte, b []byte) []byte {
	n := len(b)
	switch {
	case n <= math.MaxUint8:
		dst = append(dst, 0xc4, byte(n))
	case n <= math.MaxUint16:
		dst = binary.BigEndian.AppendUint16(append(dst, 0xc5), uint16(n))
	default:
		dst = binary.BigEndian.AppendUint32(append(dst, 0xc6), uint32(n))
	}
	return append(dst, b...)
}

// appendMPHeader writes an array (fix 0x90, 16-bit 0xdc) or map (fix 0x80,
// 16-bit 0xde) header; the 32-bit form is the 16-bit code plus one.
func appendMPHeader(dst []byte, n int, fix, code16 byte) ([]byte, error) {
	switch {
	case n < 16:
		return append(dst, fix|byte(n)), nil
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(dst, code16), uint16(n)), nil
	case uint64(n) <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(dst, code16+1), uint32(n)), nil
	}
	return dst, fmt.Errorf("%w: container of %d entries", ErrTooLarge, n)
}

func strconvAppendInt(dst []byte, i int64) []byte   { return strconv.AppendInt(dst, i, 10) }
func strconvAppendUint(dst []byte, u uint64) []byte { return strconv.AppendUint(dst, u, 10) }
