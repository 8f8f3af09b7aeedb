package telemetry

import (
	"fmt"
	"unsafe"
)

// ReadingArena lends the readings slices of the messages of one batch from
// one reusable array, so that a consumer that decodes batch after batch
// (the ingest workers) does not allocate a slice per message. The messages
// decoded through it share its memory: they are valid until Reset, which
// the consumer calls once nothing refers to them any more. An arena is for
// one goroutine at a time.
type ReadingArena struct {
	buf []Reading
	// short counts the readings that did not fit in this round, so that
	// Reset can make room for them next time.
	short int
	// keep bounds the readings kept across Reset: a batch of unusually
	// large messages must not pin its memory for good.
	keep int
}

// NewReadingArena returns an arena that keeps room for at most keep
// readings between batches.
func NewReadingArena(keep int) *ReadingArena {
	return &ReadingArena{keep: max(keep, 0)}
}

// Len is the number of readings lent since the last Reset.
func (a *ReadingArena) Len() int { return len(a.buf) }

// Cap is the number of readings the arena can lend without allocating.
func (a *ReadingArena) Cap() int { return cap(a.buf) }

// Reset takes back every slice lent since the last Reset, zeroes them (so
// they keep no strings alive and nothing of one batch reaches the next)
// and grows the array to what this round needed, up to the keep bound.
func (a *ReadingArena) Reset() {
	need := len(a.buf) + a.short
	clear(a.buf[:cap(a.buf)])
	a.buf, a.short = a.buf[:0], 0
	switch {
	case need > cap(a.buf) && need <= a.keep:
		a.buf = make([]Reading, 0, need)
	case cap(a.buf) > a.keep:
		a.buf = nil
	}
}

// spare is the free part of the array, empty, with its capacity.
func (a *ReadingArena) spare() []Reading { return a.buf[len(a.buf):len(a.buf)] }

// take lends the first n readings of the spare part, capped at n.
func (a *ReadingArena) take(n int) []Reading {
	l := len(a.buf)
	a.buf = a.buf[:l+n]
	return a.buf[l : l+n : l+n]
}

// Decode is DecodeMessage for a stream entry value held as a string, with
// the message's readings lent by the arena. It decodes the string in
// place: the decoder only reads its input (keys are folded in its own
// scratch buffer, and every string it keeps is a copy), so the copy that
// converting to []byte makes, a whole entry per message, is not needed.
func (a *ReadingArena) Decode(data string) (Message, error) {
	var m Message
	if len(data) > MaxMessageBytes {
		return m, fmt.Errorf("%w: %d bytes exceed %d", ErrInvalid, len(data), MaxMessageBytes)
	}
	d := decoder{data: unsafe.Slice(unsafe.StringData(data), len(data)), arena: a}
	err := d.entry(&m)
	if err != nil {
		return Message{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return m, nil
}
