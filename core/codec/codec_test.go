package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
)

func TestEncodeDecodeRoundTrip(t *testing.T) {
	values := map[string]any{
		"batch50":   loadValue(t, "py_batch50.expected.json"),
		"heartbeat": loadValue(t, "py_heartbeat.expected.json"),
		"ml":        loadValue(t, "py_ml.expected.json"),
		"escapes": map[string]any{
			"7seg": 1, "~t": 2, "~": 3, "": 4, "value": "v", "inner": map[string]any{"_kc": true, "~_kc": 1},
			"nested": []any{map[string]any{"0": "zero", "deviceName": "d", "-1": nil}},
		},
		"types": map[string]any{
			"i": int64(math.MinInt64), "u": uint64(math.MaxUint64), "f": 0.1, "negzero": math.Copysign(0, -1),
			"big": 1e300, "tiny": 5e-324, "s": "Grüße\u2028\x00\"\\", "b": []byte{0, 255}, "t": true, "n": nil,
			"empty": map[string]any{}, "arr": []any{}, "long": strings.Repeat("x", 70000),
			"many": make([]any, 70000),
		},
	}
	for name, v := range values {
		want := mustJSON(t, v)
		for _, f := range Formats() {
			for _, compact := range []bool{false, true} {
				opts := EncodeOptions{Format: f, Compact: compact}
				t.Run(fmt.Sprintf("%s/%s/compact=%v", name, f, compact), func(t *testing.T) {
					b := mustEncode(t, v, opts)
					d, err := Decode(b, Limits{})
					if err != nil {
						t.Fatalf("Decode: %v", err)
					}
					if got := mustJSON(t, d.Value); got != want {
						t.Fatalf("round trip differs\n got: %.300s\nwant: %.300s", got, want)
					}
					wantL := Layers{Encoding: f.Encoding(), Compacted: compact}
					if f.Deflated() {
						wantL.Deflate = DeflateZlib
					}
					if compact {
						wantL.DictVersion = DictVersion
					}
					if d.Layers != wantL {
						t.Errorf("layers = %+v, want %+v", d.Layers, wantL)
					}
					// Deterministic output: equal values, equal bytes.
					if again := mustEncode(t, v, opts); !bytes.Equal(again, b) {
						t.Error("two encodings of one value differ")
					}
				})
			}
		}
	}
}

func TestEncodeOptions(t *testing.T) {
	v := loadValue(t, "py_batch50.expected.json")
	want := mustJSON(t, v)
	for _, level := range []int{0, flate.HuffmanOnly, flate.DefaultCompression, 1, 5, 9} {
		for _, raw := range []bool{false, true} {
			opts := EncodeOptions{Format: FormatMsgpackDeflate, Level: level, RawDeflate: raw}
			b := mustEncode(t, v, opts)
			d, err := Decode(b, Limits{})
			if err != nil {
				t.Fatalf("%+v: %v", opts, err)
			}
			wantD := DeflateZlib
			if raw {
				wantD = DeflateRaw
			}
			if d.Layers.Deflate != wantD || mustJSON(t, d.Value) != want {
				t.Errorf("%+v: layers %v", opts, d.Layers)
			}
		}
	}
	// The zero value is plain JSON, equal to the canonical form.
	if got := string(mustEncode(t, v, EncodeOptions{})); got != want {
		t.Error("EncodeOptions{} is not canonical JSON")
	}
	// zlib header as zlib itself writes it for the default level.
	if b := mustEncode(t, v, EncodeOptions{Format: FormatJSONDeflate}); b[0] != 0x78 || b[1] != 0x9c {
		t.Errorf("zlib header % x, want 78 9c", b[:2])
	}
	// AppendEncode appends.
	b, err := AppendEncode([]byte("prefix"), v, EncodeOptions{Format: FormatMsgpack})
	if err != nil || !bytes.HasPrefix(b, []byte("prefix")) {
		t.Fatalf("AppendEncode: %v", err)
	}
	if d, err := Decode(b[len("prefix"):], Limits{}); err != nil || mustJSON(t, d.Value) != want {
		t.Fatalf("AppendEncode output: %v", err)
	}
}

