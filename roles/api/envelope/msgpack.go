package envelope

import (
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/telemetry"
)

// MapMsgpack is Map for a MessagePack custom envelope, read straight from
// its bytes instead of through codec.Decode's generic maps, which cost the
// subscriber two thirds of its time per message. It is the fast path of
// codec.Unwrap: b are the serialized bytes and lim the normalized limits
// Unwrap passes.
//
// It declines (false) whatever it is not certain codec.Decode followed by
// Map would accept and map to the same Batch: compaction, extensions, bin
// strings, integer keys, invalid UTF-8, a field of an unexpected type, any
// limit reached, any mapping error. The caller then takes the generic path,
// which also words the error. A differential fuzz test holds the two paths
// to that.
func MapMsgpack(t Topic, b []byte, lim codec.Limits) (Batch, bool) {
	if lim.MaxValues <= 0 || lim.MaxDepth <= 0 || lim.MaxContainerLen <= 0 {
		return Batch{}, false
	}
	s := scanner{b: b, lim: lim}
	batch, ok := s.envelope(t)
	if !ok || s.p != len(s.b) {
		return Batch{}, false
	}
	return batch, true
}

// scanner reads MessagePack under the generic decoder's rules: it counts
// values, nesting and container lengths as codec does, so that whatever it
// accepts is within the limits codec enforces.
type scanner struct {
	b      []byte
	p      int
	lim    codec.Limits
	values int
	depth  int
	// strs holds strings already copied out of this payload: a batch
	// repeats its device names, units, qualities and timestamps.
	strs [64]string
	mr   readingMapper
	// skipped counts readings with text values, as Map does.
	skipped int
}

// count charges one value against MaxValues, as codec does for every
// scalar, array and map (keys are not values).
func (s *scanner) count() bool {
	s.values++
	return s.values <= s.lim.MaxValues
}

func (s *scanner) uint(size int) (uint64, bool) {
	if len(s.b)-s.p < size {
		return 0, false
	}
	b := s.b[s.p : s.p+size]
	s.p += size
	switch size {
	case 1:
		return uint64(b[0]), true
	case 2:
		return uint64(binary.BigEndian.Uint16(b)), true
	case 4:
		return uint64(binary.BigEndian.Uint32(b)), true
	}
	return binary.BigEndian.Uint64(b), true
}

func (s *scanner) take(n uint64) ([]byte, bool) {
	if n > uint64(len(s.b)-s.p) {
		return nil, false
	}
	b := s.b[s.p : s.p+int(n)]
	s.p += int(n)
	return b, true
}

func isMap(c byte) bool   { return c >= 0x80 && c <= 0x8f || c == 0xde || c == 0xdf }
func isArray(c byte) bool { return c >= 0x90 && c <= 0x9f || c == 0xdc || c == 0xdd }

// header reads a map or array header and enters it; leave must follow its
// last element.
func (s *scanner) header(wantMap bool) (int, bool) {
	if s.p >= len(s.b) || !s.count() {
		return 0, false
	}
	c := s.b[s.p]
	s.p++
	var n uint64
	var ok bool
	switch {
	case wantMap && c >= 0x80 && c <= 0x8f, !wantMap && c >= 0x90 && c <= 0x9f:
		n, ok = uint64(c&0x0f), true
	case wantMap && c == 0xde, !wantMap && c == 0xdc:
		n, ok = s.uint(2)
	case wantMap && c == 0xdf, !wantMap && c == 0xdd:
		n, ok = s.uint(4)
	}
	if !ok {
		return 0, false
	}
	minBytes := uint64(1)
	if wantMap {
		minBytes = 2
	}
	if n > uint64(s.lim.MaxContainerLen) || n*minBytes > uint64(len(s.b)-s.p) {
		return 0, false
	}
	s.depth++
	if s.depth > s.lim.MaxDepth {
		return 0, false
	}
	return int(n), true
}

func (s *scanner) leave() { s.depth-- }

