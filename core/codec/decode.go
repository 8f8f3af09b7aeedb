package codec

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Deflate names the compression layer of a payload.
type Deflate string

// Compression layers.
const (
	DeflateNone Deflate = ""
	DeflateZlib Deflate = "zlib" // RFC 1950: deflate with a 2-byte header and an Adler-32 trailer
	DeflateRaw  Deflate = "raw"  // RFC 1951: a bare deflate stream
)

// Encoding names the serialization of a payload.
type Encoding string

// Serializations.
const (
	EncodingJSON    Encoding = "json"
	EncodingMsgpack Encoding = "msgpack"
)

// Layers reports what Decode found, outermost first.
type Layers struct {
	Deflate     Deflate
	Encoding    Encoding
	Compacted   bool
	DictVersion int // dictionary version named by the marker; 0 unless Compacted
}

// String renders the layers for operators, outermost first, for example
// "zlib-deflate → msgpack → key-compaction v1".
func (l Layers) String() string {
	var parts []string
	if l.Deflate != DeflateNone {
		parts = append(parts, string(l.Deflate)+"-deflate")
	}
	parts = append(parts, string(l.Encoding))
	if l.Compacted {
		parts = append(parts, "key-compaction v"+strconv.Itoa(l.DictVersion))
	}
	return strings.Join(parts, " → ")
}

// Decoded is a decoded payload.
type Decoded struct {
	// Value is the payload as map[string]any or []any; see the package
	// documentation for the value types.
	Value  any
	Layers Layers
}

// JSON returns Value as canonical JSON (see AppendJSON).
func (d Decoded) JSON() ([]byte, error) {
	return AppendJSON(nil, d.Value)
}

// ReadPayload reads a whole payload from r, refusing one longer than
// lim.MaxInputSize without reading past that point.
func ReadPayload(r io.Reader, lim Limits) ([]byte, error) {
	lim = lim.normalized()
	b, err := io.ReadAll(io.LimitReader(r, int64(lim.MaxInputSize)+1))
	if err != nil {
		return nil, fmt.Errorf("read payload: %w", err)
	}
	if len(b) > lim.MaxInputSize {
		return nil, fmt.Errorf("%w: input exceeds %d bytes", ErrTooLarge, lim.MaxInputSize)
	}
	return b, nil
}

// Decode recognises and undoes every layer of a payload: an optional zlib or
// raw DEFLATE wrapper, then JSON or MessagePack, then key compaction when the
// payload is marked as compacted. The detection rules are in docs/codec.md.
//
// Decode does not keep or modify data. It is safe for concurrent use.
func Decode(data []byte, lim Limits) (Decoded, error) {
	lim = lim.normalized()
	if len(data) > lim.MaxInputSize {
		return Decoded{}, fmt.Errorf("%w: input of %d bytes exceeds %d", ErrTooLarge, len(data), lim.MaxInputSize)
	}
	if len(data) == 0 {
		return Decoded{}, fmt.Errorf("%w: empty payload", ErrMalformed)
	}

	// A zlib header never starts JSON or a MessagePack container (its first
	// byte is 0x08..0x78 with low nibble 8), so when it checks out it is
	// tried first. If inflation fails anyway the bytes get the other rules.
	var zlibErr error
	if isZlibHeader(data) {
		dec, inflated, err := decodeInflated(data, DeflateZlib, lim)
		if err == nil || inflated || errors.Is(err, ErrTooLarge) {
			return dec, err
		}
		zlibErr = err
	}

	if enc := sniff(data); enc != "" {
		dec, err := decodeSerialized(data, enc, lim)
		if err == nil {
			return dec, nil
		}
		// Raw deflate has no header, and its bytes can look like the start
		// of a serialization: a fixed-Huffman block whose first literal is
		// '[' begins with 0x8a or 0x8b, MessagePack fixmaps. So bytes that looked
		// serialized but did not parse may still be a raw stream. Only a
		// full success (or a bomb) counts: short garbage inflates to other
		// garbage surprisingly often, and then the parse error is the
		// useful one.
		rdec, _, rerr := decodeInflated(data, DeflateRaw, lim)
		if rerr == nil || errors.Is(rerr, ErrTooLarge) {
			return rdec, rerr
		}
		return Decoded{}, err
	}

	dec, inflated, err := decodeInflated(data, DeflateRaw, lim)
	if err == nil || inflated || errors.Is(err, ErrTooLarge) {
		return dec, err
	}
	if zlibErr != nil {
		return Decoded{}, zlibErr
	}
	return Decoded{}, fmt.Errorf("%w (not JSON, not a MessagePack map or array, not zlib, and not raw deflate)", err)
}

