package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
)

// allocatedBy returns the bytes f allocated on the heap, and f's result.
func allocatedBy(f func() error) (uint64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc, err
}

// deflateBomb returns a raw deflate stream of n MiB of zeros, about 1 KiB per
// MiB. Compressing 1 GiB would take seconds (minutes under -race); instead
// one flushed block is repeated: after the first, every 1 MiB block refers
// only to a window of zeros, so its bytes are the same each time.
func deflateBomb(t testing.TB, mib int) []byte {
	t.Helper()
	var buf bytes.Buffer
	fw, err := flate.NewWriter(&buf, flate.BestSpeed)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	var blocks [][]byte
	for range 3 {
		start := buf.Len()
		fw.Write(chunk)
		fw.Flush()
		blocks = append(blocks, bytes.Clone(buf.Bytes()[start:]))
	}
	if !bytes.Equal(blocks[1], blocks[2]) {
		t.Fatal("flushed blocks differ; the bomb construction needs revisiting")
	}
	start := buf.Len()
	fw.Close()
	tail := bytes.Clone(buf.Bytes()[start:])
	out := append([]byte(nil), blocks[0]...)
	for range mib - 1 {
		out = append(out, blocks[1]...)
	}
	return append(out, tail...)
}

func zlibWrap(raw []byte, adler uint32) []byte {
	out := append([]byte{0x78, 0x9c}, raw...)
	return binary.BigEndian.AppendUint32(out, adler)
}

func TestDeflateBomb(t *testing.T) {
	raw := deflateBomb(t, 1024) // inflates to 1 GiB
	const n = 1 << 30
	zl := zlibWrap(raw, uint32(n%65521)<<16|1) // Adler-32 of n zeros
	t.Logf("bomb: %d bytes → 1 GiB", len(raw))

	for name, payload := range map[string][]byte{"raw": raw, "zlib": zl} {
		t.Run(name, func(t *testing.T) {
			alloc, err := allocatedBy(func() error {
				_, err := Decode(payload, Limits{})
				return err
			})
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("err = %v, want ErrTooLarge", err)
			}
			// The cap is 4 MiB; buffer doubling costs about twice that.
			if alloc > 16<<20 {
				t.Errorf("allocated %d MiB for a 1 GiB bomb", alloc>>20)
			}
			t.Logf("allocated %.1f MiB", float64(alloc)/(1<<20))
		})
	}

	// A small bomb (1 KiB → 1 MiB) against a small limit.
	small := deflateBomb(t, 1)
	if len(small) > 2048 {
		t.Fatalf("small bomb is %d bytes", len(small))
	}
	_, err := Decode(small, Limits{MaxDecodedSize: 64 << 10})
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("small bomb: %v", err)
	}
	// The same bytes are fine when the limit allows them; they just are not
	// a payload.
	if _, err := Decode(small, Limits{}); !errors.Is(err, ErrMalformed) {
		t.Errorf("1 MiB of zeros: %v", err)
	}
}

func TestHugeClaimedLengths(t *testing.T) {
	ff := []byte{0xff, 0xff, 0xff, 0xff}
	cases := map[string][]byte{
		"array32":           append([]byte{0xdd}, ff...),
		"map32":             append([]byte{0xdf}, ff...),
		"str32 in array":    append([]byte{0x91, 0xdb}, ff...),
		"bin32 in array":    append([]byte{0x91, 0xc6}, ff...),
		"ext32 in array":    append(append([]byte{0x91, 0xc9}, ff...), 0xff),
		"array16":           {0xdc, 0xff, 0xff, 0xc0},
		"map16":             {0xde, 0xff, 0xff, 0xc0, 0xc0},
		"str32 key":         append([]byte{0x81, 0xdb}, ff...),
		"nested array32":    append([]byte{0x91, 0x91, 0xdd}, ff...),
		"fits remaining":    append([]byte{0xdd, 0, 0, 0, 8}, make([]byte, 7)...), // 8 claimed, 7 present
		"zlib-wrapped":      mustZlib(append([]byte{0xdd}, ff...)),
		"array32 limit":     append([]byte{0xdd, 0x00, 0x04, 0x00, 0x01}, make([]byte, 1<<18+1)...),
		"map32 claims 2^31": append([]byte{0xdf, 0x80, 0, 0, 0}, make([]byte, 64)...),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			alloc, err := allocatedBy(func() error {
				_, err := Decode(in, Limits{})
				return err
			})
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrTooLarge) {
				t.Errorf("err = %v", err)
			}
			if alloc > 64<<10 {
				t.Errorf("allocated %d bytes", alloc)
			}
		})
	}
	// Averaged over many calls, a refused header costs its error message and,
	// when sync.Pool misses (often, under -race), a fresh decoder: a few
	// kilobytes, against the 64 GiB that 2^32 slots would take.
	in := append([]byte{0xdd}, ff...)
	const runs = 1000
	alloc, _ := allocatedBy(func() error {
		for range runs {
			Decode(in, Limits{})
		}
		return nil
	})
	if per := alloc / runs; per > 64<<10 {
		t.Errorf("%d bytes allocated per refused huge header", per)
	}
}

