package control

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"
)

// MaxCommandBytes bounds a command document; anything larger is refused
// before it is decoded.
const MaxCommandBytes = 64 << 10

// TargetStateNotice is the payload of CmdTargetState: the version the
// cloud now holds. Cleared is set when the target state was deleted.
type TargetStateNotice struct {
	Version   int64     `json:"version"`
	UpdatedAt time.Time `json:"updatedAt"`
	Cleared   bool      `json:"cleared,omitempty"`
}

// DecodeTargetStateNotice decodes a CmdTargetState payload. Unknown
// fields are ignored, so an older agent understands a newer cloud.
func DecodeTargetStateNotice(b []byte) (TargetStateNotice, error) {
	var n TargetStateNotice
	if err := decodeBounded(b, &n); err != nil {
		return n, fmt.Errorf("target-state notice: %w", err)
	}
	if n.Version < 0 {
		return n, fmt.Errorf("target-state notice: version must be >= 0, got %d", n.Version)
	}
	return n, nil
}

// Range is an inclusive range of msgId sequence numbers, [First, Last].
type Range struct {
	First uint64
	Last  uint64
}

// MarshalJSON writes a range as the pair [first, last].
func (r Range) MarshalJSON() ([]byte, error) {
	return fmt.Appendf(nil, "[%d,%d]", r.First, r.Last), nil
}

// UnmarshalJSON reads the pair [first, last].
func (r *Range) UnmarshalJSON(b []byte) error {
	var p []uint64
	if err := json.Unmarshal(b, &p); err != nil {
		return fmt.Errorf("range: %w", err)
	}
	if len(p) != 2 || p[0] > p[1] {
		return fmt.Errorf("range must be [first, last] with first <= last, got %s", clip(string(b)))
	}
	r.First, r.Last = p[0], p[1]
	return nil
}

// Contains reports whether seq is in the range.
func (r Range) Contains(seq uint64) bool { return seq >= r.First && seq <= r.Last }

// KeyReceipt lists the sequences of one key id (the kid of msgId
// "v2_{kid}_{sequence}", docs/codec.md) the cloud holds, as sorted,
// disjoint, non-adjacent ranges.
type KeyReceipt struct {
	KID    string  `json:"kid"`
	Ranges []Range `json:"ranges"`
}

// Contains reports whether the receipt covers seq.
func (k KeyReceipt) Contains(seq uint64) bool {
	i := sort.Search(len(k.Ranges), func(i int) bool { return k.Ranges[i].Last >= seq })
	return i < len(k.Ranges) && k.Ranges[i].Contains(seq)
}

// Receipts is the payload of CmdReceipts: the msgIds the cloud has
// appended to its stream (or recognised as duplicates of ones it holds)
// since its previous receipt to this agent. At is when it was sent (Unix
// ms).
type Receipts struct {
	At   int64        `json:"at"`
	Keys []KeyReceipt `json:"keys"`
}

// Limits of a receipt document, so a decoder's work is bounded.
const (
	maxReceiptKeys   = 64
	maxReceiptRanges = 4096
)

// DecodeReceipts decodes a CmdReceipts payload and checks that every
// key's ranges are sorted and disjoint.
func DecodeReceipts(b []byte) (Receipts, error) {
	var r Receipts
	if err := decodeBounded(b, &r); err != nil {
		return r, fmt.Errorf("receipts: %w", err)
	}
	if len(r.Keys) > maxReceiptKeys {
		return r, fmt.Errorf("receipts: at most %d keys, got %d", maxReceiptKeys, len(r.Keys))
	}
	total := 0
	for _, k := range r.Keys {
		if k.KID == "" {
			return r, errors.New("receipts: a key has no kid")
		}
		total += len(k.Ranges)
		for i := 1; i < len(k.Ranges); i++ {
			if k.Ranges[i].First <= k.Ranges[i-1].Last {
				return r, fmt.Errorf("receipts: ranges of kid %q are not sorted and disjoint", clip(k.KID))
			}
		}
	}
	if total > maxReceiptRanges {
		return r, fmt.Errorf("receipts: at most %d ranges, got %d", maxReceiptRanges, total)
	}
	return r, nil
}

// AddSeq adds seq to sorted, disjoint, non-adjacent ranges, merging
// neighbours, and returns the result.
func AddSeq(rs []Range, seq uint64) []Range {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].Last >= seq })
	if i < len(rs) && rs[i].Contains(seq) {
		return rs
	}
	joinLeft := i > 0 && rs[i-1].Last+1 == seq
	joinRight := i < len(rs) && seq+1 == rs[i].First
	switch {
	case joinLeft && joinRight:
		rs[i-1].Last = rs[i].Last
		return append(rs[:i], rs[i+1:]...)
	case joinLeft:
		rs[i-1].Last = seq
		return rs
	case joinRight:
		rs[i].First = seq
		return rs
	}
	rs = append(rs, Range{})
	copy(rs[i+1:], rs[i:])
	rs[i] = Range{First: seq, Last: seq}
	return rs
}

// decodeBounded decodes one JSON document of at most MaxCommandBytes.
func decodeBounded(b []byte, v any) error {
	if len(b) > MaxCommandBytes {
		return fmt.Errorf("document of %d bytes is over the %d-byte limit", len(b), MaxCommandBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data after the document")
	}
	return nil
}
