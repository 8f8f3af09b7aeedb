package codec

import (
	"os"
	"path/filepath"
	"testing"
)

// loadValue decodes a JSON file into the package's value types.
func loadValue(t testing.TB, name string) any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		t.Fatal(err)
	}
	d, err := Decode(b, Limits{})
	if err != nil {
		t.Fatalf("decode %s: %v", name, err)
	}
	return d.Value
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := AppendJSON(nil, v)
	if err != nil {
		t.Fatalf("AppendJSON: %v", err)
	}
	return string(b)
}

func mustEncode(t testing.TB, v any, opts EncodeOptions) []byte {
	t.Helper()
	b, err := Encode(v, opts)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", opts, err)
	}
	return b
}