func mustZlib(b []byte) []byte {
	out, err := appendDeflate(nil, b, flate.DefaultCompression, false)
	if err != nil {
		panic(err)
	}
	return out
}

func TestDeepNesting(t *testing.T) {
	deepJSON := func(n int) []byte {
		return []byte(strings.Repeat("[", n) + strings.Repeat("]", n))
	}
	deepMP := func(n int) []byte {
		return append(bytes.Repeat([]byte{0x91}, n), 0xc0)
	}
	for name, in := range map[string][]byte{
		"json 65":          deepJSON(65),
		"json 100k":        deepJSON(100000),
		"json unclosed 1M": []byte(strings.Repeat("[", 1<<20)),
		"json objects":     []byte(strings.Repeat(`{"a":`, 1000) + "1" + strings.Repeat("}", 1000)),
		"msgpack 65":       deepMP(65),
		"msgpack 4M":       deepMP(4<<20 - 1),
		"msgpack maps":     append(bytes.Repeat([]byte{0x81, 0xa1, 'a'}, 1000), 0xc0),
		"zlib json":        mustZlib(deepJSON(1 << 20)),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(in, Limits{}); !errors.Is(err, ErrTooDeep) {
				t.Errorf("err = %v, want ErrTooDeep", err)
			}
		})
	}
	if _, err := Decode(deepJSON(64), Limits{}); err != nil {
		t.Errorf("json at the limit: %v", err)
	}
	if _, err := Decode(deepMP(64), Limits{}); err != nil {
		t.Errorf("msgpack at the limit: %v", err)
	}
	if _, err := Decode(deepJSON(4), Limits{MaxDepth: 3}); !errors.Is(err, ErrTooDeep) {
		t.Errorf("MaxDepth 3: %v", err)
	}
	if _, err := Decode(deepMP(200), Limits{MaxDepth: 1 << 30}); err != nil {
		t.Errorf("huge MaxDepth: %v", err)
	}
}

