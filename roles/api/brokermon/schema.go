package brokermon

import (
	"math"
	"slices"
	"unicode/utf8"
)

// Bounds of one inferred schema: a topic whose payloads have more fields
// than this keeps the first ones seen and marks the schema truncated, so a
// publisher inventing keys cannot grow the API's memory.
const (
	maxShapes     = 256 // nodes (properties, array items) per topic schema
	maxSchemaDeep = 10  // nesting levels
)

// JSON Schema type bits.
const (
	tNull uint8 = 1 << iota
	tBoolean
	tInteger
	tNumber // a number with a fraction (or beyond int64)
	tString
	tArray
	tObject
)

var typeNames = []struct {
	bit  uint8
	name string
}{{tNull, "null"}, {tBoolean, "boolean"}, {tInteger, "integer"}, {tNumber, "number"}, {tString, "string"},
	{tArray, "array"}, {tObject, "object"}}

// shape is what the samples showed at one place in the payload.
type shape struct {
	seen     int64 // values observed here
	types    uint8
	hasRange bool
	min, max float64
	hasLen   bool
	minLen   int
	maxLen   int
	objects  int64 // times the value was an object: a property is required when its seen equals this
	props    map[string]*shape
	items    *shape
}

// Schema accumulates samples of one topic's payloads. It is not safe for
// concurrent use; the Sampler locks around it.
type Schema struct {
	root      shape
	samples   int64
	shapes    int
	truncated bool
}

// Add folds one decoded payload into the schema: JSON values as
// encoding/json or core/codec produce them (nil, bool, string, []byte,
// integers, floats, []any, map[string]any). Anything else counts as null.
func (s *Schema) Add(v any) {
	s.samples++
	s.add(&s.root, v, 0)
}

// Samples is how many payloads were added.
func (s *Schema) Samples() int64 { return s.samples }

func (s *Schema) add(sh *shape, v any, depth int) {
	sh.seen++
	switch x := v.(type) {
	case nil:
		sh.types |= tNull
	case bool:
		sh.types |= tBoolean
	case string:
		sh.types |= tString
		sh.length(utf8.RuneCountInString(x))
	case []byte:
		sh.types |= tString
		sh.length(len(x))
	case float64:
		sh.number(x)
	case float32:
		sh.number(float64(x))
	case int:
		sh.number(float64(x))
	case int8:
		sh.number(float64(x))
	case int16:
		sh.number(float64(x))
	case int32:
		sh.number(float64(x))
	case int64:
		sh.number(float64(x))
	case uint:
		sh.number(float64(x))
	case uint8:
		sh.number(float64(x))
	case uint16:
		sh.number(float64(x))
	case uint32:
		sh.number(float64(x))
	case uint64:
		sh.number(float64(x))
	case []any:
		sh.types |= tArray
		if depth >= maxSchemaDeep {
			s.truncated = true
			return
		}
		for _, e := range x {
			if sh.items == nil {
				if !s.grow() {
					return
				}
				sh.items = &shape{}
			}
			s.add(sh.items, e, depth+1)
		}
	case map[string]any:
		sh.types |= tObject
		sh.objects++
		if depth >= maxSchemaDeep {
			s.truncated = true
			return
		}
		for k, e := range x {
			p := sh.props[k]
			if p == nil {
				if !s.grow() {
					continue
				}
				if sh.props == nil {
					sh.props = make(map[string]*shape)
				}
				p = &shape{}
				sh.props[k] = p
			}
			s.add(p, e, depth+1)
		}
	default:
		sh.types |= tNull
	}
}

// grow takes one node of the schema's budget; false (and truncated) when
// it is spent.
func (s *Schema) grow() bool {
	if s.shapes >= maxShapes {
		s.truncated = true
		return false
	}
	s.shapes++
	return true
}

func (sh *shape) number(f float64) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		// Not JSON numbers; MessagePack can carry them.
		sh.types |= tNumber
		return
	}
	if f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		sh.types |= tInteger
	} else {
		sh.types |= tNumber
	}
	if !sh.hasRange {
		sh.min, sh.max, sh.hasRange = f, f, true
		return
	}
	sh.min, sh.max = min(sh.min, f), max(sh.max, f)
}

func (sh *shape) length(n int) {
	if !sh.hasLen {
		sh.minLen, sh.maxLen, sh.hasLen = n, n, true
		return
	}
	sh.minLen, sh.maxLen = min(sh.minLen, n), max(sh.maxLen, n)
}

// JSONSchema renders the schema as a JSON Schema (draft 2020-12) document
// with the sample count, and whether the bounds cut it short, as
// x-samples and x-truncated.
func (s *Schema) JSONSchema() map[string]any {
	doc := s.root.render()
	doc["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	doc["x-samples"] = s.samples
	if s.truncated {
		doc["x-truncated"] = true
	}
	return doc
}

func (sh *shape) render() map[string]any {
	out := map[string]any{}
	var types []string
	for _, t := range typeNames {
		// Integers among fractional numbers are numbers.
		if sh.types&t.bit != 0 && !(t.bit == tInteger && sh.types&tNumber != 0) {
			types = append(types, t.name)
		}
	}
	switch len(types) {
	case 0:
	case 1:
		out["type"] = types[0]
	default:
		out["type"] = types
	}
	if sh.hasRange {
		out["minimum"], out["maximum"] = sh.min, sh.max
	}
	if sh.hasLen {
		out["minLength"], out["maxLength"] = sh.minLen, sh.maxLen
	}
	if sh.items != nil {
		out["items"] = sh.items.render()
	}
	if sh.types&tObject != 0 {
		props := map[string]any{}
		required := []string{}
		for k, p := range sh.props {
			r := p.render()
			// How often the field came with its object: the reader tells
			// a field missing once in a thousand from a rare one.
			r["x-presence"] = float64(p.seen) / float64(sh.objects)
			props[k] = r
			if p.seen >= sh.objects {
				required = append(required, k)
			}
		}
		slices.Sort(required)
		out["properties"], out["required"] = props, required
	}
	return out
}
