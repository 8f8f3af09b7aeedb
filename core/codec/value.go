package codec

import (
	"fmt"
	"strconv"
	"sync"
	"unicode/utf8"
)

// valueDecoder holds what the JSON and MessagePack decoders share: the limits,
// the running budgets and the compaction dictionary, once the marker is seen.
type valueDecoder struct {
	lim    Limits
	values int
	depth  int
	dict   []string // non-nil once the top-level marker has been read
	dictV  int

	stack []any  // JSON array elements, reused across arrays and payloads
	sbuf  []byte // JSON string unescaping scratch
	strs  strCache
}

// CompactionMarkerKey is the top-level key that marks a compacted payload;
// its value is the dictionary version. It is never itself compacted.
const CompactionMarkerKey = "_kc"

const markerKey = CompactionMarkerKey

var decoderPool = sync.Pool{New: func() any { return new(valueDecoder) }}

func getDecoder(lim Limits) *valueDecoder {
	d := decoderPool.Get().(*valueDecoder)
	d.lim = lim
	return d
}

func putDecoder(d *valueDecoder) {
	// Scratch that one large payload grew is dropped rather than pinned in
	// the pool; what is kept is cleared so it pins no decoded values.
	stack, sbuf := d.stack[:0], d.sbuf[:0]
	if cap(stack) > 4<<10 {
		stack = nil
	}
	clear(stack[:cap(stack)])
	if cap(sbuf) > 64<<10 {
		sbuf = nil
	}
	*d = valueDecoder{stack: stack, sbuf: sbuf}
	decoderPool.Put(d)
}

// count charges one value against the budget.
func (d *valueDecoder) count() error {
	d.values++
	if d.values > d.lim.MaxValues {
		return fmt.Errorf("%w: more than %d values", ErrTooLarge, d.lim.MaxValues)
	}
	return nil
}

func (d *valueDecoder) enter() error {
	d.depth++
	if d.depth > d.lim.MaxDepth {
		return fmt.Errorf("%w: more than %d levels", ErrTooDeep, d.lim.MaxDepth)
	}
	return nil
}

func (d *valueDecoder) setMarker(v any) error {
	var ver int64
	switch n := v.(type) {
	case int64:
		ver = n
	case uint64:
		ver = -1 // far beyond any version; reported below
	default:
		return fmt.Errorf("%w: %s must be an integer dictionary version, got %T", ErrMalformed, markerKey, v)
	}
	if ver < 1 || ver >= int64(len(dictVersionLen)) {
		return fmt.Errorf("%w: key-compaction dictionary version %v (known: 1..%d)", ErrUnsupported, v, DictVersion)
	}
	dict, err := dictionary(int(ver))
	if err != nil {
		return err
	}
	d.dict, d.dictV = dict, int(ver)
	return nil
}

// compactedKey interprets a string key of a compacted payload: a key that
// starts with an ASCII digit is a dictionary index in canonical decimal, a
// leading '~' is removed (it escapes a literal key that starts with a digit or
// '~'), and any other key is literal. kb may be a view of a buffer; the
// result never is.
func (d *valueDecoder) compactedKey(kb []byte, top bool) (string, error) {
	if len(kb) == 0 {
		return "", nil
	}
	var k string
	switch c := kb[0]; {
	case c >= '0' && c <= '9':
		i, ok := parseIndex(bytesString(kb))
		if !ok {
			return "", fmt.Errorf("%w: compacted key %q is not a canonical index", ErrMalformed, kb)
		}
		return d.indexKey(i)
	case c == '~':
		k = internKey(kb[1:])
	default:
		k = internKey(kb)
	}
	if top && k == markerKey {
		return "", fmt.Errorf("%w: escaped top-level key expands to the reserved %s", ErrMalformed, markerKey)
	}
	return k, nil
}

// expandLate applies key compaction to a tree decoded before the marker was
// seen. That happens when the marker is not the first top-level key, which is
// what JavaScript producers write: object keys that look like array indices
// ("0", "17") always enumerate before other keys, so {"_kc":1,"0":...}
// serializes with "_kc" last. Rebuilding the maps costs allocations, so the
// common order (marker first) is expanded while decoding instead.
func (d *valueDecoder) expandLate(v any, top bool) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			nk := k
			if k != "" {
				switch c := k[0]; {
				case c >= '0' && c <= '9':
					i, ok := parseIndex(k)
					if !ok {
						return nil, fmt.Errorf("%w: compacted key %q is not a canonical index", ErrMalformed, k)
					}
					var err error
					if nk, err = d.indexKey(i); err != nil {
						return nil, err
					}
				case c == '~':
					nk = k[1:]
				}
			}
			if top && nk == markerKey {
				return nil, fmt.Errorf("%w: escaped top-level key expands to the reserved %s", ErrMalformed, markerKey)
			}
			ne, err := d.expandLate(e, false)
			if err != nil {
				return nil, err
			}
			m[nk] = ne
		}
		if len(m) != len(x) {
			return nil, fmt.Errorf("%w: two keys expand to the same name", ErrMalformed)
		}
		return m, nil
	case []any:
		for i, e := range x {
			ne, err := d.expandLate(e, false)
			if err != nil {
				return nil, err
			}
			x[i] = ne
		}
		return x, nil
	}
	return v, nil
}

// parseIndex parses a canonical decimal (no sign, no leading zeros).
func parseIndex(s string) (uint64, bool) {
	if len(s) == 0 || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

func (d *valueDecoder) indexKey(i uint64) (string, error) {
	if i >= uint64(len(d.dict)) {
		return "", fmt.Errorf("%w: %d (dictionary v%d has %d names)", ErrUnknownIndex, i, d.dictV, len(d.dict))
	}
	return d.dict[i], nil
}

// intKey turns an integer map key of an uncompacted MessagePack payload into
// the decimal string a JSON object would carry.
func intKey(neg bool, u uint64) string {
	if neg {
		return strconv.FormatInt(int64(u), 10)
	}
	return strconv.FormatUint(u, 10)
}

// strCache de-duplicates short string values within one payload: a batch
// repeats its device names, units and quality flags in every reading. Each
// slot keeps the string boxed as an interface as well, because converting a
// string to any allocates its header: reusing the box makes a repeated value
// free, where a copy and a box per occurrence were half of the decoder's
// allocations.
type strCache [128]struct {
	s string
	v any
}

func (c *strCache) get(b []byte) any {
	if len(b) == 0 {
		return ""
	}
	if len(b) > 32 {
		return validString(b)
	}
	// FNV-1a over the bytes; the cache is small, so a collision only costs a copy.
	h := uint32(2166136261)
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	slot := &c[h%uint32(len(c))]
	if slot.v != nil && slot.s == string(b) {
		return slot.v
	}
	s := validString(b)
	slot.s, slot.v = s, s
	return slot.v
}

// validString copies b into a string, replacing each byte that is not part of
// valid UTF-8 with U+FFFD, as encoding/json does, so that every decoded string
// can be written as JSON and compares equal whichever format carried it.
func validString(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b)+8)
	for len(b) > 0 {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, b[:size]...)
		}
		b = b[size:]
	}
	return string(out)
}
