package framing

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// feed writes each chunk in turn and returns the frames (copied), the
// number of writes that returned ErrOverflow, and any other error.
func feed(t *testing.T, b *Buffer, chunks []string) (frames []string, overflowErrs int) {
	t.Helper()
	for _, c := range chunks {
		err := b.Write([]byte(c), func(f []byte) { frames = append(frames, string(f)) })
		switch {
		case errors.Is(err, ErrOverflow):
			overflowErrs++
		case err != nil:
			t.Fatalf("Write(%q): %v", c, err)
		}
		if max := b.Capacity() + len(b.delim) - 1; b.Len() > max {
			t.Fatalf("Len %d exceeds %d after %q", b.Len(), max, c)
		}
	}
	return frames, overflowErrs
}

func TestBuffer(t *testing.T) {
	tests := []struct {
		name      string
		delim     string
		capacity  int
		chunks    []string
		want      []string
		overflows uint64
		pending   int
	}{
		{name: "one frame", delim: "\n", chunks: []string{"{\"a\":1}\n"}, want: []string{`{"a":1}`}},
		{name: "several in one write", delim: "\n", chunks: []string{"a\nb\nc\n"}, want: []string{"a", "b", "c"}},
		{name: "split across writes", delim: "\n", chunks: []string{"{\"a\"", ":1}", "\n{\"b\":2", "}\n"}, want: []string{`{"a":1}`, `{"b":2}`}},
		{name: "partial tail kept", delim: "\n", chunks: []string{"a\nbc"}, want: []string{"a"}, pending: 2},
		{name: "empty and blank frames skipped", delim: "\n", chunks: []string{"\n\na\n \t\r\n\nb\n"}, want: []string{"a", "b"}},
		{name: "default delimiter", delim: "", chunks: []string{"x\ny\n"}, want: []string{"x", "y"}},
		{name: "multi-byte delimiter", delim: "\r\n", chunks: []string{"a\r\nb\r\n"}, want: []string{"a", "b"}},
		{name: "multi-byte delimiter split", delim: "\r\n", chunks: []string{"a\r", "\nb\r", "\n"}, want: []string{"a", "b"}},
		{name: "three-byte delimiter byte by byte", delim: "END", chunks: []string{"x", "E", "N", "D", "yE", "ND"}, want: []string{"x", "y"}},
		{name: "false delimiter start", delim: "END", chunks: []string{"xEN", "xEND"}, want: []string{"xENx"}},
		{name: "overlapping delimiter bytes", delim: "aa", chunks: []string{"xa", "aay", "aa"}, want: []string{"x", "ay"}},
		{name: "frame exactly at capacity", delim: "\n", capacity: 4, chunks: []string{"abcd\n"}, want: []string{"abcd"}},
		{name: "frame at capacity with split delimiter", delim: "\r\n", capacity: 4, chunks: []string{"abcd\r", "\n"}, want: []string{"abcd"}},
		{name: "overflow in one write then recovery", delim: "\n", capacity: 4, chunks: []string{"abcdef\nok\n"}, want: []string{"ok"}, overflows: 1},
		{name: "overflow across writes then recovery", delim: "\n", capacity: 4, chunks: []string{"abc", "def", "ghi", "jk\nok", "\n"}, want: []string{"ok"}, overflows: 1},
		{name: "overflow detected at delimiter", delim: "\r\n", capacity: 4, chunks: []string{"abcde", "\r\nok\r\n"}, want: []string{"ok"}, overflows: 1},
		{name: "overflow with delimiter split while discarding", delim: "\r\n", capacity: 2, chunks: []string{"abcdef\r", "\nok\r\n"}, want: []string{"ok"}, overflows: 1},
		{name: "two overflows", delim: "\n", capacity: 2, chunks: []string{"aaaa\nb\ncccccc", "c\nd\n"}, want: []string{"b", "d"}, overflows: 2},
		{name: "frames before overflow kept", delim: "\n", capacity: 3, chunks: []string{"a\nbb\ncccc\ndd\n"}, want: []string{"a", "bb", "dd"}, overflows: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := New([]byte(tt.delim), tt.capacity)
			got, errs := feed(t, b, tt.chunks)
			if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", tt.want) {
				t.Errorf("frames %q, want %q", got, tt.want)
			}
			if b.Overflows() != tt.overflows {
				t.Errorf("Overflows %d, want %d", b.Overflows(), tt.overflows)
			}
			// Several overflows in one write return ErrOverflow once.
			if (errs > 0) != (tt.overflows > 0) {
				t.Errorf("%d writes returned ErrOverflow with %d overflows", errs, tt.overflows)
			}
			if b.Len() != tt.pending {
				t.Errorf("Len %d, want %d", b.Len(), tt.pending)
			}
		})
	}
}