func TestEncodeGoTypes(t *testing.T) {
	type reading struct {
		Device string   `json:"deviceName"`
		Value  *float64 `json:"value"`
		Skip   string   `json:"-"`
	}
	x := 21.5
	v := map[string]any{
		"readings": []reading{{"d1", &x, "s"}, {"d2", nil, ""}},
		"num":      json.Number("1.50"),
		"int":      json.Number("12345678901234567890"),
		"i8":       int8(-5), "u16": uint16(65535), "f32": float32(0.1),
		"strs": []string{"a"}, "nilslice": []any(nil), "nilmap": map[string]any(nil),
		"nan": math.NaN(), "inf": math.Inf(-1),
		"smap": map[string]string{"unit": "V"},
	}
	want := `{"f32":0.1,"i8":-5,"inf":null,"int":12345678901234567890,"nan":null,"nilmap":null,"nilslice":null,"num":1.5,` +
		`"readings":[{"deviceName":"d1","value":21.5},{"deviceName":"d2","value":null}],"smap":{"unit":"V"},"strs":["a"],"u16":65535}`
	for _, f := range Formats() {
		for _, compact := range []bool{false, true} {
			b := mustEncode(t, v, EncodeOptions{Format: f, Compact: compact})
			d, err := Decode(b, Limits{})
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			got := mustJSON(t, d.Value)
			if f.Encoding() == EncodingMsgpack {
				// float32 travels as float32 in MessagePack and widens on decode.
				want := strings.Replace(want, `"f32":0.1`, `"f32":0.10000000149011612`, 1)
				if got != want {
					t.Errorf("%s compact=%v:\n got %s\nwant %s", f, compact, got, want)
				}
			} else if got != want {
				t.Errorf("%s compact=%v:\n got %s\nwant %s", f, compact, got, want)
			}
		}
	}
	// A struct at the top level goes through encoding/json.
	b := mustEncode(t, reading{"d", &x, ""}, EncodeOptions{Format: FormatMsgpack, Compact: true})
	if d, err := Decode(b, Limits{}); err != nil || mustJSON(t, d.Value) != `{"deviceName":"d","value":21.5}` {
		t.Errorf("struct: %v %v", d.Value, err)
	}
}

func TestEncodeErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["self"] = cyclic
	deep := any("leaf")
	for range 65 {
		deep = []any{deep}
	}
	cases := []struct {
		name string
		v    any
		opts EncodeOptions
		want error
	}{
		{"scalar", 42, EncodeOptions{}, ErrUnsupported},
		{"string", "s", EncodeOptions{Format: FormatMsgpack}, ErrUnsupported},
		{"nil", nil, EncodeOptions{}, ErrUnsupported},
		{"struct marshalling to a string", json.Number("1"), EncodeOptions{}, ErrUnsupported},
		{"reserved marker", map[string]any{"_kc": 1}, EncodeOptions{}, ErrUnsupported},
		{"reserved marker compact", map[string]any{"_kc": 1}, EncodeOptions{Compact: true}, ErrUnsupported},
		{"compact array", []any{1}, EncodeOptions{Compact: true}, ErrUnsupported},
		{"bad format", map[string]any{}, EncodeOptions{Format: "gzip"}, ErrUnsupported},
		{"bad level", map[string]any{}, EncodeOptions{Format: FormatJSONDeflate, Level: 12}, ErrUnsupported},
		{"cycle", cyclic, EncodeOptions{}, ErrTooDeep},
		{"too deep", []any{deep}, EncodeOptions{Format: FormatMsgpack}, ErrTooDeep},
		{"unmarshalable", map[string]any{"c": make(chan int)}, EncodeOptions{}, ErrUnsupported},
		{"bad json.Number", map[string]any{"n": json.Number("0x1")}, EncodeOptions{}, ErrUnsupported},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := AppendEncode([]byte("keep"), c.v, c.opts)
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			if string(b) != "keep" {
				t.Errorf("dst changed on error: %q", b)
			}
		})
	}
	// Exactly the limit is fine.
	deep = any("leaf")
	for range 63 {
		deep = []any{deep}
	}
	if _, err := Encode(deep, EncodeOptions{}); err != nil {
		t.Errorf("64 levels: %v", err)
	}
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		if got, err := ParseFormat(string(f)); err != nil || got != f {
			t.Errorf("ParseFormat(%q) = %q, %v", f, got, err)
		}
	}
	for _, s := range []string{"", "JSON", "msgpack+gzip", " json", "deflate"} {
		_, err := ParseFormat(s)
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "json, msgpack, json+deflate, msgpack+deflate") {
			t.Errorf("ParseFormat(%q) err = %v", s, err)
		}
	}
}

func TestLayersString(t *testing.T) {
	cases := map[string]Layers{
		"json":               {Encoding: EncodingJSON},
		"raw-deflate → json": {Deflate: DeflateRaw, Encoding: EncodingJSON},
		"zlib-deflate → msgpack → key-compaction v1": {Deflate: DeflateZlib, Encoding: EncodingMsgpack, Compacted: true, DictVersion: 1},
	}
	for want, l := range cases {
		if got := l.String(); got != want {
			t.Errorf("%+v: %q, want %q", l, got, want)
		}
	}
}

