package codec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/klauspost/compress/flate"
)

// Format is a wire format an agent subscription can select; the names are the
// values of a subscription's "compression" field (docs/agent.md).
type Format string

// Wire formats.
const (
	FormatJSON           Format = "json"
	FormatMsgpack        Format = "msgpack"
	FormatJSONDeflate    Format = "json+deflate"
	FormatMsgpackDeflate Format = "msgpack+deflate"
)

// Formats lists every valid Format.
func Formats() []Format {
	return []Format{FormatJSON, FormatMsgpack, FormatJSONDeflate, FormatMsgpackDeflate}
}

// ParseFormat parses a format name as written in configuration.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats() {
		if s == string(f) {
			return f, nil
		}
	}
	return "", fmt.Errorf("%w: format %q (valid: %s)", ErrUnsupported, s, formatList())
}

func formatList() string {
	var names []string
	for _, f := range Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// Encoding returns the serialization f uses.
func (f Format) Encoding() Encoding {
	if f == FormatMsgpack || f == FormatMsgpackDeflate {
		return EncodingMsgpack
	}
	return EncodingJSON
}

// Deflated reports whether f compresses.
func (f Format) Deflated() bool { return f == FormatJSONDeflate || f == FormatMsgpackDeflate }

// EncodeOptions selects how Encode writes a payload. The zero value writes
// plain JSON.
type EncodeOptions struct {
	// Format is the wire format; empty means FormatJSON.
	Format Format
	// Compact replaces the dictionary's field names by their indices and
	// marks the payload with the top-level key "_kc" (see docs/codec.md).
	// The top-level value must then be an object.
	Compact bool
	// Level is the deflate level for the +deflate formats: 1 (fastest) to 9
	// (smallest) or flate.HuffmanOnly (-2); 0 and -1 mean the default level.
	Level int
	// RawDeflate writes a bare RFC 1951 stream instead of the default zlib
	// (RFC 1950) wrapper. zlib is the default because its checked header
	// makes detection unambiguous and its Adler-32 catches corruption, for 6
	// bytes; it is also what zlib.deflateSync and zlib.compress produce.
	RawDeflate bool
	// MaxDepth bounds nesting; 0 means DefaultMaxDepth. Encode refuses what
	// Decode with the same limit would refuse, and a map that contains itself
	// fails instead of overflowing the stack.
	MaxDepth int
}

// Encode encodes v as opts says. v must be an object or an array: a map with
// string keys, a slice, or any value encoding/json marshals to one (struct
// fields are then named by their json tags in every format). The output is
// deterministic: object keys are written in sorted order.
func Encode(v any, opts EncodeOptions) ([]byte, error) {
	// Encoding into a pooled buffer and copying once costs one exact-size
	// allocation, where appending to nil would grow the slice a dozen times.
	buf := getBuf()
	defer putBuf(buf)
	out, err := AppendEncode((*buf)[:0], v, opts)
	*buf = out
	if err != nil {
		return nil, err
	}
	return bytes.Clone(out), nil
}

// AppendEncode is Encode appending to dst, so a caller can reuse one buffer
// across messages. On error it returns dst unchanged.
func AppendEncode(dst []byte, v any, opts EncodeOptions) ([]byte, error) {
	if opts.Format == "" {
		opts.Format = FormatJSON
	}
	if _, err := ParseFormat(string(opts.Format)); err != nil {
		return dst, err
	}
	level := opts.Level
	if level == 0 {
		level = flate.DefaultCompression
	}
	if opts.Format.Deflated() {
		if err := validLevel(level); err != nil {
			return dst, err
		}
	}
	e := getEncoder(opts)
	defer putEncoder(e)

	v, err := topLevel(v, e.maxDepth)
	if err != nil {
		return dst, err
	}
	if opts.Compact {
		if _, ok := v.(map[string]any); !ok {
			if _, ok := v.(map[string]string); !ok {
				return dst, fmt.Errorf("%w: key compaction needs an object at the top level, got %T", ErrUnsupported, v)
			}
		}
	}

	if !opts.Format.Deflated() {
		out, err := e.value(dst, v, 0, true)
		if err != nil {
			return dst, err
		}
		return out, nil
	}
	buf := getBuf()
	defer putBuf(buf)
	raw, err := e.value((*buf)[:0], v, 0, true)
	*buf = raw
	if err != nil {
		return dst, err
	}
	out, err := appendDeflate(dst, raw, level, opts.RawDeflate)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// topLevel checks that v is an object or an array, converting values of
// other Go types through encoding/json to find out.
func topLevel(v any, maxDepth int) (any, error) {
	switch v.(type) {
	case map[string]any, []any, map[string]string, []map[string]any, []string, []float64, []int64, []int:
		return v, nil
	case nil, bool, string, []byte, json.Number, float32, float64,
		int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return nil, fmt.Errorf("%w: the top-level value must be an object or an array, got %T", ErrUnsupported, v)
	}
	g, err := toGeneric(v, maxDepth)
	if err != nil {
		return nil, err
	}
	switch g.(type) {
	case map[string]any, []any:
		return g, nil
	}
	return nil, fmt.Errorf("%w: the top-level value must be an object or an array, %T is not", ErrUnsupported, v)
}

// toGeneric converts a value of any other Go type through encoding/json, so
// that struct fields get the same names (their json tags) in every format.
func toGeneric(v any, maxDepth int) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %T: %v", ErrUnsupported, v, err)
	}
	d := getDecoder(Limits{
		MaxInputSize:    math.MaxInt,
		MaxDecodedSize:  math.MaxInt,
		MaxDepth:        maxDepth,
		MaxContainerLen: math.MaxInt,
		MaxValues:       math.MaxInt,
	})
	defer putDecoder(d)
	jd := jsonDecoder{valueDecoder: d, b: b}
	g, err := jd.value(false)
	if err != nil {
		return nil, fmt.Errorf("%T: %w", v, err)
	}
	return g, nil
}

