package drift

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// flattenRef is the first Flatten, on json.Decoder tokens: the oracle
// FuzzFlatten holds the scanner to. It turns one JSON frame into its fields, sorted by path: an
// object member is `parent.key`, an array's elements are `parent[]`, and
// every value below the root is a field, containers included, so
// `{"a":{"b":[1]}}` gives a (object), a.b (array) and a.b[] (number). The
// elements of an array share one path; its type is the first non-null
// element's. The root must be an object or an array and is not a field
// itself.
func flattenRef(frame []byte) ([]Field, error) {
	dec := json.NewDecoder(bytes.NewReader(frame))
	dec.UseNumber()
	f := refFlattener{dec: dec, seen: map[string]Type{}}
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("drift: flatten: %w", err)
	}
	switch tok {
	case json.Delim('{'):
		err = f.object("", 1)
	case json.Delim('['):
		err = f.array("", 1)
	default:
		return nil, ErrNotContainer
	}
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("drift: flatten: data after the top-level value")
	}
	fields := make([]Field, 0, len(f.seen))
	for p, t := range f.seen {
		fields = append(fields, Field{Path: p, Type: t})
	}
	sort.Slice(fields, func(i, j int) bool { return fields[i].Path < fields[j].Path })
	return fields, nil
}

type refFlattener struct {
	dec  *json.Decoder
	seen map[string]Type
}

// object reads members up to the closing brace; the opening one is read.
func (f *refFlattener) object(path string, depth int) error {
	for f.dec.More() {
		tok, err := f.dec.Token()
		if err != nil {
			return fmt.Errorf("drift: flatten: %w", err)
		}
		key, ok := tok.(string)
		if !ok {
			panic(fmt.Sprintf("BUG: drift: json.Decoder gave an object key of type %T", tok))
		}
		child := key
		if path != "" {
			child = path + "." + key
		}
		if err := f.value(child, depth); err != nil {
			return err
		}
	}
	return f.closing()
}

// array reads elements up to the closing bracket; the opening one is read.
func (f *refFlattener) array(path string, depth int) error {
	for f.dec.More() {
		if err := f.value(path+"[]", depth); err != nil {
			return err
		}
	}
	return f.closing()
}

func (f *refFlattener) closing() error {
	if _, err := f.dec.Token(); err != nil {
		return fmt.Errorf("drift: flatten: %w", err)
	}
	return nil
}

// value reads one value at path, depth being its container's depth.
func (f *refFlattener) value(path string, depth int) error {
	tok, err := f.dec.Token()
	if err != nil {
		return fmt.Errorf("drift: flatten: %w", err)
	}
	var t Type
	switch v := tok.(type) {
	case json.Delim:
		if depth >= MaxDepth {
			return ErrTooDeep
		}
		if v == '{' {
			t = TypeObject
		} else {
			t = TypeArray
		}
	case json.Number:
		t = TypeNumber
	case string:
		t = TypeString
	case bool:
		t = TypeBool
	case nil:
		t = TypeNull
	default:
		return fmt.Errorf("drift: flatten: unexpected token %T", tok)
	}
	if err := f.record(path, t); err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		return f.object(path, depth+1)
	case json.Delim('['):
		return f.array(path, depth+1)
	}
	return nil
}

// record keeps a path's first type, except that a later non-null type
// replaces null, so [null, 1] is an array of numbers.
func (f *refFlattener) record(path string, t Type) error {
	old, ok := f.seen[path]
	if !ok {
		if len(f.seen) >= MaxFieldsPerItem {
			return ErrTooManyFields
		}
		f.seen[path] = t
		return nil
	}
	if old == TypeNull && t != TypeNull {
		f.seen[path] = t
	}
	return nil
}
