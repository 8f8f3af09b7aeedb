package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
)

// Tag query operators of POST /agents/query (docs/access.md, section Tag
// queries).
const (
	TagEq     = "eq"
	TagIn     = "in"
	TagExists = "exists"
	TagAbsent = "absent"
)

// maxTagInValues bounds the values of one "in" condition.
const maxTagInValues = 100

// TagCond is one condition of a tag query: tag Key compared by Op with
// Values (one for eq, one or more for in, none for exists and absent).
type TagCond struct {
	Key    string
	Op     string
	Values []string
}

// ParseTagQuery decodes the tags object of a query: per key, a string
// (equality; "*" means the tag exists with any value), an array of strings
// (the tag is one of them), or an object with one operator: {"eq": "v"},
// {"in": ["a", "b"]} or {"exists": true|false}. Every condition must hold.
// Conditions come back sorted by key.
func ParseTagQuery(tags map[string]json.RawMessage) ([]TagCond, error) {
	if len(tags) > maxTags {
		return nil, fmt.Errorf("%w: at most %d tag conditions, got %d", ErrInvalid, maxTags, len(tags))
	}
	conds := make([]TagCond, 0, len(tags))
	for k, raw := range tags {
		if k == "" || len(k) > maxTagBytes {
			return nil, fmt.Errorf("%w: tag keys in a query must be 1..%d bytes", ErrInvalid, maxTagBytes)
		}
		c, err := parseTagCond(k, bytes.TrimSpace(raw))
		if err != nil {
			return nil, fmt.Errorf("%w: tag %q: %v", ErrInvalid, clip(k), err)
		}
		conds = append(conds, c)
	}
	sort.Slice(conds, func(i, j int) bool { return conds[i].Key < conds[j].Key })
	return conds, nil
}

func parseTagCond(key string, raw []byte) (TagCond, error) {
	if len(raw) == 0 {
		return TagCond{}, fmt.Errorf("a condition is required")
	}
	switch raw[0] {
	case '"':
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return TagCond{}, err
		}
		if v == "*" {
			return TagCond{Key: key, Op: TagExists}, nil
		}
		return eqCond(key, v)
	case '[':
		return inCond(key, raw)
	case '{':
		var op map[string]json.RawMessage
		if err := json.Unmarshal(raw, &op); err != nil {
			return TagCond{}, err
		}
		if len(op) != 1 {
			return TagCond{}, fmt.Errorf(`want exactly one operator of "eq", "in", "exists", got %d`, len(op))
		}
		for name, arg := range op {
			switch name {
			case TagEq:
				var v string
				if err := json.Unmarshal(arg, &v); err != nil {
					return TagCond{}, fmt.Errorf("eq takes a string: %w", err)
				}
				return eqCond(key, v)
			case TagIn:
				return inCond(key, arg)
			case TagExists:
				var b bool
				if err := json.Unmarshal(arg, &b); err != nil {
					return TagCond{}, fmt.Errorf("exists takes true or false: %w", err)
				}
				if b {
					return TagCond{Key: key, Op: TagExists}, nil
				}
				return TagCond{Key: key, Op: TagAbsent}, nil
			}
			return TagCond{}, fmt.Errorf(`unknown operator %q (eq, in, exists)`, clip(name))
		}
	}
	return TagCond{}, fmt.Errorf("want a string, an array of strings or an operator object")
}

func eqCond(key, v string) (TagCond, error) {
	if len(v) > maxTagBytes {
		return TagCond{}, fmt.Errorf("value is longer than %d bytes", maxTagBytes)
	}
	return TagCond{Key: key, Op: TagEq, Values: []string{v}}, nil
}

func inCond(key string, raw []byte) (TagCond, error) {
	var vs []string
	if err := json.Unmarshal(raw, &vs); err != nil {
		return TagCond{}, fmt.Errorf("in takes an array of strings: %w", err)
	}
	if len(vs) == 0 || len(vs) > maxTagInValues {
		return TagCond{}, fmt.Errorf("in takes 1..%d values, got %d", maxTagInValues, len(vs))
	}
	for _, v := range vs {
		if len(v) > maxTagBytes {
			return TagCond{}, fmt.Errorf("value is longer than %d bytes", maxTagBytes)
		}
	}
	return TagCond{Key: key, Op: TagIn, Values: vs}, nil
}

// equalityQuery turns the plain form {key: value or "*"} into conditions.
func equalityQuery(want map[string]string) []TagCond {
	conds := make([]TagCond, 0, len(want))
	for k, v := range want {
		if v == "*" {
			conds = append(conds, TagCond{Key: k, Op: TagExists})
		} else {
			conds = append(conds, TagCond{Key: k, Op: TagEq, Values: []string{v}})
		}
	}
	return conds
}

// matchConds reports whether tags have satisfy every condition.
func matchConds(have map[string]string, conds []TagCond) bool {
	for _, c := range conds {
		v, ok := have[c.Key]
		switch c.Op {
		case TagExists:
			if !ok {
				return false
			}
		case TagAbsent:
			if ok {
				return false
			}
		case TagEq, TagIn:
			if !ok || !slices.Contains(c.Values, v) {
				return false
			}
		default:
			panic("BUG: tag condition with operator " + c.Op)
		}
	}
	return true
}
