package drift

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Flatten bounds: a frame comes from outside, so its nesting and its
// number of distinct paths are capped before they cost memory.
const (
	MaxDepth         = 32
	MaxFieldsPerItem = 10000
)

// Errors of Flatten for JSON that is valid but not flattened.
var (
	ErrNotContainer  = errors.New("drift: a frame must be a JSON object or array")
	ErrTooDeep       = fmt.Errorf("drift: a frame nests deeper than %d levels", MaxDepth)
	ErrTooManyFields = fmt.Errorf("drift: a frame has more than %d field paths", MaxFieldsPerItem)
)

// internMax bounds a flattener's table of path names: a source that
// invents keys makes it start over rather than grow.
const internMax = 4096

// Flatten turns one JSON frame into its fields, sorted by path: an
// object member is `parent.key`, an array's elements are `parent[]`, and
// every value below the root is a field, containers included, so
// `{"a":{"b":[1]}}` gives a (object), a.b (array) and a.b[] (number). The
// elements of an array share one path; its type is the first non-null
// element's. The root must be an object or an array and is not a field
// itself.
func Flatten(frame []byte) ([]Field, error) {
	return flattenInto(nil, frame)
}

// flatteners are reused, so a frame of known paths allocates nothing.
var flatteners = sync.Pool{New: func() any {
	return &flattener{seen: map[string]Type{}, intern: map[string]string{}}
}}

// flattenInto is Flatten appending to dst[:0].
//
// The frame is checked with json.Valid first, then walked by a scanner
// that may assume valid JSON: a quarter of the cost of json.Decoder's
// tokens, and no allocation per value.
func flattenInto(dst []Field, frame []byte) ([]Field, error) {
	if !json.Valid(frame) {
		var v json.RawMessage
		err := json.Unmarshal(frame, &v) // for the syntax error's message
		if err == nil {
			panic("BUG: drift: json.Valid and json.Unmarshal disagree")
		}
		return nil, fmt.Errorf("drift: flatten: %w", err)
	}
	f := flatteners.Get().(*flattener)
	defer f.release()
	f.b, f.i, f.path = frame, 0, f.path[:0]
	f.space()
	var err error
	switch f.b[f.i] {
	case '{':
		err = f.object(1)
	case '[':
		err = f.array(1)
	default:
		return nil, ErrNotContainer
	}
	if err != nil {
		return nil, err
	}
	dst = dst[:0]
	for p, t := range f.seen {
		dst = append(dst, Field{Path: p, Type: t})
	}
	slices.SortFunc(dst, func(a, b Field) int { return strings.Compare(a.Path, b.Path) })
	return dst, nil
}

// flattener walks one valid JSON frame. path is the path of the value
// being read.
type flattener struct {
	b      []byte
	i      int
	path   []byte
	seen   map[string]Type
	intern map[string]string
}

func (f *flattener) release() {
	f.b = nil
	clear(f.seen)
	if len(f.intern) > internMax {
		clear(f.intern)
	}
	flatteners.Put(f)
}

func (f *flattener) space() {
	for f.i < len(f.b) {
		switch f.b[f.i] {
		case ' ', '\t', '\n', '\r':
			f.i++
		default:
			return
		}
	}
}

// object reads an object at depth from its opening brace.
func (f *flattener) object(depth int) error {
	f.i++
	f.space()
	if f.b[f.i] == '}' {
		f.i++
		return nil
	}
	base := len(f.path)
	for {
		key := f.str()
		if base > 0 {
			f.path = append(f.path, '.')
		}
		f.appendKey(key)
		f.space()
		f.i++ // ':'
		f.space()
		if err := f.value(depth); err != nil {
			return err
		}
		f.path = f.path[:base]
		f.space()
		if f.b[f.i] == '}' {
			f.i++
			return nil
		}
		f.i++ // ','
		f.space()
	}
}

// array reads an array at depth from its opening bracket.
func (f *flattener) array(depth int) error {
	f.i++
	f.space()
	if f.b[f.i] == ']' {
		f.i++
		return nil
	}
	base := len(f.path)
	f.path = append(f.path, "[]"...)
	for {
		if err := f.value(depth); err != nil {
			return err
		}
		f.space()
		if f.b[f.i] == ']' {
			f.i++
			f.path = f.path[:base]
			return nil
		}
		f.i++ // ','
		f.space()
	}
}

// value reads one value at f.path, depth being its container's depth.
func (f *flattener) value(depth int) error {
	var t Type
	switch c := f.b[f.i]; c {
	case '{', '[':
		if depth >= MaxDepth {
			return ErrTooDeep
		}
		t = TypeArray
		if c == '{' {
			t = TypeObject
		}
	case '"':
		t = TypeString
	case 't', 'f':
		t = TypeBool
	case 'n':
		t = TypeNull
	default:
		t = TypeNumber
	}
	if err := f.record(t); err != nil {
		return err
	}
	switch t {
	case TypeObject:
		return f.object(depth + 1)
	case TypeArray:
		return f.array(depth + 1)
	case TypeString:
		f.str()
	case TypeBool, TypeNull, TypeNumber:
		for f.i < len(f.b) && !isDelim(f.b[f.i]) {
			f.i++
		}
	}
	return nil
}

func isDelim(c byte) bool {
	switch c {
	case ',', '}', ']', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// str reads a string from its opening quote and returns it quoted.
func (f *flattener) str() []byte {
	start := f.i
	f.i++
	for {
		switch f.b[f.i] {
		case '\\':
			f.i += 2
		case '"':
			f.i++
			return f.b[start:f.i]
		default:
			f.i++
		}
	}
}

// appendKey appends a quoted key to the path as json.Decoder decodes it:
// escapes resolved, invalid UTF-8 replaced.
func (f *flattener) appendKey(quoted []byte) {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		f.path = append(f.path, raw...)
		return
	}
	var k string
	if err := json.Unmarshal(quoted, &k); err != nil {
		panic("BUG: drift: a key of valid JSON does not decode: " + err.Error())
	}
	f.path = append(f.path, k...)
}

// record keeps a path's first type, except that a later non-null type
// replaces null, so [null, 1] is an array of numbers.
func (f *flattener) record(t Type) error {
	name, ok := f.intern[string(f.path)]
	if !ok {
		name = string(f.path)
		f.intern[name] = name
	}
	old, ok := f.seen[name]
	switch {
	case !ok:
		if len(f.seen) >= MaxFieldsPerItem {
			return ErrTooManyFields
		}
		f.seen[name] = t
	case old == TypeNull && t != TypeNull:
		f.seen[name] = t
	}
	return nil
}