// key reads a map key. Only UTF-8 strings are accepted: codec also takes
// bin and integer keys, and repairs invalid UTF-8, which could make two
// different byte strings one (duplicate) key.
func (s *scanner) key() ([]byte, bool) {
	if s.p >= len(s.b) {
		return nil, false
	}
	c := s.b[s.p]
	s.p++
	var n uint64
	var ok bool
	switch {
	case c >= 0xa0 && c <= 0xbf:
		n, ok = uint64(c&0x1f), true
	case c >= 0xd9 && c <= 0xdb:
		n, ok = s.uint(1 << (c - 0xd9))
	}
	if !ok {
		return nil, false
	}
	k, ok := s.take(n)
	return k, ok && utf8.Valid(k)
}

// keySet detects duplicate keys in one map, which codec refuses. The
// known keys of a schema are bits; others are compared one by one, and a
// map with many of them is declined rather than searched.
type keySet struct {
	known uint16
	other [16][]byte
	n     int
}

func (k *keySet) addKnown(bit uint16) bool {
	if k.known&bit != 0 {
		return false
	}
	k.known |= bit
	return true
}

func (k *keySet) addOther(key []byte) bool {
	if k.n == len(k.other) {
		return false
	}
	for _, o := range k.other[:k.n] {
		if string(o) == string(key) {
			return false
		}
	}
	k.other[k.n] = key
	k.n++
	return true
}

type scalarKind uint8

const (
	scalarNull scalarKind = iota // nil, and floats codec turns into nil
	scalarBool
	scalarInt
	scalarUint // above math.MaxInt64, where codec yields a uint64
	scalarFloat
	scalarString
)

type scalar struct {
	kind scalarKind
	b    bool
	i    int64
	u    uint64
	f    float64
	s    []byte
}

// scalar reads one scalar as codec would type it. Containers, bin and
// extensions are declined.
func (s *scanner) scalar() (scalar, bool) {
	if s.p >= len(s.b) || !s.count() {
		return scalar{}, false
	}
	c := s.b[s.p]
	s.p++
	switch {
	case c <= 0x7f:
		return scalar{kind: scalarInt, i: int64(c)}, true
	case c >= 0xe0:
		return scalar{kind: scalarInt, i: int64(int8(c))}, true
	case c >= 0xa0 && c <= 0xbf:
		return s.str(uint64(c & 0x1f))
	}
	switch c {
	case 0xc0:
		return scalar{kind: scalarNull}, true
	case 0xc2, 0xc3:
		return scalar{kind: scalarBool, b: c == 0xc3}, true
	case 0xca:
		u, ok := s.uint(4)
		return float(float64(math.Float32frombits(uint32(u)))), ok
	case 0xcb:
		u, ok := s.uint(8)
		return float(math.Float64frombits(u)), ok
	case 0xcc, 0xcd, 0xce, 0xcf:
		u, ok := s.uint(1 << (c - 0xcc))
		if u > math.MaxInt64 {
			return scalar{kind: scalarUint, u: u}, ok
		}
		return scalar{kind: scalarInt, i: int64(u)}, ok
	case 0xd0, 0xd1, 0xd2, 0xd3:
		size := 1 << (c - 0xd0)
		u, ok := s.uint(size)
		var i int64
		switch size {
		case 1:
			i = int64(int8(u))
		case 2:
			i = int64(int16(u))
		case 4:
			i = int64(int32(u))
		default:
			i = int64(u)
		}
		return scalar{kind: scalarInt, i: i}, ok
	case 0xd9, 0xda, 0xdb:
		n, ok := s.uint(1 << (c - 0xd9))
		if !ok {
			return scalar{}, false
		}
		return s.str(n)
	}
	return scalar{}, false
}

func float(f float64) scalar {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return scalar{kind: scalarNull}
	}
	return scalar{kind: scalarFloat, f: f}
}

func (s *scanner) str(n uint64) (scalar, bool) {
	b, ok := s.take(n)
	return scalar{kind: scalarString, s: b}, ok
}

