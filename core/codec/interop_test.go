package codec

import (
	"testing"

	"github.com/shamaton/msgpack/v2"
)

// TestInteropShamaton checks MessagePack interop with a Go implementation in
// both directions (Python and Node are covered by the golden files).
func TestInteropShamaton(t *testing.T) {
	v := loadValue(t, "py_batch50.expected.json")
	want := mustJSON(t, v)

	ours := mustEncode(t, v, EncodeOptions{Format: FormatMsgpack})
	var theirs any
	if err := msgpack.Unmarshal(ours, &theirs); err != nil {
		t.Fatalf("shamaton cannot read our output: %v", err)
	}
	if got := mustJSON(t, normalizeShamaton(theirs)); got != want {
		t.Errorf("shamaton read something else:\n%.300s", got)
	}

	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b, Limits{})
	if err != nil {
		t.Fatalf("cannot read shamaton output: %v", err)
	}
	if got := mustJSON(t, d.Value); got != want {
		t.Errorf("read shamaton output as:\n%.300s", got)
	}
}

// normalizeShamaton turns shamaton's generic maps (map[any]any) into ours.
func normalizeShamaton(v any) any {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k.(string)] = normalizeShamaton(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = normalizeShamaton(e)
		}
	case int8:
		return int64(x)
	case int16:
		return int64(x)
	case int32:
		return int64(x)
	case uint8:
		return int64(x)
	case uint16:
		return int64(x)
	case uint32:
		return int64(x)
	case uint64:
		return x
	}
	return v
}
