package broker

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/mochi-mqtt/server/v2/packets"
)

// chunkConn serves data in reads of at most chunk bytes, the way TCP may
// split a header across segments.
type chunkConn struct {
	net.Conn
	data  []byte
	chunk int
}

func (c *chunkConn) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		return 0, io.EOF
	}
	n := min(len(p), c.chunk, len(c.data))
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

// FuzzFirstPacketConn feeds any bytes, in any read sizes, through the
// guard on a connection's first packet header. It must pass the bytes
// through unchanged, and refuse exactly when the header mochi decodes
// announces more than maxConnectBytes.
func FuzzFirstPacketConn(f *testing.F) {
	f.Add([]byte{0x10, 0x0c, 0, 4, 'M', 'Q', 'T', 'T', 4, 2, 0, 60, 0, 0}, 1)
	f.Add(append([]byte{0x10}, remainingLength(100<<20)...), 2)
	f.Add(append([]byte{0x10}, remainingLength(maxConnectBytes)...), 3)
	f.Add(append([]byte{0x10}, remainingLength(maxConnectBytes-1)...), 1)
	f.Add([]byte{0x10, 0xff, 0xff, 0xff, 0xff, 0x7f}, 1)
	f.Add([]byte{0x30}, 1)
	f.Fuzz(func(t *testing.T, data []byte, chunk int) {
		if chunk <= 0 || chunk > 64 {
			chunk = 1 + (chunk&0x3f+64)%64
		}
		c := &firstPacketConn{Conn: &chunkConn{data: bytes.Clone(data), chunk: chunk}}
		got, err := io.ReadAll(c)
		tooLarge := errors.Is(err, errConnectTooLarge)
		if err != nil && !tooLarge {
			t.Fatalf("read: %v", err)
		}
		if !tooLarge && !bytes.Equal(got, data) {
			t.Fatalf("passed %x, want %x", got, data)
		}
		if tooLarge && !bytes.HasPrefix(data, got) {
			t.Fatalf("passed %x, not a prefix of %x", got, data)
		}
		// What mochi decodes from the same bytes.
		if len(data) < 2 {
			if tooLarge {
				t.Fatal("refused without a complete header")
			}
			return
		}
		n, _, derr := packets.DecodeLength(bufio.NewReader(bytes.NewReader(data[1:])))
		if derr != nil {
			// Truncated, or malformed: mochi ends such a connection itself,
			// so the guard refusing it first changes nothing.
			return
		}
		if want := n+1 > maxConnectBytes; tooLarge != want {
			t.Fatalf("remaining length %d: refused=%v, want %v", n, tooLarge, want)
		}
	})
}
