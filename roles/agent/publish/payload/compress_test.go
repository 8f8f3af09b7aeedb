package payload

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/edgeplat/edgeplat/core/codec"
)

// docOfSize returns a document whose encoding in base is exactly n bytes.
func docOfSize(t *testing.T, base codec.Format, n int) map[string]any {
	t.Helper()
	doc := map[string]any{"pad": ""}
	b, err := codec.Encode(doc, codec.EncodeOptions{Format: base})
	if err != nil {
		t.Fatal(err)
	}
	pad := n - len(b)
	// A longer string header in MessagePack past 31 and 255 bytes.
	for k := 0; k < 4; k++ {
		doc["pad"] = strings.Repeat("a", pad)
		b, _ = codec.Encode(doc, codec.EncodeOptions{Format: base})
		if len(b) == n {
			return doc
		}
		pad -= len(b) - n
	}
	t.Fatalf("cannot pad a %s document to %d bytes (got %d)", base, n, len(b))
	return nil
}

// TestCompressorRule covers the compression rule: deflate only above 4 KB
// and below 70 % CPU.
func TestCompressorRule(t *testing.T) {
	cases := []struct {
		setting codec.Format
		size    int
		cpu     float64
		want    codec.Format
	}{
		{codec.FormatJSONDeflate, DeflateMinBytes + 1, 10, codec.FormatJSONDeflate},
		{codec.FormatJSONDeflate, DeflateMinBytes, 10, codec.FormatJSON},
		{codec.FormatJSONDeflate, 100, 0, codec.FormatJSON},
		{codec.FormatJSONDeflate, DeflateMinBytes + 1, 69.9, codec.FormatJSONDeflate},
		{codec.FormatJSONDeflate, DeflateMinBytes + 1, 70, codec.FormatJSON},
		{codec.FormatJSONDeflate, 10 * DeflateMinBytes, 99, codec.FormatJSON},
		{codec.FormatMsgpackDeflate, DeflateMinBytes + 1, 10, codec.FormatMsgpackDeflate},
		{codec.FormatMsgpackDeflate, DeflateMinBytes, 10, codec.FormatMsgpack},
		{codec.FormatMsgpackDeflate, DeflateMinBytes + 1, 70, codec.FormatMsgpack},
		{codec.FormatMsgpack, 10 * DeflateMinBytes, 0, codec.FormatMsgpack},
		{codec.FormatJSON, 10 * DeflateMinBytes, 0, codec.FormatJSON},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%s/%dB/cpu%.1f", c.setting, c.size, c.cpu), func(t *testing.T) {
			base := codec.FormatJSON
			if c.setting.Encoding() == codec.EncodingMsgpack {
				base = codec.FormatMsgpack
			}
			doc := docOfSize(t, base, c.size)
			calls := 0
			comp, err := NewCompressor(c.setting, func() float64 { calls++; return c.cpu })
			if err != nil {
				t.Fatal(err)
			}
			out, used, err := comp.Encode(doc)
			if err != nil {
				t.Fatal(err)
			}
			if used != c.want {
				t.Fatalf("used %s, want %s", used, c.want)
			}
			d, err := codec.Decode(out, codec.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			if d.Layers.Encoding != used.Encoding() || (d.Layers.Deflate != "") != used.Deflated() {
				t.Errorf("bytes are %v, Encode said %s", d.Layers, used)
			}
			if !used.Deflated() && len(out) != c.size && c.setting.Deflated() {
				t.Errorf("uncompressed payload %d bytes, want %d", len(out), c.size)
			}
			// CPU is asked only when the size already calls for deflate.
			if !c.setting.Deflated() || c.size <= DeflateMinBytes {
				if calls != 0 {
					t.Errorf("CPU read %d times for a payload that is not compressed anyway", calls)
				}
			}
		})
	}
	// No CPU source: size alone decides.
	comp, err := NewCompressor(codec.FormatJSONDeflate, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, used, _ := comp.Encode(docOfSize(t, codec.FormatJSON, 5000)); used != codec.FormatJSONDeflate {
		t.Errorf("nil CPU source: used %s", used)
	}
}

// TestCompressorRawEvery1000 checks that the 1000th, 2000th... publish is
// plain JSON whatever the setting and size. Deflating thousands of payloads
// is slow under -race, so CPU reads as busy (no deflate) except around the
// 1000th publishes, where it is idle and the size calls for deflate.
func TestCompressorRawEvery1000(t *testing.T) {
	for _, setting := range codec.Formats() {
		t.Run(string(setting), func(t *testing.T) {
			cpu := 99.0
			comp, err := NewCompressor(setting, func() float64 { return cpu })
			if err != nil {
				t.Fatal(err)
			}
			base := codec.FormatJSON
			if setting.Encoding() == codec.EncodingMsgpack {
				base = codec.FormatMsgpack
			}
			doc := docOfSize(t, base, DeflateMinBytes+1)
			for i := 1; i <= 2*RawJSONEvery+1; i++ {
				want := base
				cpu = 99
				if r := i % RawJSONEvery; r == 0 || r == 1 || r == RawJSONEvery-1 {
					cpu, want = 0, setting
				}
				if i%RawJSONEvery == 0 {
					want = codec.FormatJSON
				}
				out, used, err := comp.Encode(doc)
				if err != nil {
					t.Fatal(err)
				}
				if used != want {
					t.Fatalf("publish %d used %s, want %s", i, used, want)
				}
				if used == codec.FormatJSON && out[0] != '{' {
					t.Fatalf("publish %d is not raw JSON: % x", i, out[:4])
				}
			}
			if comp.Publishes() != 2*RawJSONEvery+1 {
				t.Errorf("Publishes() = %d", comp.Publishes())
			}
		})
	}
}

// TestCompressorConcurrent runs publishes from many goroutines (under
// -race) and checks that exactly one in RawJSONEvery was raw JSON.
func TestCompressorConcurrent(t *testing.T) {
	var cpu atomic.Uint64
	comp, err := NewCompressor(codec.FormatMsgpackDeflate, func() float64 { return math.Float64frombits(cpu.Load()) })
	if err != nil {
		t.Fatal(err)
	}
	doc := docOfSize(t, codec.FormatMsgpack, 5000)
	const workers, each = 8, 125
	var raw atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				cpu.Store(math.Float64bits(float64((w + i) % 100)))
				_, used, err := comp.Encode(doc)
				if err != nil {
					t.Error(err)
					return
				}
				if used == codec.FormatJSON {
					raw.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if want := int64(workers * each / RawJSONEvery); raw.Load() != want {
		t.Errorf("%d raw JSON publishes of %d, want %d", raw.Load(), workers*each, want)
	}
}

func TestCompressorEncodeError(t *testing.T) {
	comp, err := NewCompressor("", nil)
	if err != nil || comp.Format() != codec.FormatJSON {
		t.Fatalf("default compression %q, %v", comp.Format(), err)
	}
	if _, _, err := comp.Encode(map[string]any{"c": make(chan int)}); err == nil {
		t.Error("unencodable document accepted")
	}
}
