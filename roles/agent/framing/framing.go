// Package framing is the raw frame buffer of the MQTT input adapter
// (roles/agent/adapters/mqtt/README.md, section Frames): bytes
// from a device stream accumulate until an end-of-message delimiter, and
// each complete frame is handed on. A device may send several frames in
// one read, or one frame over several reads, and a delimiter of several
// bytes may itself be split between reads; the buffer hides all of that.
//
// The buffer is bounded. A frame longer than the capacity is dropped, up
// to and including its delimiter, so one runaway device cannot grow the
// agent's memory; the frames after it are kept.
package framing

import (
	"bytes"
	"errors"
)

// DefaultCapacity is the capacity used when New is given 0: the largest
// frame of an endpoint without buffer_capacity.
const DefaultCapacity = 1 << 20

// ErrOverflow is returned by Write when a frame grew past the capacity and
// was discarded.
var ErrOverflow = errors.New("framing: frame exceeds buffer capacity, discarded")

// Buffer accumulates a byte stream and splits it into frames. It is not
// safe for concurrent use: it belongs to the goroutine reading the stream.
type Buffer struct {
	delim []byte
	cap   int
	// buf holds the pending partial frame; while discarding it holds only
	// the last len(delim)-1 bytes, enough to see a delimiter that is split
	// between two writes.
	buf        []byte
	discarding bool
	overflows  uint64
}

// New returns a buffer splitting on delim (a newline when empty) that
// holds frames of at most capacity bytes (DefaultCapacity when capacity is
// 0 or negative). The delimiter is copied.
func New(delim []byte, capacity int) *Buffer {
	if len(delim) == 0 {
		delim = []byte{'\n'}
	}
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Buffer{delim: bytes.Clone(delim), cap: capacity}
}

// Capacity is the largest frame, without its delimiter, the buffer keeps.
func (b *Buffer) Capacity() int { return b.cap }

// Delimiter returns the delimiter the buffer splits on.
func (b *Buffer) Delimiter() []byte { return bytes.Clone(b.delim) }

// Len is the number of bytes held for the pending partial frame. It never
// exceeds Capacity()+len(delimiter)-1: the extra bytes may be the start of
// a delimiter whose rest has not arrived yet.
func (b *Buffer) Len() int {
	if b.discarding {
		return 0
	}
	return len(b.buf)
}

// Discarding reports whether the buffer is skipping the rest of an
// oversized frame. A buffer that is neither discarding nor holding bytes
// (Len 0) carries no state and may be dropped and replaced by a new one.
func (b *Buffer) Discarding() bool { return b.discarding }

// Overflows counts the frames discarded for exceeding the capacity.
func (b *Buffer) Overflows() uint64 { return b.overflows }

// Reset drops the pending partial frame, for instance after a reconnect,
// when the rest of that frame will never come.
func (b *Buffer) Reset() {
	b.buf = b.buf[:0]
	b.discarding = false
}

// Write adds p to the stream and calls emit, in order, for every frame it
// completes. Frames that are empty or only white space are skipped. A
// frame passed to emit aliases p or the buffer's memory and is valid only
// until emit returns: emit must copy what it keeps. The buffer never keeps
// a reference to p.
//
// When a frame grows past the capacity, Write discards it up to its
// delimiter, counts it in Overflows and returns ErrOverflow once the rest
// of p has been processed; the frames before and after it are emitted.
func (b *Buffer) Write(p []byte, emit func(frame []byte)) error {
	var err error
	dl := len(b.delim)
	for len(p) > 0 {
		// A delimiter that started in the held bytes and ends in p comes
		// before any delimiter wholly inside p. The smallest k is the
		// earliest such delimiter.
		if len(b.buf) > 0 && dl > 1 {
			if k := straddle(b.buf, p, b.delim); k > 0 {
				end := len(b.buf) - (dl - k)
				if !b.discarding {
					if end > b.cap {
						err = b.overflow()
					} else {
						emitFrame(b.buf[:end], emit)
					}
				}
				b.buf = b.buf[:0]
				b.discarding = false
				p = p[k:]
				continue
			}
		}
		i := bytes.Index(p, b.delim)
		if i < 0 {
			if b.discarding {
				b.keepTail(p)
				return err
			}
			if len(b.buf)+len(p) > b.cap+dl-1 {
				err = b.overflow()
				b.discarding = true
				b.keepTail(p)
				return err
			}
			b.buf = append(b.buf, p...)
			return err
		}
		switch {
		case b.discarding:
			b.discarding = false
		case len(b.buf)+i > b.cap:
			err = b.overflow()
		case len(b.buf) == 0:
			// The common case of whole frames in one write: no copy.
			emitFrame(p[:i], emit)
		default:
			b.buf = append(b.buf, p[:i]...)
			emitFrame(b.buf, emit)
		}
		b.buf = b.buf[:0]
		p = p[i+dl:]
	}
	return err
}

func (b *Buffer) overflow() error {
	b.overflows++
	return ErrOverflow
}

// keepTail keeps, of the held bytes followed by p, only the last
// len(delim)-1 bytes: all a later write needs to complete a delimiter.
func (b *Buffer) keepTail(p []byte) {
	keep := len(b.delim) - 1
	if keep == 0 {
		b.buf = b.buf[:0]
		return
	}
	if len(p) >= keep {
		b.buf = append(b.buf[:0], p[len(p)-keep:]...)
		return
	}
	b.buf = append(b.buf, p...)
	if n := len(b.buf); n > keep {
		b.buf = append(b.buf[:0], b.buf[n-keep:]...)
	}
}

// straddle reports how many bytes of p complete a delimiter that began in
// held, or 0. Only delimiters ending inside p are found; one that needs
// more bytes than p has is found by a later write.
func straddle(held, p, delim []byte) int {
	for k := 1; k < len(delim) && k <= len(p); k++ {
		head := len(delim) - k
		if head > len(held) {
			continue
		}
		if bytes.Equal(held[len(held)-head:], delim[:head]) && bytes.Equal(p[:k], delim[head:]) {
			return k
		}
	}
	return 0
}

func emitFrame(frame []byte, emit func([]byte)) {
	if len(bytes.TrimSpace(frame)) == 0 {
		return
	}
	emit(frame)
}
