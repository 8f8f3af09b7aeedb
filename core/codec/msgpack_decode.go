package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// mpDecoder decodes one MessagePack value into the package's value types.
// Every length the bytes announce is checked against the bytes that remain
// (an element takes at least one byte, a map entry two) and against
// MaxContainerLen before anything is allocated, so a 5-byte array32 header
// claiming 2^32-1 elements costs nothing.
type mpDecoder struct {
	*valueDecoder
	b []byte
	p int
}

func decodeMsgpack(vd *valueDecoder, b []byte) (any, error) {
	d := mpDecoder{valueDecoder: vd, b: b}
	v, err := d.value(true)
	if err != nil {
		return nil, err
	}
	if d.p != len(d.b) {
		return nil, fmt.Errorf("%w: msgpack: %d bytes after the value", ErrMalformed, len(d.b)-d.p)
	}
	return v, nil
}

// isMsgpackContainer reports whether c can start a payload: the wire format
// requires a map or an array at the top, which keeps detection unambiguous
// (see docs/codec.md).
func isMsgpackContainer(c byte) bool {
	return (c >= 0x80 && c <= 0x9f) || (c >= 0xdc && c <= 0xdf)
}

func (d *mpDecoder) truncated(what string) error {
	return fmt.Errorf("%w: msgpack: truncated %s at offset %d", ErrMalformed, what, d.p)
}

func (d *mpDecoder) remaining() uint64 { return uint64(len(d.b) - d.p) }

// uint reads a big-endian unsigned integer of size 1, 2, 4 or 8 bytes.
func (d *mpDecoder) uint(size int) (uint64, error) {
	if len(d.b)-d.p < size {
		return 0, d.truncated("number")
	}
	b := d.b[d.p : d.p+size]
	d.p += size
	switch size {
	case 1:
		return uint64(b[0]), nil
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), nil
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), nil
	}
	return binary.BigEndian.Uint64(b), nil
}

func (d *mpDecoder) int(size int) (int64, error) {
	u, err := d.uint(size)
	switch size {
	case 1:
		return int64(int8(u)), err
	case 2:
		return int64(int16(u)), err
	case 4:
		return int64(int32(u)), err
	}
	return int64(u), err
}

func (d *mpDecoder) take(n uint64, what string) ([]byte, error) {
	if n > d.remaining() {
		return nil, fmt.Errorf("%w: msgpack: %s of %d bytes at offset %d, %d remain", ErrMalformed, what, n, d.p, d.remaining())
	}
	b := d.b[d.p : d.p+int(n)]
	d.p += int(n)
	return b, nil
}

// checkLen validates a claimed container length before it is allocated.
func (d *mpDecoder) checkLen(n uint64, minBytes uint64, what string) error {
	if n > uint64(d.lim.MaxContainerLen) {
		return fmt.Errorf("%w: msgpack: %s of %d entries at offset %d (limit %d)", ErrTooLarge, what, n, d.p, d.lim.MaxContainerLen)
	}
	if n*minBytes > d.remaining() {
		return fmt.Errorf("%w: msgpack: %s of %d entries at offset %d, only %d bytes remain", ErrMalformed, what, n, d.p, d.remaining())
	}
	return nil
}