// text is a string scalar as a Go string, copied out of the payload (which
// may be a pooled buffer); false for invalid UTF-8, which codec repairs.
func (s *scanner) text(sc scalar) (string, bool) {
	b := sc.s
	if len(b) == 0 {
		return "", true
	}
	if len(b) > 48 {
		return string(b), utf8.Valid(b)
	}
	h := uint32(2166136261)
	for _, x := range b {
		h = (h ^ uint32(x)) * 16777619
	}
	slot := &s.strs[h%uint32(len(s.strs))]
	if *slot == string(b) {
		return *slot, true
	}
	if !utf8.Valid(b) {
		return "", false
	}
	*slot = string(b)
	return *slot, true
}

// stringField is a reading's string field: "" for a scalar of another
// type, as Map's type assertion makes of it.
func (s *scanner) stringField() (string, bool) {
	sc, ok := s.scalar()
	if !ok {
		return "", false
	}
	if sc.kind != scalarString {
		return "", true
	}
	return s.text(sc)
}

// skip passes over a value of a key the schema does not use, checking
// what codec checks: limits, well-formed and unique keys, no extensions.
func (s *scanner) skip() bool {
	if s.p >= len(s.b) {
		return false
	}
	switch c := s.b[s.p]; {
	case isMap(c):
		n, ok := s.header(true)
		if !ok {
			return false
		}
		var keys keySet
		for range n {
			k, ok := s.key()
			if !ok || !keys.addOther(k) || !s.skip() {
				return false
			}
		}
		s.leave()
		return true
	case isArray(c):
		n, ok := s.header(false)
		if !ok {
			return false
		}
		for range n {
			if !s.skip() {
				return false
			}
		}
		s.leave()
		return true
	case c >= 0xc4 && c <= 0xc6: // bin
		if !s.count() {
			return false
		}
		s.p++
		n, ok := s.uint(1 << (c - 0xc4))
		if !ok {
			return false
		}
		_, ok = s.take(n)
		return ok
	}
	_, ok := s.scalar()
	return ok
}

const (
	envMsgID uint16 = 1 << iota
	envProtocol
	envTimestamp
	envMessages
)

func (s *scanner) envelope(t Topic) (Batch, bool) {
	n, ok := s.header(true)
	if !ok {
		return Batch{}, false
	}
	var (
		b        Batch
		keys     keySet
		protocol string
		envTS    *telemetry.Timestamp
		g        = grouper{agent: t.AgentUUID}
	)
	for range n {
		k, ok := s.key()
		if !ok {
			return Batch{}, false
		}
		switch string(k) {
		case "msgId":
			sc, ok := s.scalar()
			if !ok || !keys.addKnown(envMsgID) || sc.kind != scalarString {
				return Batch{}, false
			}
			id, ok := s.text(sc)
			if !ok {
				return Batch{}, false
			}
			if _, _, err := codec.ParseMsgID(id); err != nil {
				return Batch{}, false
			}
			b.MsgID = id
		case "protocol":
			if protocol, ok = s.stringField(); !ok || !keys.addKnown(envProtocol) {
				return Batch{}, false
			}
		case "timestamp":
			sc, ok := s.scalar()
			if !ok || !keys.addKnown(envTimestamp) {
				return Batch{}, false
			}
			raw, ok := s.timestampValue(sc)
			if !ok {
				return Batch{}, false
			}
			ts, err := timestamp(raw)
			if err != nil {
				return Batch{}, false
			}
			envTS = ts
		case "messages":
			if !keys.addKnown(envMessages) || !s.messages(&g) {
				return Batch{}, false
			}
		case codec.CompactionMarkerKey:
			return Batch{}, false
		default:
			if !keys.addOther(k) || !s.skip() {
				return Batch{}, false
			}
		}
	}
	s.leave()
	if keys.known&envMessages == 0 {
		return Batch{}, false
	}
	if protocol == "" {
		protocol, _, _ = strings.Cut(t.Endpoint, "/")
	}
	b.Messages = g.finish(protocol, envTS, b.MsgID)
	b.Skipped = s.skipped
	return b, len(b.Messages) > 0
}

// timestampValue is a timestamp scalar as the value codec would produce
// for it; nulls and booleans are declined.
func (s *scanner) timestampValue(sc scalar) (any, bool) {
	switch sc.kind {
	case scalarString:
		return s.text(sc)
	case scalarInt:
		return sc.i, true
	case scalarUint:
		return sc.u, true
	case scalarFloat:
		return sc.f, true
	}
	return nil, false
}

