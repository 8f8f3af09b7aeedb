package brokermon

import (
	"encoding/json"
	"math"
	"reflect"
	"testing"
)

func decodeAll(t testing.TB, docs ...string) []any {
	t.Helper()
	out := make([]any, len(docs))
	for i, d := range docs {
		if err := json.Unmarshal([]byte(d), &out[i]); err != nil {
			t.Fatalf("sample %d: %v", i, err)
		}
	}
	return out
}

func infer(t testing.TB, docs ...string) map[string]any {
	t.Helper()
	var s Schema
	for _, v := range decodeAll(t, docs...) {
		s.Add(v)
	}
	// Through JSON, as the API answers it.
	raw, err := json.Marshal(s.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func prop(doc map[string]any, path ...string) map[string]any {
	for _, p := range path {
		props, _ := doc["properties"].(map[string]any)
		doc, _ = props[p].(map[string]any)
	}
	return doc
}

func TestSchemaRequiredByFrequency(t *testing.T) {
	doc := infer(t,
		`{"a": 1, "b": "x", "c": true}`,
		`{"a": 7, "b": "long text"}`,
		`{"a": -3, "b": "yz", "c": false}`,
		`{"a": 2.5, "b": ""}`,
	)
	if got, want := doc["required"], []any{"a", "b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("required %v, want %v", got, want)
	}
	if doc["type"] != "object" || doc["x-samples"] != 4.0 {
		t.Errorf("root %v", doc)
	}
	a, b, c := prop(doc, "a"), prop(doc, "b"), prop(doc, "c")
	if a["type"] != "number" || a["minimum"] != -3.0 || a["maximum"] != 7.0 || a["x-presence"] != 1.0 {
		t.Errorf("a: %v", a)
	}
	if b["type"] != "string" || b["minLength"] != 0.0 || b["maxLength"] != 9.0 {
		t.Errorf("b: %v", b)
	}
	if c["type"] != "boolean" || c["x-presence"] != 0.5 {
		t.Errorf("c: %v", c)
	}
}

func TestSchemaShapes(t *testing.T) {
	for _, tt := range []struct {
		name string
		docs []string
		path []string
		want map[string]any
	}{
		{"integers stay integers", []string{`{"n": 1}`, `{"n": 4}`}, []string{"n"},
			map[string]any{"type": "integer", "minimum": 1.0, "maximum": 4.0, "x-presence": 1.0}},
		{"null and number", []string{`{"v": null}`, `{"v": 0.5}`}, []string{"v"},
			map[string]any{"type": []any{"null", "number"}, "minimum": 0.5, "maximum": 0.5, "x-presence": 1.0}},
		{"nested required is per parent", []string{`{"o": {"x": 1, "y": 1}}`, `{"o": {"x": 2}}`, `{}`}, []string{"o"},
			map[string]any{"type": "object", "required": []any{"x"}, "x-presence": 2.0 / 3,
				"properties": map[string]any{
					"x": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 2.0, "x-presence": 1.0},
					"y": map[string]any{"type": "integer", "minimum": 1.0, "maximum": 1.0, "x-presence": 0.5},
				}}},
		{"array items merged", []string{`{"l": [1, "a"]}`, `{"l": []}`}, []string{"l"},
			map[string]any{"type": "array", "x-presence": 1.0, "items": map[string]any{"type": []any{"integer", "string"},
				"minimum": 1.0, "maximum": 1.0, "minLength": 1.0, "maxLength": 1.0}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := prop(infer(t, tt.docs...), tt.path...); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestSchemaBounded(t *testing.T) {
	var s Schema
	for i := range 3 * maxShapes {
		s.Add(map[string]any{string(rune('a'+i%26)) + string(rune('0'+i/26)): i})
	}
	deep := any(1.0)
	for range 3 * maxSchemaDeep {
		deep = map[string]any{"d": deep}
	}
	s.Add(deep)
	if s.shapes > maxShapes {
		t.Errorf("%d nodes, bound %d", s.shapes, maxShapes)
	}
	doc := s.JSONSchema()
	if doc["x-truncated"] != true {
		t.Error("a schema cut short does not say so")
	}
	if _, err := json.Marshal(doc); err != nil {
		t.Error(err)
	}
}

func TestSchemaNonFinite(t *testing.T) {
	var s Schema
	s.Add(map[string]any{"x": math.NaN(), "y": math.Inf(1), "z": uint64(math.MaxUint64), "b": []byte("ab")})
	if _, err := json.Marshal(s.JSONSchema()); err != nil {
		t.Fatalf("a schema of NaN and infinities cannot be answered: %v", err)
	}
}
