package modbus

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
)

// Type is the value type of a data point.
type Type uint8

// The supported value types.
const (
	Bool Type = iota + 1
	Int16
	Uint16
	Int32
	Uint32
	Float32
	Int64
	Uint64
	Float64
)

var typeNames = map[string]Type{
	"bool": Bool, "int16": Int16, "uint16": Uint16, "int32": Int32, "uint32": Uint32,
	"float32": Float32, "int64": Int64, "uint64": Uint64, "float64": Float64,
}

var typeStrings = [...]string{Bool: "bool", Int16: "int16", Uint16: "uint16", Int32: "int32", Uint32: "uint32",
	Float32: "float32", Int64: "int64", Uint64: "uint64", Float64: "float64"}

func (t Type) String() string {
	if int(t) < len(typeStrings) && typeStrings[t] != "" {
		return typeStrings[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// ParseType parses a type name, case insensitively.
func ParseType(s string) (Type, error) {
	if t, ok := typeNames[strings.ToLower(s)]; ok {
		return t, nil
	}
	return 0, fmt.Errorf("unknown type %q (want bool, int16, uint16, int32, uint32, float32, int64, uint64 or float64)", s)
}

// Words is how many 16-bit registers a value of the type occupies.
func (t Type) Words() int {
	switch t {
	case Int32, Uint32, Float32:
		return 2
	case Int64, Uint64, Float64:
		return 4
	}
	return 1
}

func (t Type) isInt() bool  { return t == Int16 || t == Int32 || t == Int64 }
func (t Type) isUint() bool { return t == Uint16 || t == Uint32 || t == Uint64 }

// layout is how the words of a value sit on the wire. Modbus itself only
// defines big-endian bytes inside one register; devices disagree about the
// order of the registers of a 32- or 64-bit value (and a few swap the
// bytes too), hence both knobs.
type layout struct {
	littleBytes bool
	littleWords bool
}

// toBig reorders the raw register bytes of one value into plain big-endian
// order, so that encoding/binary can read it.
func (l layout) toBig(raw []byte) []byte {
	b := make([]byte, len(raw))
	words := len(raw) / 2
	for i := range words {
		src := i
		if l.littleWords {
			src = words - 1 - i
		}
		hi, lo := raw[2*src], raw[2*src+1]
		if l.littleBytes {
			hi, lo = lo, hi
		}
		b[2*i], b[2*i+1] = hi, lo
	}
	return b
}

// fromBig is the inverse of toBig; both are their own inverse, but the
// name says which way the data flows.
func (l layout) fromBig(b []byte) []byte { return l.toBig(b) }

// decodeRegisters turns the registers of one value into its natural Go
// type: bool, int64, uint64 or float64. raw holds t.Words()*2 bytes.
func decodeRegisters(raw []byte, t Type, l layout) (any, error) {
	if len(raw) != 2*t.Words() {
		return nil, fmt.Errorf("%s needs %d bytes, got %d", t, 2*t.Words(), len(raw))
	}
	b := l.toBig(raw)
	switch t {
	case Bool:
		return binary.BigEndian.Uint16(b) != 0, nil
	case Int16:
		return int64(int16(binary.BigEndian.Uint16(b))), nil
	case Uint16:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case Int32:
		return int64(int32(binary.BigEndian.Uint32(b))), nil
	case Uint32:
		return uint64(binary.BigEndian.Uint32(b)), nil
	case Float32:
		return float64(math.Float32frombits(binary.BigEndian.Uint32(b))), nil
	case Int64:
		return int64(binary.BigEndian.Uint64(b)), nil
	case Uint64:
		return binary.BigEndian.Uint64(b), nil
	case Float64:
		return math.Float64frombits(binary.BigEndian.Uint64(b)), nil
	}
	return nil, fmt.Errorf("cannot decode %s", t)
}

// encodeRegisters is the inverse of decodeRegisters. v must already have
// been checked by checkValue: bool for Bool, int64 for the signed types,
// uint64 for the unsigned ones and float64 for the floats.
func encodeRegisters(v any, t Type, l layout) ([]byte, error) {
	b := make([]byte, 2*t.Words())
	switch t {
	case Bool:
		x, ok := v.(bool)
		if !ok {
			return nil, fmt.Errorf("bool wants a bool, got %T", v)
		}
		if x {
			binary.BigEndian.PutUint16(b, 1)
		}
	case Int16, Int32, Int64:
		x, ok := v.(int64)
		if !ok {
			return nil, fmt.Errorf("%s wants int64, got %T", t, v)
		}
		putUint(b, uint64(x))
	case Uint16, Uint32, Uint64:
		x, ok := v.(uint64)
		if !ok {
			return nil, fmt.Errorf("%s wants uint64, got %T", t, v)
		}
		putUint(b, x)
	case Float32:
		x, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("float32 wants float64, got %T", v)
		}
		binary.BigEndian.PutUint32(b, math.Float32bits(float32(x)))
	case Float64:
		x, ok := v.(float64)
		if !ok {
			return nil, fmt.Errorf("float64 wants float64, got %T", v)
		}
		binary.BigEndian.PutUint64(b, math.Float64bits(x))
	default:
		return nil, fmt.Errorf("cannot encode %s", t)
	}
	return l.fromBig(b), nil
}

// putUint writes the low len(b) bytes of x big-endian; the two's
// complement of a negative int64 truncates to the right int16 or int32.
func putUint(b []byte, x uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = byte(x)
		x >>= 8
	}
}

// bitAt reads bit i of a coil or discrete input response, which packs
// eight bits per byte starting with the least significant one.
func bitAt(b []byte, i int) (bool, error) {
	if i/8 >= len(b) {
		return false, fmt.Errorf("bit %d beyond the %d bytes of the response", i, len(b))
	}
	return b[i/8]&(1<<(i%8)) != 0, nil
}

// applyScale multiplies a decoded value by the data point's scale. A
// scaled value is always float64; an unscaled one keeps its natural type
// so that a uint64 counter is not rounded through a float.
func applyScale(v any, scale float64) any {
	if scale == 1 {
		return v
	}
	switch x := v.(type) {
	case int64:
		return float64(x) * scale
	case uint64:
		return float64(x) * scale
	case float64:
		return x * scale
	}
	return v
}