func TestLimits(t *testing.T) {
	arr := func(n int) []byte { return []byte("[" + strings.TrimSuffix(strings.Repeat("0,", n), ",") + "]") }
	cases := []struct {
		name string
		in   []byte
		lim  Limits
		want error
	}{
		{"input size", arr(10), Limits{MaxInputSize: 10}, ErrTooLarge},
		{"decoded size", arr(10), Limits{MaxDecodedSize: 10}, ErrTooLarge},
		{"decoded size after inflate", mustZlib(arr(1000)), Limits{MaxDecodedSize: 100}, ErrTooLarge},
		{"values", arr(10), Limits{MaxValues: 10}, ErrTooLarge},
		{"json array len", arr(11), Limits{MaxContainerLen: 10}, ErrTooLarge},
		{"json object len", []byte(`{"a":1,"b":2,"c":3}`), Limits{MaxContainerLen: 2}, ErrTooLarge},
		{"msgpack array len", append([]byte{0x9b}, make([]byte, 11)...), Limits{MaxContainerLen: 10}, ErrTooLarge},
		{"msgpack map len", []byte{0x83, 1, 1, 2, 2, 3, 3}, Limits{MaxContainerLen: 2}, ErrTooLarge},
		{"msgpack values", append([]byte{0x9b}, make([]byte, 11)...), Limits{MaxValues: 11}, ErrTooLarge},
	}
	for _, c := range cases {
		if _, err := Decode(c.in, c.lim); !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	// The limits are inclusive.
	if _, err := Decode(arr(10), Limits{MaxValues: 11, MaxContainerLen: 10, MaxInputSize: 21, MaxDecodedSize: 21}); err != nil {
		t.Errorf("at the limits: %v", err)
	}
	if d := DefaultLimits(); (Limits{}).normalized() != d {
		t.Errorf("zero Limits normalize to %+v, want %+v", (Limits{}).normalized(), d)
	}
}

// TestTruncated cuts every golden payload and every encoder output short:
// no prefix is a payload.
func TestTruncated(t *testing.T) {
	payloads := map[string][]byte{}
	for name, path := range goldenPayloads(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		payloads[name] = b
	}
	v := loadValue(t, "py_heartbeat.expected.json")
	for _, f := range Formats() {
		for _, raw := range []bool{false, true} {
			payloads["encoded "+string(f)] = mustEncode(t, v, EncodeOptions{Format: f, Compact: raw, RawDeflate: raw})
		}
	}
	for name, b := range payloads {
		step := 1
		if len(b) > 2048 {
			step = len(b) / 500
		}
		for n := 0; n < len(b); n += step {
			if _, err := Decode(b[:n], Limits{}); err == nil {
				t.Errorf("%s cut to %d of %d bytes decoded", name, n, len(b))
			} else if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnsupported) && !errors.Is(err, ErrUnknownIndex) {
				t.Errorf("%s cut to %d: unexpected error class: %v", name, n, err)
			}
		}
	}
}

func TestGarbage(t *testing.T) {
	bad := []string{
		"", " ", "\n\t", "null", "42", `"str"`, "true", "{", "[", "}", "]", "{]", "[}", `{"a"}`, `{"a":}`,
		`{"a":1,}`, `[1,]`, `[01]`, `[1.]`, `[.5]`, `[1e]`, `[-]`, `[+1]`, `[NaN]`, `[Infinity]`, `[0x10]`,
		`["\x01"]`, `["\u12"]`, `["\q"]`, `["unterminated]`, `[tru]`, `[nul]`, `{"a":1}x`, `{"a":1}{}`,
		"[1e999]", "\xef\xbb\xbf{}", "x", "\x00", "\xc1", "\x91\xc1", "\x90\x90", "\x81\xc0\xc0",
		"\x81\xc3\x01", "\x81\xca\x00\x00\x00\x00\x01", "\x91\xd4\x05\x00", "\x91\xd6\xff\x00\x00\x00",
		"\x91\xd7\xff\xff\xff\xff\xff\xff\xff\xff\xff",                     // timestamp with nanoseconds ≥ 1e9
		"\x91\xc7\x03\xff\x00\x00\x00",                                     // 3-byte timestamp
		"\x78\x9c", "\x78\x9c\x03\x00", "\x78\x9c\x03\x00\x00\x00\x00\x01", // zlib: empty input, not a payload
		"\x78\xbb\x00\x00\x00\x00", // zlib header with FDICT
		"\x01\x00\x00\xff\xff",     // empty stored raw block
	}
	for _, s := range bad {
		if d, err := Decode([]byte(s), Limits{}); err == nil {
			t.Errorf("Decode(%q) = %v, want an error", s, d.Value)
		}
	}
	// Random bytes must never panic; most fail, some are tiny valid payloads.
	r := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 256)
	for i := range 20000 {
		n := r.IntN(len(buf))
		for j := range n {
			buf[j] = byte(r.Uint32())
		}
		if i%4 == 0 && n > 0 {
			buf[0] = 0x80 + byte(r.IntN(32)) // start like a MessagePack container
		}
		Decode(buf[:n], Limits{})
	}
}
