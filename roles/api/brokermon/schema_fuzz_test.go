package brokermon

import (
	"encoding/json"
	"testing"
)

// FuzzSchema: any JSON payloads make a schema that renders as JSON, stays
// within its bounds, and requires only fields every object sample had.
func FuzzSchema(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":"x"}`, `[1,{"a":null},[[]]]`, `{"a":{"b":{"c":[1.5,true]}}}`, `"s"`, `null`, `{}`,
		`{"a":1e308,"b":-1e308,"c":18446744073709551615}`} {
		f.Add([]byte(s), []byte(`{"a":2}`))
	}
	f.Fuzz(func(t *testing.T, one, two []byte) {
		var s Schema
		for _, raw := range [][]byte{one, two, one} {
			var v any
			if json.Unmarshal(raw, &v) != nil {
				continue
			}
			s.Add(v)
		}
		if s.shapes > maxShapes {
			t.Fatalf("%d nodes, bound %d", s.shapes, maxShapes)
		}
		doc := s.JSONSchema()
		if _, err := json.Marshal(doc); err != nil {
			t.Fatalf("schema does not render: %v", err)
		}
		checkRequired(t, &s.root)
	})
}

func checkRequired(t *testing.T, sh *shape) {
	for k, p := range sh.props {
		if p.seen > sh.objects {
			t.Fatalf("field %q seen %d times in %d objects", k, p.seen, sh.objects)
		}
		checkRequired(t, p)
	}
	if sh.items != nil {
		checkRequired(t, sh.items)
	}
}