func TestBufferReset(t *testing.T) {
	b := New([]byte("\n"), 0)
	if b.Capacity() != DefaultCapacity {
		t.Fatalf("Capacity %d, want %d", b.Capacity(), DefaultCapacity)
	}
	got, _ := feed(t, b, []string{"stale part"})
	b.Reset()
	if b.Len() != 0 {
		t.Fatalf("Len after Reset %d", b.Len())
	}
	got2, _ := feed(t, b, []string{"fresh\n"})
	if len(got) != 0 || len(got2) != 1 || got2[0] != "fresh" {
		t.Fatalf("frames %q then %q", got, got2)
	}
}

func TestBufferResetWhileDiscarding(t *testing.T) {
	b := New([]byte("\n"), 2)
	feed(t, b, []string{"toolong"})
	if !b.Discarding() || b.Len() != 0 {
		t.Fatalf("Discarding %v, Len %d after an overflow", b.Discarding(), b.Len())
	}
	b.Reset()
	if b.Discarding() {
		t.Fatal("still discarding after Reset")
	}
	got, _ := feed(t, b, []string{"ok\n"})
	if len(got) != 1 || got[0] != "ok" {
		t.Fatalf("frames %q after Reset of a discarding buffer", got)
	}
}

func TestBufferDoesNotKeepInput(t *testing.T) {
	b := New([]byte("\n"), 0)
	p := []byte("abc")
	_ = b.Write(p, func([]byte) {})
	copy(p, "xyz")
	got, _ := feed(t, b, []string{"\n"})
	if len(got) != 1 || got[0] != "abc" {
		t.Fatalf("frames %q: the buffer kept a reference to the caller's slice", got)
	}
}

// reference frames a whole stream the simple way: split on the delimiter,
// the last piece is the partial tail, blank and oversized frames go.
func reference(stream, delim []byte, capacity int) (frames [][]byte, overflows uint64, tail []byte) {
	parts := bytes.Split(stream, delim)
	tail = parts[len(parts)-1]
	for _, p := range parts[:len(parts)-1] {
		if len(p) > capacity {
			overflows++
			continue
		}
		if len(bytes.TrimSpace(p)) == 0 {
			continue
		}
		frames = append(frames, p)
	}
	// A partial frame is known to be too long once it cannot be a frame
	// of capacity bytes plus the start of a delimiter.
	if len(tail) > capacity+len(delim)-1 {
		overflows++
	}
	return frames, overflows, tail
}

// FuzzBuffer checks the buffer against reference for any stream, any
// delimiter, any capacity and any way of cutting the stream into writes.
func FuzzBuffer(f *testing.F) {
	f.Add([]byte("a\nb\nc"), []byte("\n"), uint8(4), []byte{1, 2, 3})
	f.Add([]byte("ab\r\ncd\r\n\r\nxxxxxxxx\r\nz"), []byte("\r\n"), uint8(3), []byte{3, 1, 1, 5})
	f.Add([]byte("aaaaxaaay"), []byte("aa"), uint8(1), []byte{1})
	f.Add([]byte("xENDyEN"), []byte("END"), uint8(0), []byte{2, 2})
	f.Fuzz(func(t *testing.T, stream, delim []byte, capacity uint8, cuts []byte) {
		if len(delim) == 0 || len(delim) > 8 {
			return
		}
		capN := int(capacity%64) + 1
		b := New(delim, capN)
		var got [][]byte
		rest := stream
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if len(cuts) > 0 {
				n = min(int(cuts[i%len(cuts)])%(len(stream)+1)+1, len(rest))
			}
			err := b.Write(rest[:n], func(fr []byte) { got = append(got, bytes.Clone(fr)) })
			if err != nil && !errors.Is(err, ErrOverflow) {
				t.Fatal(err)
			}
			if b.Len() > capN+len(delim)-1 {
				t.Fatalf("Len %d beyond capacity %d", b.Len(), capN)
			}
			rest = rest[n:]
		}
		want, overflows, tail := reference(stream, delim, capN)
		if len(got) != len(want) {
			t.Fatalf("got %d frames %q, want %d %q", len(got), got, len(want), want)
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("frame %d = %q, want %q", i, got[i], want[i])
			}
		}
		if b.Overflows() != overflows {
			t.Fatalf("Overflows %d, want %d", b.Overflows(), overflows)
		}
		if overflows == 0 || len(tail) <= capN+len(delim)-1 {
			if b.Len() != len(tail) {
				t.Fatalf("Len %d, want pending tail %d", b.Len(), len(tail))
			}
		}
	})
}
