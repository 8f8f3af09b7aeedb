package codec

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/adler32"
	"io"
	"sync"

	"github.com/klauspost/compress/flate"
)

// The zlib wrapper (RFC 1950) is two header bytes, the deflate stream and a
// big-endian Adler-32 of the inflated bytes. It is framed here by hand around
// pooled klauspost flate readers and writers rather than with a zlib package:
// the whole inflated payload is in memory anyway, so the checksum is one call,
// nothing is allocated per message, and trailing bytes after the stream are
// detected (they mean corruption or a wrong guess about the layer).

const (
	zlibCMF   = 0x78 // CM=8 (deflate), CINFO=7 (32 KiB window)
	zlibFDICT = 0x20
)

// isZlibHeader reports whether b starts with a zlib header we can inflate: CM
// 8, a window of at most 32 KiB and a valid FCHECK. A preset dictionary
// (FDICT) still counts so that the caller can name it in the error.
func isZlibHeader(b []byte) bool {
	if len(b) < 2 {
		return false
	}
	cmf, flg := b[0], b[1]
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0
}

// zlibHeader returns the header Encode writes; FLEVEL is informational only,
// but writing what zlib itself would write keeps the output byte-identical to
// other implementations at the same level.
func zlibHeader(level int) [2]byte {
	var flevel byte
	switch {
	case level == flate.DefaultCompression || level == 6:
		flevel = 2
	case level == flate.HuffmanOnly || level == 1:
		flevel = 0
	case level >= 7:
		flevel = 3
	default:
		flevel = 1
	}
	flg := flevel << 6
	flg += byte(31 - (uint16(zlibCMF)<<8|uint16(flg))%31)
	return [2]byte{zlibCMF, flg}
}

type inflater struct {
	br bytes.Reader // *bytes.Reader is an io.ByteReader, so flate never reads ahead
	fr io.ReadCloser
}

var inflaterPool = sync.Pool{New: func() any {
	in := &inflater{}
	in.fr = flate.NewReader(&in.br)
	return in
}}

// bufPool holds inflate output buffers. Buffers that grew past maxPooledBuf are
// dropped so that one large payload does not pin memory in every P's pool.
var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

const maxPooledBuf = 1 << 20

func getBuf() *[]byte { return bufPool.Get().(*[]byte) }

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	*b = (*b)[:0]
	bufPool.Put(b)
}

// inflateRaw inflates a raw deflate stream (RFC 1951) into *out, stopping as
// soon as the output would exceed max bytes. It returns how many input bytes
// followed the end of the stream.
func inflateRaw(out *[]byte, data []byte, max int) (trailing int, err error) {
	in := inflaterPool.Get().(*inflater)
	defer func() {
		in.br.Reset(nil) // the pool must not keep the caller's payload alive
		inflaterPool.Put(in)
	}()
	in.br.Reset(data)
	if err := in.fr.(flate.Resetter).Reset(&in.br, nil); err != nil {
		return 0, fmt.Errorf("%w: inflate: %v", ErrMalformed, err)
	}
	// The cap is max+1 so that a stream that fills it is known to be too
	// large without reading any further: this is the LimitReader(max+1)
	// idiom, done on the buffer so the limit also bounds its growth.
	buf := (*out)[:0]
	for {
		if len(buf) == cap(buf) {
			if len(buf) > max {
				*out = buf
				return 0, fmt.Errorf("%w: inflated size exceeds %d bytes", ErrTooLarge, max)
			}
			buf = growCapped(buf, max+1)
		}
		n, rerr := in.fr.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if len(buf) > max {
			*out = buf
			return 0, fmt.Errorf("%w: inflated size exceeds %d bytes", ErrTooLarge, max)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			*out = buf
			if errors.Is(rerr, io.ErrUnexpectedEOF) {
				return 0, fmt.Errorf("%w: inflate: truncated deflate stream", ErrMalformed)
			}
			return 0, fmt.Errorf("%w: inflate: %v", ErrMalformed, rerr)
		}
	}
	*out = buf
	return in.br.Len(), nil
}

// growCapped grows b's capacity (doubling, at least 4 KiB) but never past
// limit, jumping straight to limit when one more doubling would pass it, so a
// payload near the limit is not copied once more just to add a byte.
func growCapped(b []byte, limit int) []byte {
	n := max(2*cap(b), 4<<10)
	if 2*n > limit {
		n = limit
	}
	nb := make([]byte, len(b), n)
	copy(nb, b)
	return nb
}

// inflateZlib inflates a zlib stream into *out and verifies its checksum.
func inflateZlib(out *[]byte, data []byte, max int) error {
	if !isZlibHeader(data) {
		return fmt.Errorf("%w: zlib: bad header", ErrMalformed)
	}
	if data[1]&zlibFDICT != 0 {
		return fmt.Errorf("%w: zlib: preset dictionary", ErrUnsupported)
	}
	trailing, err := inflateRaw(out, data[2:], max)
	if err != nil {
		return err
	}
	switch {
	case trailing < 4:
		return fmt.Errorf("%w: zlib: truncated checksum", ErrMalformed)
	case trailing > 4:
		return fmt.Errorf("%w: zlib: %d bytes after the checksum", ErrMalformed, trailing-4)
	}
	want := binary.BigEndian.Uint32(data[len(data)-4:])
	if got := adler32.Checksum(*out); got != want {
		return fmt.Errorf("%w: zlib: checksum mismatch", ErrMalformed)
	}
	return nil
}

// appendWriter lets a flate writer append to a byte slice the caller owns.
type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type deflater struct {
	aw appendWriter
	fw *flate.Writer
}

// deflaterPools has one pool per level (flate.HuffmanOnly..flate.BestCompression):
// a klauspost writer keeps its level across Reset, and allocating one costs
// hundreds of kilobytes.
var deflaterPools [flate.BestCompression - flate.HuffmanOnly + 1]sync.Pool

func validLevel(level int) error {
	if level == flate.HuffmanOnly || level == flate.DefaultCompression || (level >= flate.BestSpeed && level <= flate.BestCompression) {
		return nil
	}
	return fmt.Errorf("%w: deflate level %d (valid: -2 Huffman only, -1 default, 1..9)", ErrUnsupported, level)
}

// appendDeflate appends src compressed at level to dst, zlib-wrapped unless raw.
func appendDeflate(dst, src []byte, level int, raw bool) ([]byte, error) {
	if err := validLevel(level); err != nil {
		return dst, err
	}
	pool := &deflaterPools[level-flate.HuffmanOnly]
	d, _ := pool.Get().(*deflater)
	if d == nil {
		d = &deflater{}
		fw, err := flate.NewWriter(&d.aw, level)
		if err != nil {
			return dst, fmt.Errorf("deflate: %w", err)
		}
		d.fw = fw
	} else {
		d.fw.Reset(&d.aw)
	}
	if !raw {
		h := zlibHeader(level)
		dst = append(dst, h[0], h[1])
	}
	d.aw.b = dst
	_, err := d.fw.Write(src)
	if err == nil {
		err = d.fw.Close()
	}
	dst = d.aw.b
	d.aw.b = nil // the pool must not keep the caller's buffer alive
	pool.Put(d)
	if err != nil {
		return dst, fmt.Errorf("deflate: %w", err)
	}
	if !raw {
		dst = binary.BigEndian.AppendUint32(dst, adler32.Checksum(src))
	}
	return dst, nil
}