// TestDetection covers the layer rules of docs/codec.md on hand-made bytes.
func TestDetection(t *testing.T) {
	rawOf := func(s string, level int) []byte {
		b, err := appendDeflate(nil, []byte(s), level, true)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name  string
		in    []byte
		want  string // canonical JSON
		layer Layers
	}{
		{"json with whitespace", []byte(" \r\n\t{\"a\":1} \n"), `{"a":1}`, Layers{Encoding: EncodingJSON}},
		{"json array", []byte(`[1,"x"]`), `[1,"x"]`, Layers{Encoding: EncodingJSON}},
		{"msgpack fixmap", []byte{0x81, 0xa1, 'a', 0x01}, `{"a":1}`, Layers{Encoding: EncodingMsgpack}},
		{"msgpack empty array", []byte{0x90}, `[]`, Layers{Encoding: EncodingMsgpack}},
		{"msgpack non-minimal array32 and str32", []byte{0xdd, 0, 0, 0, 1, 0xdb, 0, 0, 0, 1, 'x'}, `["x"]`, Layers{Encoding: EncodingMsgpack}},
		{"msgpack map32 with int keys", []byte{0xdf, 0, 0, 0, 2, 0x05, 0xc3, 0xd0, 0xfb, 0xc2}, `{"-5":false,"5":true}`, Layers{Encoding: EncodingMsgpack}},
		{"raw deflate", rawOf(`{"a":1}`, 9), `{"a":1}`, Layers{Deflate: DeflateRaw, Encoding: EncodingJSON}},
	}
	// Raw deflate streams that start like a MessagePack map or array, found
	// by trying inputs: a JSON array in a fixed-Huffman block starts with
	// 0x8a or 0x8b (a fixmap), depending on whether the block is final.
	seen := map[byte]bool{}
	for i := 0; i < 3000 && len(seen) < 3; i++ {
		v := []any{int64(i), strings.Repeat("ab", i%50), strings.Repeat("xyz", i%97)}
		b := rawOf(mustJSON(t, v), 1+i%9)
		if !isMsgpackContainer(b[0]) || seen[b[0]] {
			continue
		}
		seen[b[0]] = true
		cases = append(cases, struct {
			name  string
			in    []byte
			want  string
			layer Layers
		}{fmt.Sprintf("raw deflate starting with 0x%02x", b[0]), b, mustJSON(t, v), Layers{Deflate: DeflateRaw, Encoding: EncodingJSON}})
	}
	if len(seen) == 0 {
		t.Fatalf("found raw streams starting with %v only", seen)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Decode(c.in, Limits{})
			if err != nil {
				t.Fatalf("Decode(% x): %v", c.in[:min(len(c.in), 16)], err)
			}
			if got := mustJSON(t, d.Value); got != c.want {
				t.Errorf("got %s, want %s", got, c.want)
			}
			if d.Layers != c.layer {
				t.Errorf("layers %+v, want %+v", d.Layers, c.layer)
			}
		})
	}
}