// sniff returns the serialization the bytes start with, or "".
func sniff(b []byte) Encoding {
	switch c := jsonStart(b); {
	case c == '{' || c == '[':
		return EncodingJSON
	case len(b) > 0 && isMsgpackContainer(b[0]):
		return EncodingMsgpack
	}
	return ""
}

// decodeInflated inflates data and decodes the result. inflated reports that
// inflation itself succeeded: the deflate layer is then certain, and an
// error is about what was inside it, so detection tries nothing else.
func decodeInflated(data []byte, kind Deflate, lim Limits) (dec Decoded, inflated bool, err error) {
	buf := getBuf()
	defer putBuf(buf)
	if kind == DeflateZlib {
		if err := inflateZlib(buf, data, lim.MaxDecodedSize); err != nil {
			return Decoded{}, false, err
		}
	} else {
		trailing, err := inflateRaw(buf, data, lim.MaxDecodedSize)
		if err != nil {
			return Decoded{}, false, err
		}
		if trailing != 0 {
			return Decoded{}, false, fmt.Errorf("%w: raw deflate: %d bytes after the stream", ErrMalformed, trailing)
		}
	}
	enc := sniff(*buf)
	if enc == "" {
		return Decoded{}, true, fmt.Errorf("%w: %s-deflate: inflated bytes are neither JSON nor a MessagePack map or array", ErrMalformed, kind)
	}
	dec, err = decodeSerialized(*buf, enc, lim)
	if err != nil {
		return Decoded{}, true, fmt.Errorf("%s-deflate: %w", kind, err)
	}
	dec.Layers.Deflate = kind
	return dec, true, nil
}

func decodeSerialized(b []byte, enc Encoding, lim Limits) (Decoded, error) {
	if len(b) > lim.MaxDecodedSize {
		return Decoded{}, fmt.Errorf("%w: payload of %d bytes exceeds %d", ErrTooLarge, len(b), lim.MaxDecodedSize)
	}
	d := getDecoder(lim)
	defer putDecoder(d)
	var v any
	var err error
	if enc == EncodingJSON {
		v, err = decodeJSON(d, b)
	} else {
		v, err = decodeMsgpack(d, b)
	}
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{Value: v, Layers: Layers{
		Encoding:    enc,
		Compacted:   d.dict != nil,
		DictVersion: d.dictV,
	}}, nil
}

// Unwrap gives a schema-specific decoder the serialized bytes of data where
// Decode's detection is certain: a zlib stream that inflates (Decode then
// never tries anything else), or bytes that start like JSON or MessagePack
// and are no deflate stream. fn receives the bytes, their serialization and
// the normalized limits, and reports whether it decoded them; the bytes are
// only valid during the call. Unwrap returns false, without calling fn or
// after fn declined, wherever Decode would need its fallbacks or fail: the
// caller then decodes with Decode, which also produces the error. So a
// decoder that accepts no more than Decode accepts, and maps what it accepts
// to what Decode's value maps to, cannot change a result, only its cost.
func Unwrap(data []byte, lim Limits, fn func(b []byte, enc Encoding, lim Limits) bool) bool {
	lim = lim.normalized()
	if len(data) == 0 || len(data) > lim.MaxInputSize {
		return false
	}
	if isZlibHeader(data) {
		buf := getBuf()
		defer putBuf(buf)
		if err := inflateZlib(buf, data, lim.MaxDecodedSize); err != nil {
			return false
		}
		enc := sniff(*buf)
		if enc == "" || len(*buf) > lim.MaxDecodedSize {
			return false
		}
		return fn(*buf, enc, lim)
	}
	enc := sniff(data)
	if enc == "" || len(data) > lim.MaxDecodedSize {
		return false
	}
	return fn(data, enc, lim)
}
