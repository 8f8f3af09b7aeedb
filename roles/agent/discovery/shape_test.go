package discovery

import (
	"reflect"
	"testing"
)

func TestSampleShape(t *testing.T) {
	for _, tc := range []struct {
		name, payload string
		want          Shape
	}{
		{"object", `{"temp":21.5,"ok":true,"id":"a","n":null,"xs":[1],"s":{"a":{"b":1}}}`, Shape{Format: "json", Type: "object", Size: 68,
			Fields: map[string]string{"temp": "number", "ok": "boolean", "id": "string", "n": "null", "xs": "array", "s.a.b": "number"}}},
		{"number", `42`, Shape{Format: "json", Type: "number", Size: 2}},
		{"text", `hello world`, Shape{Format: "text", Size: 11}},
		{"binary", "\x00\x01\xff", Shape{Format: "binary", Size: 3}},
		{"empty", ``, Shape{Format: "text", Size: 0}},
		{"deep", `{"a":{"b":{"c":{"d":{"e":1}}}}}`, Shape{Format: "json", Type: "object", Size: 31, Truncated: true,
			Fields: map[string]string{"a.b.c.d": "object"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SampleShape([]byte(tc.payload)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("SampleShape(%q) = %+v, want %+v", tc.payload, got, tc.want)
			}
		})
	}
}

// FuzzSampleShape: any payload gets a shape without panicking, within
// the field cap, and JSON objects are told apart from the rest.
func FuzzSampleShape(f *testing.F) {
	for _, s := range []string{`{"a":1}`, `[1,2]`, `"x"`, "\x00", `{"a":{"b":{"c":{"d":{"e":{}}}}}}`, ``, ` {"a" : [ ] } `} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := SampleShape(b)
		if len(s.Fields) > ShapeMaxFields {
			t.Fatalf("%d fields, cap %d", len(s.Fields), ShapeMaxFields)
		}
		switch s.Format {
		case "json", "text", "binary":
		default:
			t.Fatalf("format %q", s.Format)
		}
		if s.Fields != nil && s.Type != "object" {
			t.Fatalf("fields without an object: %+v", s)
		}
		if s.Size != len(b) {
			t.Fatalf("size %d of %d bytes", s.Size, len(b))
		}
	})
}