// encoder writes values as JSON or MessagePack; one walker serves both so
// that the two formats cannot drift apart in what they accept.
type encoder struct {
	mp       bool
	compact  bool
	maxDepth int
	keys     []string // sort scratch, shared by all levels
}

var encoderPool = sync.Pool{New: func() any { return new(encoder) }}

func getEncoder(opts EncodeOptions) *encoder {
	e := encoderPool.Get().(*encoder)
	e.mp = opts.Format.Encoding() == EncodingMsgpack
	e.compact = opts.Compact
	e.maxDepth = opts.MaxDepth
	if e.maxDepth <= 0 {
		e.maxDepth = DefaultMaxDepth
	}
	e.maxDepth = min(e.maxDepth, maxDepthCeiling)
	return e
}

func putEncoder(e *encoder) {
	clear(e.keys[:cap(e.keys)]) // the pool must not keep callers' strings alive
	e.keys = e.keys[:0]
	encoderPool.Put(e)
}

func (e *encoder) value(dst []byte, v any, depth int, top bool) ([]byte, error) {
	switch x := v.(type) {
	case nil:
		return e.null(dst), nil
	case bool:
		return e.bool(dst, x), nil
	case string:
		return e.str(dst, x), nil
	case []byte:
		if x == nil {
			return e.null(dst), nil
		}
		return e.bin(dst, x), nil
	case int:
		return e.int(dst, int64(x)), nil
	case int8:
		return e.int(dst, int64(x)), nil
	case int16:
		return e.int(dst, int64(x)), nil
	case int32:
		return e.int(dst, int64(x)), nil
	case int64:
		return e.int(dst, x), nil
	case uint:
		return e.uint(dst, uint64(x)), nil
	case uint8:
		return e.uint(dst, uint64(x)), nil
	case uint16:
		return e.uint(dst, uint64(x)), nil
	case uint32:
		return e.uint(dst, uint64(x)), nil
	case uint64:
		return e.uint(dst, x), nil
	case float64:
		return e.float(dst, x, 64), nil
	case float32:
		return e.float(dst, float64(x), 32), nil
	case json.Number:
		n, err := parseNumber(x)
		if err != nil {
			return dst, err
		}
		return e.value(dst, n, depth, false)
	case map[string]any:
		return encodeMap(e, dst, x, depth, top)
	case map[string]string:
		return encodeMap(e, dst, x, depth, top)
	case []any:
		return encodeSlice(e, dst, x, depth)
	case []map[string]any:
		return encodeSlice(e, dst, x, depth)
	case []string:
		return encodeSlice(e, dst, x, depth)
	case []float64:
		return encodeSlice(e, dst, x, depth)
	case []int64:
		return encodeSlice(e, dst, x, depth)
	case []int:
		return encodeSlice(e, dst, x, depth)
	}
	g, err := toGeneric(v, e.maxDepth-depth)
	if err != nil {
		return dst, err
	}
	return e.value(dst, g, depth, top)
}

// parseNumber turns a json.Number into the value the decoder would produce
// for the same literal, so that it encodes canonically.
func parseNumber(n json.Number) (any, error) {
	d := jsonDecoder{valueDecoder: &valueDecoder{}, b: []byte(n)}
	if len(d.b) == 0 || !(d.b[0] == '-' || (d.b[0] >= '0' && d.b[0] <= '9')) {
		return nil, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupported, string(n))
	}
	v, err := d.number()
	if err != nil || d.p != len(d.b) {
		return nil, fmt.Errorf("%w: invalid json.Number %q", ErrUnsupported, string(n))
	}
	return v, nil
}

