package codec

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"testing"

	"github.com/shamaton/msgpack/v2"
)

// The typical batch: the agent's custom envelope with 50 readings, as the
// Python and Node generators build it. MB/s is measured on the wire bytes.
var benchCases = []struct {
	name string
	opts EncodeOptions
}{
	{"msgpack+deflate", EncodeOptions{Format: FormatMsgpackDeflate}},
	{"msgpack+deflate+compact", EncodeOptions{Format: FormatMsgpackDeflate, Compact: true}},
	{"msgpack", EncodeOptions{Format: FormatMsgpack}},
	{"json", EncodeOptions{Format: FormatJSON}},
	{"json+deflate", EncodeOptions{Format: FormatJSONDeflate}},
}

func BenchmarkDecode(b *testing.B) {
	v := loadValue(b, "py_batch50.expected.json")
	for _, c := range benchCases {
		payload := mustEncode(b, v, c.opts)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(payload, Limits{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	v := loadValue(b, "py_batch50.expected.json")
	for _, c := range benchCases {
		out := mustEncode(b, v, c.opts)
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Encode(v, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/append", func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			b.ReportAllocs()
			buf := make([]byte, 0, 2*len(out))
			for b.Loop() {
				var err error
				if buf, err = AppendEncode(buf[:0], v, c.opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkBaseline measures general-purpose decoders on the same batch, for
// context only: encoding/json into any (floats lose int64 precision), and
// the stdlib zlib reader allocated per message followed by shamaton/msgpack.
func BenchmarkBaseline(b *testing.B) {
	v := loadValue(b, "py_batch50.expected.json")
	js := mustEncode(b, v, EncodeOptions{Format: FormatJSON})
	b.Run("encoding-json-unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(js)))
		b.ReportAllocs()
		for b.Loop() {
			var out any
			if err := json.Unmarshal(js, &out); err != nil {
				b.Fatal(err)
			}
		}
	})
	mpz := mustEncode(b, v, EncodeOptions{Format: FormatMsgpackDeflate})
	b.Run("stdlib-zlib+shamaton-msgpack", func(b *testing.B) {
		b.SetBytes(int64(len(mpz)))
		b.ReportAllocs()
		var buf bytes.Buffer
		for b.Loop() {
			zr, err := zlib.NewReader(bytes.NewReader(mpz))
			if err != nil {
				b.Fatal(err)
			}
			buf.Reset()
			if _, err := buf.ReadFrom(zr); err != nil {
				b.Fatal(err)
			}
			var out any
			if err := msgpack.Unmarshal(buf.Bytes(), &out); err != nil {
				b.Fatal(err)
			}
		}
	})
}
