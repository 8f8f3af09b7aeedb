package streamstore

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// ID is a parsed stream entry id: the Unix time in milliseconds the entry
// was added at, and a sequence number telling apart entries of the same
// millisecond. Ids order by (MS, Seq).
type ID struct {
	MS  uint64
	Seq uint64
}

// MinID and MaxID bound every id. "0-0" is never an entry's id.
var (
	MinID = ID{}
	MaxID = ID{MS: math.MaxUint64, Seq: math.MaxUint64}
)

var errBadID = errors.New("invalid stream id")

// ParseID parses "ms-seq", or "ms" meaning "ms-0", as Redis prints ids:
// decimal digits only (no sign, no spaces), each part fitting 64 bits. The
// range shorthands "-", "+", "$" and ">" are not ids.
func ParseID(s string) (ID, error) {
	msPart, seqPart, hasSeq := strings.Cut(s, "-")
	ms, err := parseUint(msPart)
	if err != nil {
		return ID{}, fmt.Errorf("%w %q", errBadID, s)
	}
	var seq uint64
	if hasSeq {
		if seq, err = parseUint(seqPart); err != nil {
			return ID{}, fmt.Errorf("%w %q", errBadID, s)
		}
	}
	return ID{MS: ms, Seq: seq}, nil
}

// parseUint accepts 1 to 20 ASCII digits; strconv.ParseUint alone would
// also take "0x1f" with base 0 and "_" separators, and nothing else here
// must differ from Redis.
func parseUint(s string) (uint64, error) {
	if s == "" || len(s) > 20 {
		return 0, errBadID
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errBadID
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// String formats id as "ms-seq".
func (id ID) String() string {
	var b [41]byte
	out := strconv.AppendUint(b[:0], id.MS, 10)
	out = append(out, '-')
	out = strconv.AppendUint(out, id.Seq, 10)
	return string(out)
}

// Compare returns -1, 0 or +1 as id sorts before, equal to or after o.
func (id ID) Compare(o ID) int {
	switch {
	case id.MS < o.MS:
		return -1
	case id.MS > o.MS:
		return 1
	case id.Seq < o.Seq:
		return -1
	case id.Seq > o.Seq:
		return 1
	}
	return 0
}

// Next returns the smallest id after id (Redis's "id + 0-1"): the sequence
// plus one, carrying into the millisecond. MaxID has no successor and is
// returned unchanged.
func (id ID) Next() ID {
	switch {
	case id.Seq < math.MaxUint64:
		return ID{MS: id.MS, Seq: id.Seq + 1}
	case id.MS < math.MaxUint64:
		return ID{MS: id.MS + 1}
	}
	return id
}

// Prev returns the largest id before id; MinID is returned unchanged.
func (id ID) Prev() ID {
	switch {
	case id.Seq > 0:
		return ID{MS: id.MS, Seq: id.Seq - 1}
	case id.MS > 0:
		return ID{MS: id.MS - 1, Seq: math.MaxUint64}
	}
	return id
}

// Time returns the time the entry was added, by the adding server's clock,
// at millisecond precision. Milliseconds past year 292 million are clamped.
func (id ID) Time() time.Time {
	if id.MS > math.MaxInt64 {
		return time.UnixMilli(math.MaxInt64)
	}
	return time.UnixMilli(int64(id.MS))
}

// IDTime parses id and returns the time its entry was added; lag behind real
// time is time.Since(IDTime(oldestUnprocessedID)).
func IDTime(id string) (time.Time, error) {
	p, err := ParseID(id)
	if err != nil {
		return time.Time{}, err
	}
	return p.Time(), nil
}

// CompareIDs parses and compares two ids like ID.Compare.
func CompareIDs(a, b string) (int, error) {
	pa, err := ParseID(a)
	if err != nil {
		return 0, err
	}
	pb, err := ParseID(b)
	if err != nil {
		return 0, err
	}
	return pa.Compare(pb), nil
}

// NextID parses id and returns its successor (ID.Next) as a string.
func NextID(id string) (string, error) {
	p, err := ParseID(id)
	if err != nil {
		return "", err
	}
	return p.Next().String(), nil
}