func (e *encoder) enter(depth int) error {
	if depth+1 > e.maxDepth {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, e.maxDepth)
	}
	return nil
}

func encodeSlice[T any](e *encoder, dst []byte, s []T, depth int) ([]byte, error) {
	if s == nil {
		return e.null(dst), nil
	}
	if err := e.enter(depth); err != nil {
		return dst, err
	}
	if e.mp {
		var err error
		if dst, err = appendMPHeader(dst, len(s), 0x90, 0xdc); err != nil {
			return dst, err
		}
	} else {
		dst = append(dst, '[')
	}
	for i, x := range s {
		if i > 0 && !e.mp {
			dst = append(dst, ',')
		}
		var err error
		if dst, err = e.value(dst, x, depth+1, false); err != nil {
			return dst, err
		}
	}
	if !e.mp {
		dst = append(dst, ']')
	}
	return dst, nil
}

func encodeMap[V any](e *encoder, dst []byte, m map[string]V, depth int, top bool) ([]byte, error) {
	if m == nil {
		return e.null(dst), nil
	}
	if err := e.enter(depth); err != nil {
		return dst, err
	}
	if top {
		// A top-level "_kc" would be read back as the compaction marker.
		if _, ok := m[markerKey]; ok {
			return dst, fmt.Errorf("%w: the top-level key %q is reserved for the key-compaction marker", ErrUnsupported, markerKey)
		}
	}
	marker := top && e.compact
	n := len(m)
	if marker {
		n++
	}
	if e.mp {
		var err error
		if dst, err = appendMPHeader(dst, n, 0x80, 0xde); err != nil {
			return dst, err
		}
	} else {
		dst = append(dst, '{')
	}
	if marker {
		dst = e.str(dst, markerKey)
		if !e.mp {
			dst = append(dst, ':')
		}
		dst = e.int(dst, DictVersion)
	}

	start := len(e.keys)
	for k := range m {
		e.keys = append(e.keys, k)
	}
	keys := e.keys[start:]
	slices.Sort(keys)
	for i, k := range keys {
		if !e.mp && (i > 0 || marker) {
			dst = append(dst, ',')
		}
		dst = e.key(dst, k)
		if !e.mp {
			dst = append(dst, ':')
		}
		var err error
		if dst, err = e.value(dst, m[k], depth+1, false); err != nil {
			return dst, err
		}
	}
	clear(e.keys[start:])
	e.keys = e.keys[:start]
	if !e.mp {
		dst = append(dst, '}')
	}
	return dst, nil
}

func (e *encoder) key(dst []byte, k string) []byte {
	if !e.mp {
		return e.appendJSONKey(dst, k)
	}
	if e.compact {
		if i, ok := dictIndex[k]; ok {
			return appendMPUint(dst, uint64(i))
		}
		if needsTilde(k) {
			return append(append(appendMPStringHeader(dst, len(k)+1), '~'), k...)
		}
	}
	return appendMPString(dst, k)
}

func (e *encoder) null(dst []byte) []byte {
	if e.mp {
		return append(dst, 0xc0)
	}
	return append(dst, "null"...)
}

func (e *encoder) bool(dst []byte, b bool) []byte {
	switch {
	case e.mp && b:
		return append(dst, 0xc3)
	case e.mp:
		return append(dst, 0xc2)
	case b:
		return append(dst, "true"...)
	}
	return append(dst, "false"...)
}

func (e *encoder) str(dst []byte, s string) []byte {
	if e.mp {
		return appendMPString(dst, s)
	}
	return appendJSONString(dst, s)
}

func (e *encoder) bin(dst []byte, b []byte) []byte {
	if e.mp {
		return appendMPBin(dst, b)
	}
	return appendJSONBytes(dst, b)
}

func (e *encoder) int(dst []byte, i int64) []byte {
	if e.mp {
		return appendMPInt(dst, i)
	}
	return strconvAppendInt(dst, i)
}

func (e *encoder) uint(dst []byte, u uint64) []byte {
	if e.mp {
		return appendMPUint(dst, u)
	}
	return strconvAppendUint(dst, u)
}

// float writes NaN and ±Inf as null in both formats: JSON cannot carry them,
// null is what a JavaScript agent publishes for them, and Decode maps them to
// nil, so the value is the same whichever format carried it.
func (e *encoder) float(dst []byte, f float64, bits int) []byte {
	if !e.mp {
		return appendJSONFloat(dst, f, bits)
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(dst, 0xc0)
	}
	if bits == 32 {
		return appendMPFloat32(dst, float32(f))
	}
	return appendMPFloat64(dst, f)
}
