package memory

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/edgeplat/edgeplat/core/streamstore"
)

// stream is one stream: entries in id order (trimming only ever removes a
// prefix, and there is no XDEL, so a slice suffices), the last id it
// generated, and its consumer groups.
type stream struct {
	entries []entry
	lastID  streamstore.ID
	groups  map[string]*group
	// wake is closed by the next append (or the stream's deletion) and then
	// cleared; readers that found nothing wait on it.
	wake chan struct{}
	// bytes is what the stream accounts for in Store.used, so Delete can
	// give it back.
	bytes int64
}

type entry struct {
	id     streamstore.ID
	idStr  string
	values map[string]string
	size   int64
}

// group is a consumer group. Its pending entries list (PEL) is a map for
// lookups plus the ids in ascending order for scans. Entries only join the
// PEL through ReadGroup, with ids above every id already in it, so order is
// appended to, never inserted into; acknowledged ids stay in order as
// tombstones (absent from pel) until compaction.
type group struct {
	lastDelivered streamstore.ID
	pel           map[streamstore.ID]*nack
	order         []streamstore.ID
}

// nack is a pending entry: who has it, since when, how many deliveries.
type nack struct {
	consumer  string
	delivered time.Time
	count     int64
}

func newStream() *stream {
	return &stream{groups: make(map[string]*group)}
}

// search returns the index of the first entry with id >= from.
func (st *stream) search(from streamstore.ID) int {
	i, _ := slices.BinarySearchFunc(st.entries, from, func(e entry, id streamstore.ID) int { return e.id.Compare(id) })
	return i
}

func (st *stream) find(id streamstore.ID) (*entry, bool) {
	i := st.search(id)
	if i < len(st.entries) && st.entries[i].id == id {
		return &st.entries[i], true
	}
	return nil, false
}

// after returns the index of the first entry with id > id.
func (st *stream) after(id streamstore.ID) int {
	if id == streamstore.MaxID {
		return len(st.entries)
	}
	return st.search(id.Next())
}

// wakeReaders wakes every reader blocked on st.
func (st *stream) wakeReaders() {
	if st.wake != nil {
		close(st.wake)
		st.wake = nil
	}
}

// waitChan returns the channel the next append closes.
func (st *stream) waitChan() chan struct{} {
	if st.wake == nil {
		st.wake = make(chan struct{})
	}
	return st.wake
}

// nextID generates the id of an entry appended after last exactly as Redis
// does: the current millisecond with sequence 0, or, when the clock has not
// moved past last (same millisecond, or the clock went backwards), last's
// successor.
func nextID(last streamstore.ID, now time.Time) (streamstore.ID, error) {
	ms := uint64(max(now.UnixMilli(), 0))
	if ms > last.MS {
		return streamstore.ID{MS: ms}, nil
	}
	if last == streamstore.MaxID {
		return streamstore.ID{}, errors.New("the stream has exhausted the last possible id")
	}
	return last.Next(), nil
}

func entrySize(id string, values map[string]string) int64 {
	n := int64(entryOverhead + len(id))
	for k, v := range values {
		n += int64(fieldOverhead + len(k) + len(v))
	}
	return n
}

// readNew delivers up to count undelivered entries to consumer.
func (g *group) readNew(st *stream, consumer string, count int, now time.Time) []streamstore.Entry {
	i := st.after(g.lastDelivered)
	n := min(count, len(st.entries)-i)
	if n <= 0 {
		return nil
	}
	out := make([]streamstore.Entry, n)
	for k := range n {
		e := &st.entries[i+k]
		out[k] = streamstore.Entry{ID: e.idStr, Values: maps.Clone(e.values)}
		g.pel[e.id] = &nack{consumer: consumer, delivered: now, count: 1}
		g.order = append(g.order, e.id)
	}
	g.lastDelivered = st.entries[i+n-1].id
	return out
}

// ack removes id from the PEL, reporting whether it was there.
func (g *group) ack(id streamstore.ID) bool {
	if _, ok := g.pel[id]; !ok {
		return false
	}
	delete(g.pel, id)
	g.compact()
	return true
}

// compact drops tombstones from order: the leading ones at once (cheap, and
// it keeps the oldest pending id at order[0]), the rest when they are more
// than half.
func (g *group) compact() {
	i := 0
	for i < len(g.order) {
		if _, ok := g.pel[g.order[i]]; ok {
			break
		}
		i++
	}
	if i > 0 {
		g.order = g.order[i:]
	}
	if len(g.order) > 64 && len(g.order) > 2*len(g.pel) {
		live := make([]streamstore.ID, 0, len(g.pel)+len(g.pel)/2)
		for _, id := range g.order {
			if _, ok := g.pel[id]; ok {
				live = append(live, id)
			}
		}
		g.order = live
	}
}

// oldestPending returns the smallest pending id.
func (g *group) oldestPending() (streamstore.ID, bool) {
	if len(g.order) == 0 {
		return streamstore.ID{}, false
	}
	return g.order[0], true // compact keeps a live id first
}

// searchPEL returns the index in order of the first id >= from.
func (g *group) searchPEL(from streamstore.ID) int {
	i, _ := slices.BinarySearchFunc(g.order, from, streamstore.ID.Compare)
	return i
}

// lag counts the entries the group has not delivered yet.
func (g *group) lag(st *stream) int64 {
	return int64(len(st.entries) - st.after(g.lastDelivered))
}

// trimBefore removes the entries with ids below minID and returns how many
// and how many bytes went.
func (st *stream) trimBefore(minID streamstore.ID) (n int, bytes int64) {
	n = st.search(minID)
	for i := range n {
		bytes += st.entries[i].size
		st.entries[i] = entry{} // let the values go before the array does
	}
	st.entries = st.entries[n:]
	switch {
	case len(st.entries) == 0:
		st.entries = nil
	case cap(st.entries) > 1024 && len(st.entries) < cap(st.entries)/4:
		st.entries = slices.Clone(st.entries) // give back the trimmed head
	}
	return n, bytes
}