func (d *mpDecoder) value(top bool) (any, error) {
	if d.p >= len(d.b) {
		return nil, d.truncated("value")
	}
	if err := d.count(); err != nil {
		return nil, err
	}
	c := d.b[d.p]
	d.p++
	switch {
	case c <= 0x7f:
		return int64(c), nil
	case c >= 0xe0:
		return int64(int8(c)), nil
	case c <= 0x8f:
		return d.object(uint64(c&0x0f), top)
	case c <= 0x9f:
		return d.array(uint64(c & 0x0f))
	case c <= 0xbf:
		return d.str(uint64(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return nil, nil
	case 0xc2:
		return false, nil
	case 0xc3:
		return true, nil
	case 0xc4, 0xc5, 0xc6: // bin 8/16/32
		n, err := d.uint(1 << (c - 0xc4))
		if err != nil {
			return nil, err
		}
		b, err := d.take(n, "bin")
		if err != nil {
			return nil, err
		}
		return bytes.Clone(b), nil
	case 0xc7, 0xc8, 0xc9: // ext 8/16/32
		n, err := d.uint(1 << (c - 0xc7))
		if err != nil {
			return nil, err
		}
		return d.ext(n)
	case 0xca:
		u, err := d.uint(4)
		if err != nil {
			return nil, err
		}
		return finite(float64(math.Float32frombits(uint32(u)))), nil
	case 0xcb:
		u, err := d.uint(8)
		if err != nil {
			return nil, err
		}
		return finite(math.Float64frombits(u)), nil
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, err := d.uint(1 << (c - 0xcc))
		if err != nil {
			return nil, err
		}
		if u > math.MaxInt64 {
			return u, nil
		}
		return int64(u), nil
	case 0xd0, 0xd1, 0xd2, 0xd3:
		i, err := d.int(1 << (c - 0xd0))
		if err != nil {
			return nil, err
		}
		return i, nil
	case 0xd4, 0xd5, 0xd6, 0xd7, 0xd8: // fixext 1/2/4/8/16
		return d.ext(1 << (c - 0xd4))
	case 0xd9, 0xda, 0xdb:
		n, err := d.uint(1 << (c - 0xd9))
		if err != nil {
			return nil, err
		}
		return d.str(n)
	case 0xdc, 0xdd:
		n, err := d.uint(2 << (c - 0xdc))
		if err != nil {
			return nil, err
		}
		return d.array(n)
	case 0xde, 0xdf:
		n, err := d.uint(2 << (c - 0xde))
		if err != nil {
			return nil, err
		}
		return d.object(n, top)
	}
	return nil, fmt.Errorf("%w: msgpack: reserved type byte 0x%02x at offset %d", ErrMalformed, c, d.p-1)
}

// finite maps NaN and ±Inf to nil: JSON cannot carry them, and nil is what
// JSON.stringify (and so a JSON-publishing agent) makes of them, so a value
// decodes the same whichever format carried it.
func finite(f float64) any {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return f
}

func (d *mpDecoder) str(n uint64) (any, error) {
	b, err := d.take(n, "str")
	if err != nil {
		return nil, err
	}
	return d.strs.get(b), nil
}

func (d *mpDecoder) array(n uint64) (any, error) {
	if err := d.checkLen(n, 1, "array"); err != nil {
		return nil, err
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	a := make([]any, n)
	for i := range a {
		v, err := d.value(false)
		if err != nil {
			return nil, err
		}
		a[i] = v
	}
	d.depth--
	return a, nil
}

func (d *mpDecoder) object(n uint64, top bool) (any, error) {
	if err := d.checkLen(n, 2, "map"); err != nil {
		return nil, err
	}
	if err := d.enter(); err != nil {
		return nil, err
	}
	m := make(map[string]any, n)
	stored := 0
	var marker any // the marker's value when it is not the first key
	late := false
	for i := uint64(0); i < n; i++ {
		keyAt := d.p
		k, isMarker, err := d.key(top)
		if err != nil {
			return nil, err
		}
		v, err := d.value(false)
		if err != nil {
			return nil, err
		}
		if isMarker {
			if late || d.dict != nil {
				return nil, fmt.Errorf("%w: msgpack: second %s at offset %d", ErrMalformed, markerKey, keyAt)
			}
			if i == 0 {
				if err := d.setMarker(v); err != nil {
					return nil, err
				}
			} else {
				marker, late = v, true
			}
			continue
		}
		m[k] = v
		stored++
		if len(m) != stored {
			return nil, fmt.Errorf("%w: msgpack: duplicate key %q at offset %d", ErrMalformed, k, keyAt)
		}
	}
	d.depth--
	if late {
		if err := d.setMarker(marker); err != nil {
			return nil, err
		}
		return d.expandLate(m, true)
	}
	return m, nil
}

// key reads a map key. Strings (and bin, which old encoders used for strings)
// are names; integers are dictionary indices in a compacted payload and
// decimal names otherwise. marker reports the top-level compaction marker.
func (d *mpDecoder) key(top bool) (k string, marker bool, err error) {
	if d.p >= len(d.b) {
		return "", false, d.truncated("key")
	}
	c := d.b[d.p]
	d.p++
	var n uint64
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n = uint64(c & 0x1f)
	case c == 0xd9 || c == 0xda || c == 0xdb:
		n, err = d.uint(1 << (c - 0xd9))
	case c == 0xc4 || c == 0xc5 || c == 0xc6:
		n, err = d.uint(1 << (c - 0xc4))
	case c <= 0x7f:
		return d.numKey(false, uint64(c))
	case c >= 0xe0:
		return d.numKey(true, uint64(int64(int8(c))))
	case c >= 0xcc && c <= 0xcf:
		u, err := d.uint(1 << (c - 0xcc))
		if err != nil {
			return "", false, err
		}
		return d.numKey(false, u)
	case c >= 0xd0 && c <= 0xd3:
		i, err := d.int(1 << (c - 0xd0))
		if err != nil {
			return "", false, err
		}
		return d.numKey(i < 0, uint64(i))
	default:
		return "", false, fmt.Errorf("%w: msgpack: map key of type 0x%02x at offset %d", ErrUnsupported, c, d.p-1)
	}
	if err != nil {
		return "", false, err
	}
	b, err := d.take(n, "key")
	if err != nil {
		return "", false, err
	}
	if top && string(b) == markerKey {
		return "", true, nil
	}
	if d.dict != nil {
		k, err := d.compactedKey(b, top)
		if err != nil {
			return "", false, fmt.Errorf("msgpack: offset %d: %w", d.p-len(b), err)
		}
		return k, false, nil
	}
	return internKey(b), false, nil
}

// numKey turns an integer key into a name. In a compacted payload a
// non-negative integer is an index; a negative one is never an index and
// stays its decimal string, as it would if the marker came last and the key
// were reinterpreted from that string.
func (d *mpDecoder) numKey(neg bool, u uint64) (string, bool, error) {
	if d.dict == nil || neg {
		return intKey(neg, u), false, nil
	}
	k, err := d.indexKey(u)
	return k, false, err
}

// ext decodes an extension. Only the timestamp (type -1) has a JSON meaning;
// it becomes an RFC 3339 string in UTC, which is how the agents' JSON carries
// times and what JSON.stringify makes of the Date that produced it.
func (d *mpDecoder) ext(n uint64) (any, error) {
	if d.p >= len(d.b) {
		return nil, d.truncated("ext")
	}
	typ := int8(d.b[d.p])
	d.p++
	b, err := d.take(n, "ext")
	if err != nil {
		return nil, err
	}
	if typ != -1 {
		return nil, fmt.Errorf("%w: msgpack: extension type %d at offset %d", ErrUnsupported, typ, d.p-len(b)-1)
	}
	var sec int64
	var nsec uint32
	switch len(b) {
	case 4:
		sec = int64(binary.BigEndian.Uint32(b))
	case 8:
		v := binary.BigEndian.Uint64(b)
		nsec, sec = uint32(v>>34), int64(v&(1<<34-1))
	case 12:
		nsec, sec = binary.BigEndian.Uint32(b), int64(binary.BigEndian.Uint64(b[4:]))
	default:
		return nil, fmt.Errorf("%w: msgpack: timestamp of %d bytes", ErrMalformed, len(b))
	}
	if nsec >= 1e9 {
		return nil, fmt.Errorf("%w: msgpack: timestamp nanoseconds %d", ErrMalformed, nsec)
	}
	return time.Unix(sec, int64(nsec)).UTC().Format(time.RFC3339Nano), nil
}
