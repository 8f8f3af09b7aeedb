package logship

import (
	"sync"
)

// line is one log entry, encoded once as its NDJSON line.
type line struct {
	seq  uint64
	json []byte
}

// buffer holds the lines waiting for the cloud, bounded in lines and in
// bytes: adding past either bound drops the oldest lines and counts them.
// A batch being uploaded stays in the buffer until the cloud took it, so
// the bounds cover it too; lines that were dropped meanwhile are simply
// not removed twice (see ack).
type buffer struct {
	maxLines int
	maxBytes int

	mu      sync.Mutex
	lines   []line
	bytes   int
	nextSeq uint64
	dropped int64
}

func newBuffer(maxLines, maxBytes int) *buffer {
	return &buffer{maxLines: maxLines, maxBytes: maxBytes, nextSeq: 1}
}

// add appends one encoded line and reports how many old lines it
// dropped. A line larger than the byte bound alone is dropped itself.
func (b *buffer) add(js []byte) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(js) > b.maxBytes {
		b.dropped++
		return 1
	}
	b.lines = append(b.lines, line{seq: b.nextSeq, json: js})
	b.nextSeq++
	b.bytes += len(js)
	n := 0
	for len(b.lines) > b.maxLines || b.bytes > b.maxBytes {
		b.bytes -= len(b.lines[0].json)
		b.lines[0] = line{}
		b.lines = b.lines[1:]
		n++
	}
	b.dropped += int64(n)
	// Re-slicing from the front never frees the array; copy to a fresh
	// one once most of it is dead.
	if cap(b.lines) > 2*b.maxLines && len(b.lines) < cap(b.lines)/4 {
		b.lines = append(make([]line, 0, len(b.lines)+16), b.lines...)
	}
	return n
}

// batch returns the oldest lines, at most maxLines of them and at most
// maxBytes in all (but always one), and the sequence of the last.
func (b *buffer) batch(maxLines, maxBytes int) ([][]byte, uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out [][]byte
	var last uint64
	size := 0
	for _, l := range b.lines {
		if len(out) == maxLines || (len(out) > 0 && size+len(l.json)+1 > maxBytes) {
			break
		}
		out = append(out, l.json)
		size += len(l.json) + 1
		last = l.seq
	}
	return out, last
}

// ack removes the lines up to seq, the cloud having taken them.
func (b *buffer) ack(seq uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	i := 0
	for i < len(b.lines) && b.lines[i].seq <= seq {
		b.bytes -= len(b.lines[i].json)
		b.lines[i] = line{}
		i++
	}
	b.lines = b.lines[i:]
}

// discard drops the lines up to seq without sending them (a batch the
// cloud refuses for good) and counts them.
func (b *buffer) discard(seq uint64) int {
	b.mu.Lock()
	n := 0
	for n < len(b.lines) && b.lines[n].seq <= seq {
		n++
	}
	b.dropped += int64(n)
	b.mu.Unlock()
	b.ack(seq)
	return n
}

// clear empties the buffer (shipping turned off); the lines are not
// counted as dropped: nobody asked for them any more.
func (b *buffer) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines, b.bytes = nil, 0
}

// stats returns the lines and bytes held and the lines dropped so far.
func (b *buffer) stats() (lines, bytes int, dropped int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.lines), b.bytes, b.dropped
}