func (s *scanner) messages(g *grouper) bool {
	n, ok := s.header(false)
	if !ok {
		return false
	}
	for range n {
		m, ok := s.header(true)
		if !ok {
			return false
		}
		var keys keySet
		for range m {
			k, ok := s.key()
			if !ok {
				return false
			}
			if string(k) == "readings" {
				if !keys.addKnown(1) || !s.readings(g) {
					return false
				}
				continue
			}
			if !keys.addOther(k) || !s.skip() {
				return false
			}
		}
		s.leave()
		if keys.known == 0 {
			return false
		}
	}
	s.leave()
	return true
}

const (
	rdDeviceName uint16 = 1 << iota
	rdDeviceID
	rdMetric
	rdUnit
	rdQuality
	rdValue
	rdTimestamp
	rdAnomalyScore
)

func (s *scanner) readings(g *grouper) bool {
	n, ok := s.header(false)
	if !ok {
		return false
	}
	if g.hint == 0 {
		g.hint = n
	}
	for range n {
		var f fields
		if !s.reading(&f) {
			return false
		}
		dev, r, err := s.mr.build(&f)
		if errors.Is(err, errTextValue) {
			s.skipped++
			continue
		}
		if err != nil {
			return false
		}
		g.add(dev, r)
	}
	s.leave()
	return true
}

func (s *scanner) reading(f *fields) bool {
	n, ok := s.header(true)
	if !ok {
		return false
	}
	var keys keySet
	for range n {
		k, ok := s.key()
		if !ok {
			return false
		}
		var bit uint16
		var dst *string
		switch string(k) {
		case "deviceName":
			bit, dst = rdDeviceName, &f.deviceName
		case "deviceId":
			bit, dst = rdDeviceID, &f.deviceID
		case "metric":
			bit, dst = rdMetric, &f.metric
		case "unit":
			bit, dst = rdUnit, &f.unit
		case "quality":
			bit, dst = rdQuality, &f.quality
		case "value":
			bit = rdValue
			if !s.value(f) {
				return false
			}
		case "anomaly_score":
			bit = rdAnomalyScore
			sc, ok := s.scalar()
			if !ok {
				return false
			}
			switch sc.kind {
			case scalarInt:
				f.hasScore, f.score = true, float64(sc.i)
			case scalarUint:
				f.hasScore, f.score = true, float64(sc.u)
			case scalarFloat:
				f.hasScore, f.score = true, sc.f
			case scalarString:
				// Consumed only: a text score is left out, as fieldsOf does.
				if _, ok = s.text(sc); !ok {
					return false
				}
			}
		case "timestamp":
			bit = rdTimestamp
			sc, ok := s.scalar()
			if !ok {
				return false
			}
			switch sc.kind {
			case scalarNull:
			case scalarString:
				if f.tsText, ok = s.text(sc); !ok {
					return false
				}
				f.hasTS = true
			default:
				if f.tsRaw, ok = s.timestampValue(sc); !ok {
					return false
				}
				f.hasTS = true
			}
		default:
			if !keys.addOther(k) || !s.skip() {
				return false
			}
			continue
		}
		if !keys.addKnown(bit) {
			return false
		}
		if dst != nil {
			if *dst, ok = s.stringField(); !ok {
				return false
			}
		}
	}
	s.leave()
	return true
}

// value reads a reading's value into f as fieldsOf would type it.
func (s *scanner) value(f *fields) bool {
	sc, ok := s.scalar()
	if !ok {
		return false
	}
	switch sc.kind {
	case scalarNull:
	case scalarBool:
		f.value = valueNumber
		if sc.b {
			f.num = 1
		}
	case scalarInt:
		f.value, f.num = valueNumber, float64(sc.i)
	case scalarUint:
		f.value, f.num = valueNumber, float64(sc.u)
	case scalarFloat:
		f.value, f.num = valueNumber, sc.f
	case scalarString:
		if f.str, ok = s.text(sc); !ok {
			return false
		}
		f.value = valueString
	}
	return true
}
