package codec

import (
	"bytes"
	"errors"
	"os"
	"testing"
)

func addDecodeSeeds(f *testing.F) {
	for _, path := range goldenPayloads(f) {
		b, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		if len(b) <= 16<<10 { // large seeds slow every fuzz iteration down
			f.Add(b)
		}
	}
	for _, s := range []string{
		`{"_kc":1,"5":"d","~7":1}`, `{"5":"d","_kc":1}`, `[1,2.5,"x",null,true,{"a":[]}]`,
		"\x82\xa3_kc\x01\x05\xa1d", "\xdd\xff\xff\xff\xff", "\x91\xd7\xff\x00\x00\x00\x00\x00\x00\x00\x01",
		"\x78\x9c\xab\xae\x05\x00\x01\x75\x00\xf9", "\x91\xca\x7f\xc0\x00\x00",
	} {
		f.Add([]byte(s))
	}
	v := map[string]any{"timestamp": "t", "value": 1.5, "tags": []any{map[string]any{"name": "n", "0": nil}}}
	for _, format := range Formats() {
		for _, compact := range []bool{false, true} {
			b, err := Encode(v, EncodeOptions{Format: format, Compact: compact, RawDeflate: compact})
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
}

// FuzzDecode: no input panics; every error has a class; every success is
// canonical JSON that encoding/json agrees with, and survives re-encoding in
// every format, compacted or not, unchanged.
func FuzzDecode(f *testing.F) {
	addDecodeSeeds(f)
	f.Fuzz(func(t *testing.T, in []byte) {
		d, err := Decode(in, Limits{})
		if err != nil {
			for _, class := range []error{ErrTooLarge, ErrTooDeep, ErrMalformed, ErrUnsupported, ErrUnknownIndex} {
				if errors.Is(err, class) {
					return
				}
			}
			t.Fatalf("error without a class: %v", err)
		}
		if d.Layers.Compacted != (d.Layers.DictVersion == DictVersion) {
			t.Fatalf("layers %+v", d.Layers)
		}
		canon, err := d.JSON()
		if err != nil {
			t.Fatalf("JSON: %v", err)
		}
		std, err := stdJSON(d.Value)
		if err != nil || !bytes.Equal(std, canon) {
			t.Fatalf("canonical JSON %s, encoding/json %s (%v)", canon, std, err)
		}
		_, isMap := d.Value.(map[string]any)
		for _, format := range Formats() {
			for _, compact := range []bool{false, true} {
				if compact && !isMap {
					continue
				}
				b, err := Encode(d.Value, EncodeOptions{Format: format, Compact: compact})
				if err != nil {
					t.Fatalf("re-encode %s compact=%v: %v", format, compact, err)
				}
				d2, err := Decode(b, Limits{MaxDecodedSize: 64 << 20, MaxInputSize: 64 << 20})
				if err != nil {
					t.Fatalf("decode re-encoded %s compact=%v: %v", format, compact, err)
				}
				again, _ := d2.JSON()
				if !bytes.Equal(again, canon) {
					t.Fatalf("%s compact=%v changed the value:\n%s\n%s", format, compact, canon, again)
				}
			}
		}
	})
}

// FuzzJSON holds the JSON decoder to encoding/json (see
// checkJSONDifferential).
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,-0,1e3,"\ud800"]}`, `[18446744073709551616]`, "[\"\xff\"]", `{"a":1,"a":2}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		checkJSONDifferential(t, in)
	})
}
