package events

import (
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// Change is one difference between two JSON documents, at Path, a JSON
// Pointer (RFC 6901). Op is added (To only), removed (From only) or
// changed.
type Change struct {
	Path string `json:"path"`
	Op   string `json:"op"`
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// Change operations.
const (
	OpAdded   = "added"
	OpRemoved = "removed"
	OpChanged = "changed"
)

// maxChanges bounds one comparison's answer; Diff says when it stopped.
const maxChanges = 1000

// Diff returns the changes that turn a into b, decoded JSON values, by
// path: objects member by member, arrays element by element (an element
// past the shorter one is added or removed), anything else as a whole.
// truncated is set when there were more than maxChanges.
func Diff(a, b any) (changes []Change, truncated bool) {
	changes = []Change{}
	diff("", a, b, &changes)
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].Path < changes[j].Path })
	if len(changes) > maxChanges {
		return changes[:maxChanges], true
	}
	return changes, false
}

func diff(path string, a, b any, out *[]Change) {
	if len(*out) > maxChanges {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for k, x := range av {
			p := path + "/" + escapePointer(k)
			if y, ok := bv[k]; ok {
				diff(p, x, y, out)
			} else {
				*out = append(*out, Change{Path: p, Op: OpRemoved, From: x})
			}
		}
		for k, y := range bv {
			if _, ok := av[k]; !ok {
				*out = append(*out, Change{Path: path + "/" + escapePointer(k), Op: OpAdded, To: y})
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < max(len(av), len(bv)); i++ {
			p := path + "/" + strconv.Itoa(i)
			switch {
			case i >= len(bv):
				*out = append(*out, Change{Path: p, Op: OpRemoved, From: av[i]})
			case i >= len(av):
				*out = append(*out, Change{Path: p, Op: OpAdded, To: bv[i]})
			default:
				diff(p, av[i], bv[i], out)
			}
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		if path == "" {
			path = "/"
		}
		*out = append(*out, Change{Path: path, Op: OpChanged, From: a, To: b})
	}
}

// escapePointer escapes a member name as a JSON Pointer token.
func escapePointer(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// String names a change in one line, for logs and tests.
func (c Change) String() string {
	switch c.Op {
	case OpAdded:
		return fmt.Sprintf("%s added %v", c.Path, c.To)
	case OpRemoved:
		return fmt.Sprintf("%s removed %v", c.Path, c.From)
	}
	return fmt.Sprintf("%s %v -> %v", c.Path, c.From, c.To)
}