func TestCompaction(t *testing.T) {
	want := `{"7seg":2,"deviceName":"d","metric":"m","value":1}`
	cases := []struct {
		name string
		in   string
		err  error
	}{
		{"marker first", `{"_kc":1,"5":"d","7":"m","8":1,"~7seg":2}`, nil},
		{"marker last", `{"5":"d","7":"m","8":1,"~7seg":2,"_kc":1}`, nil},
		{"marker middle", `{"5":"d","_kc":1,"7":"m","8":1,"~7seg":2}`, nil},
		{"names mixed with indices", `{"_kc":1,"deviceName":"d","7":"m","value":1,"~7seg":2}`, nil},
		{"unknown index", `{"_kc":1,"45":1}`, ErrUnknownIndex},
		{"unknown index, marker last", `{"45":1,"_kc":1}`, ErrUnknownIndex},
		{"non-canonical index", `{"_kc":1,"05":1}`, ErrMalformed},
		{"non-canonical index, marker last", `{"05":1,"_kc":1}`, ErrMalformed},
		{"unknown version", `{"_kc":2,"5":1}`, ErrUnsupported},
		{"version 0", `{"_kc":0}`, ErrUnsupported},
		{"version not an integer", `{"_kc":"1"}`, ErrMalformed},
		{"version float", `{"_kc":1.5}`, ErrMalformed},
		{"version null late", `{"a":1,"_kc":null}`, ErrMalformed},
		{"two markers", `{"_kc":1,"_kc":1}`, ErrMalformed},
		{"two markers late", `{"a":1,"_kc":1,"_kc":1}`, ErrMalformed},
		{"collision", `{"_kc":1,"5":"d","deviceName":"e"}`, ErrMalformed},
		{"collision late", `{"5":"d","deviceName":"e","_kc":1}`, ErrMalformed},
		{"escaped marker", `{"_kc":1,"~_kc":1}`, ErrMalformed},
		{"escaped marker late", `{"~_kc":1,"_kc":1}`, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, format := range []string{"json", "msgpack"} {
				in := []byte(c.in)
				if format == "msgpack" {
					in = jsonToMsgpackOrdered(t, c.in)
				}
				d, err := Decode(in, Limits{})
				if c.err != nil {
					if !errors.Is(err, c.err) {
						t.Errorf("%s: err = %v, want %v", format, err, c.err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", format, err)
				}
				if got := mustJSON(t, d.Value); got != want || !d.Layers.Compacted || d.Layers.DictVersion != 1 {
					t.Errorf("%s: %s %+v", format, got, d.Layers)
				}
			}
		})
	}
	// Nested "_kc" keys are ordinary; integer keys are indices in MessagePack.
	in := []byte{0x82, 0xa3, '_', 'k', 'c', 0x01, 0x03, 0x91, 0x82, 0xa3, '_', 'k', 'c', 0xc3, 0x08, 0xff}
	d, err := Decode(in, Limits{})
	if err != nil || mustJSON(t, d.Value) != `{"messages":[{"_kc":true,"value":-1}]}` {
		t.Errorf("nested: %v %v", d.Value, err)
	}
	// A negative integer key is literal, whichever way round.
	in = []byte{0x82, 0xa3, '_', 'k', 'c', 0x01, 0xff, 0xc0}
	if d, err := Decode(in, Limits{}); err != nil || mustJSON(t, d.Value) != `{"-1":null}` {
		t.Errorf("negative key: %v %v", d.Value, err)
	}
	// An uncompacted payload keeps digit keys as they are.
	if d, err := Decode([]byte(`{"5":1,"~x":2}`), Limits{}); err != nil || mustJSON(t, d.Value) != `{"5":1,"~x":2}` || d.Layers.Compacted {
		t.Errorf("uncompacted: %v %v", d.Value, err)
	}
}

// jsonToMsgpackOrdered converts a flat-ish JSON object to MessagePack keeping
// key order and duplicates (which Encode would not), for compaction tests.
func jsonToMsgpackOrdered(t *testing.T, s string) []byte {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var out []byte
	var n int
	var body []byte
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("want object: %v", err)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		body = appendMPString(body, tok.(string))
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if num, ok := v.(json.Number); ok {
			x, err := parseNumber(num)
			if err != nil {
				t.Fatal(err)
			}
			v = x
		}
		e := getEncoder(EncodeOptions{Format: FormatMsgpack})
		body, err = e.value(body, v, 1, false)
		putEncoder(e)
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	out, _ = appendMPHeader(out, n, 0x80, 0xde)
	return append(out, body...)
}

func TestDuplicateKeys(t *testing.T) {
	for _, in := range [][]byte{
		[]byte(`{"msgId":"a","msgId":"b"}`),
		[]byte(`{"a":{"x":1,"x":1}}`),
		[]byte(`{"\u0061":1,"a":2}`),
		{0x82, 0xa1, 'a', 0x01, 0xa1, 'a', 0x02},
		{0x82, 0x01, 0x01, 0xa1, '1', 0x02},        // int key 1 and string key "1"
		{0x82, 0xa1, 0xff, 0x01, 0xa1, 0xfe, 0x02}, // both become U+FFFD
	} {
		if _, err := Decode(in, Limits{}); !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "duplicate") {
			t.Errorf("Decode(%q) err = %v", in, err)
		}
	}
}

func TestDecodeValueTypes(t *testing.T) {
	d, err := Decode([]byte(`{"i":-12,"u":18446744073709551615,"big":1e400000000000000000000,"f":1.0,"e":1E2,"z":-0,"s":"\ud83c\udf21\ud800x"}`), Limits{})
	if !errors.Is(err, ErrMalformed) {
		t.Fatalf("1e4e20: %v", err)
	}
	d, err = Decode([]byte(`{"i":-12,"u":18446744073709551615,"huge":123456789012345678901234,"f":1.0,"e":1E2,"z":-0,"s":"\ud83c\udf21\ud800x"}`), Limits{})
	if err != nil {
		t.Fatal(err)
	}
	m := d.Value.(map[string]any)
	checks := map[string]any{
		"i": int64(-12), "u": uint64(math.MaxUint64), "huge": 1.2345678901234568e+23,
		"f": 1.0, "e": 100.0, "s": "🌡\ufffdx",
	}
	for k, want := range checks {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	if z, ok := m["z"].(float64); !ok || !math.Signbit(z) {
		t.Errorf("-0 = %#v", m["z"])
	}
}

func TestDecodedJSON(t *testing.T) {
	d, err := Decode([]byte{0x81, 0xa1, 'b', 0xc4, 0x02, 0x00, 0xff}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	j, err := d.JSON()
	if err != nil || string(j) != `{"b":"AP8="}` {
		t.Errorf("JSON() = %s, %v", j, err)
	}
}
