package telemetry

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// CompactPrefix opens a stream entry value in the compact form, version 1
// (docs/stream-contract.md, section Compact entries). A JSON value never
// starts with a NUL byte, so the two forms cannot be confused, and the
// second byte numbers the form's version: a later layout takes a new one.
const CompactPrefix = "\x00\x01"

// IsCompact reports whether a stream entry value is in the compact form
// (of any version: a value that opens with NUL is not JSON).
func IsCompact(data string) bool { return len(data) > 0 && data[0] == 0 }

// Flags of a reading in the compact form.
const (
	cfValue       = 1 << iota // 8-byte value follows; absent: null
	cfTime                    // own timestamp follows; absent: the message's
	cfScore                   // 8-byte anomaly score follows
	cfUnit                    // unit string follows
	cfQuality                 // quality string follows
	cfSameUnit                // unit is the previous reading's
	cfSameQuality             // quality is the previous reading's
	cfKnown       = 1<<iota - 1
)

// minYear and maxYear bound the timestamps the compact form holds: those
// the JSON form writes as RFC 3339 that parses back (appendTimestamp).
const (
	minYear = 0
	maxYear = 9999
)

// AppendCompactEntry appends m in the compact stream entry form, which
// ingest decodes without parsing text: its numbers are IEEE 754 bits and
// its times Unix milliseconds. JSON decoding was the ingest workers'
// largest cost per entry, and the JSON entry is about three times the
// bytes that Redis copies on append and on every read.
//
// Decoding the result gives the message that decoding m's
// AppendEntryJSON gives (FuzzCompactMatchesJSON): times to the
// millisecond, readings sharing the message's instant without a timestamp
// of their own. false means m holds something that form alone writes
// (invalid UTF-8, which JSON replaces, a value JSON refuses, a year
// outside 0..9999, no readings); dst is then returned unchanged and the
// caller writes the JSON form.
func (m *Message) AppendCompactEntry(dst []byte) ([]byte, bool) {
	start := len(dst)
	fail := func() ([]byte, bool) { return dst[:start], false }
	if len(m.Readings) == 0 {
		return fail()
	}
	dst = append(dst, CompactPrefix...)
	var ok bool
	for _, s := range [...]string{m.AgentUUID, m.DeviceName, m.Protocol, m.MsgID} {
		if dst, ok = appendCompactString(dst, s); !ok {
			return fail()
		}
	}
	var base int64
	if m.Timestamp == nil {
		dst = append(dst, 0)
	} else {
		if base, ok = compactMillis(m.Timestamp.Time); !ok {
			return fail()
		}
		dst = append(dst, 1)
		dst = binary.AppendVarint(dst, base)
	}
	dst = binary.AppendUvarint(dst, uint64(len(m.Readings)))
	for i := range m.Readings {
		r := &m.Readings[i]
		var flags byte
		if r.Value != nil {
			if !finite(*r.Value) {
				return fail()
			}
			flags |= cfValue
		}
		ownTime := r.Timestamp != nil && !m.sharesTime(r)
		var ms int64
		if ownTime {
			if ms, ok = compactMillis(r.Timestamp.Time); !ok {
				return fail()
			}
			flags |= cfTime
		}
		if r.AnomalyScore != nil {
			if !finite(*r.AnomalyScore) {
				return fail()
			}
			flags |= cfScore
		}
		switch {
		case r.Unit == "":
		case i > 0 && r.Unit == m.Readings[i-1].Unit:
			flags |= cfSameUnit
		default:
			flags |= cfUnit
		}
		switch {
		case r.Quality == "":
		case i > 0 && r.Quality == m.Readings[i-1].Quality:
			flags |= cfSameQuality
		default:
			flags |= cfQuality
		}
		dst = append(dst, flags)
		if dst, ok = appendCompactString(dst, r.Name); !ok {
			return fail()
		}
		if flags&cfValue != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(*r.Value))
		}
		if flags&cfUnit != 0 {
			if dst, ok = appendCompactString(dst, r.Unit); !ok {
				return fail()
			}
		}
		if flags&cfQuality != 0 {
			if dst, ok = appendCompactString(dst, r.Quality); !ok {
				return fail()
			}
		}
		if ownTime {
			dst = binary.AppendVarint(dst, ms)
		}
		if flags&cfScore != 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(*r.AnomalyScore))
		}
	}
	return dst, true
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// compactMillis is t in Unix milliseconds, floored as the JSON form's
// milliseconds are; false for a year the JSON form cannot write back.
func compactMillis(t time.Time) (int64, bool) {
	if y := t.UTC().Year(); y < minYear || y > maxYear {
		return 0, false
	}
	return t.UnixMilli(), true
}

// appendCompactString appends s with its length; false for invalid
// UTF-8, which the JSON form would have replaced.
func appendCompactString(dst []byte, s string) ([]byte, bool) {
	if !utf8.ValidString(s) {
		return dst, false
	}
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...), true
}

var errCompact = errors.New("malformed compact entry")

// compactMessage decodes a compact entry (prefix included) into m. It
// refuses what AppendCompactEntry never writes (unknown flags, invalid
// UTF-8, values that are not finite numbers, bytes left over), so every
// message it returns is one a JSON entry could carry.
func (d *decoder) compactMessage(m *Message) error {
	if len(d.data) < len(CompactPrefix) || string(d.data[:len(CompactPrefix)]) != CompactPrefix {
		if len(d.data) > 1 {
			return fmt.Errorf("compact entry version %d is unknown to this version of edgeplat", d.data[1])
		}
		return fmt.Errorf("%w: truncated prefix", errCompact)
	}
	d.pos = len(CompactPrefix)
	for _, dst := range [...]*string{&m.AgentUUID, &m.DeviceName, &m.Protocol, &m.MsgID} {
		b, err := d.compactBytes()
		if err != nil {
			return err
		}
		*dst = string(b)
	}
	if d.pos >= len(d.data) {
		return d.compactErr("missing timestamp flag")
	}
	switch d.data[d.pos] {
	case 0:
		d.pos++
	case 1:
		d.pos++
		t, err := d.compactTime()
		if err != nil {
			return err
		}
		m.Timestamp = &Timestamp{t}
	default:
		return d.compactErr("unknown timestamp flag")
	}
	n, err := d.compactUvarint()
	if err != nil {
		return err
	}
	// Each reading takes at least two bytes (flags, name length): a count
	// beyond that is a lie that must not size an allocation.
	if n == 0 || n > uint64(len(d.data)-d.pos)/2 {
		return d.compactErr("reading count out of range")
	}
	rs := d.compactReadings(int(n))
	var unit, quality string
	for i := range rs {
		r := &rs[i]
		if d.pos >= len(d.data) {
			return d.compactErr("truncated reading")
		}
		flags := d.data[d.pos]
		d.pos++
		if flags&^cfKnown != 0 || flags&(cfUnit|cfSameUnit) == cfUnit|cfSameUnit ||
			flags&(cfQuality|cfSameQuality) == cfQuality|cfSameQuality || (i == 0 && flags&(cfSameUnit|cfSameQuality) != 0) {
			return d.compactErr("invalid reading flags")
		}
		b, err := d.compactBytes()
		if err != nil {
			return err
		}
		r.Name = string(b)
		if flags&cfValue != 0 {
			if r.Value, err = d.compactFloat(); err != nil {
				return err
			}
		}
		if err := d.compactRepeated(flags&cfUnit != 0, flags&cfSameUnit != 0, &unit); err != nil {
			return err
		}
		if err := d.compactRepeated(flags&cfQuality != 0, flags&cfSameQuality != 0, &quality); err != nil {
			return err
		}
		r.Unit, r.Quality = unit, quality
		if flags&cfTime != 0 {
			t, err := d.compactTime()
			if err != nil {
				return err
			}
			r.Timestamp = &Timestamp{t}
		}
		if flags&cfScore != 0 {
			if r.AnomalyScore, err = d.compactFloat(); err != nil {
				return err
			}
		}
	}
	m.Readings = rs
	if d.pos != len(d.data) {
		return d.compactErr("data after the last reading")
	}
	return nil
}

// compactRepeated reads a unit or quality: a string of its own (own), the
// previous reading's (same) or none. *prev, the previous reading's, becomes
// this reading's.
func (d *decoder) compactRepeated(own, same bool, prev *string) error {
	switch {
	case own:
		b, err := d.compactBytes()
		if err != nil {
			return err
		}
		*prev = d.intern(b)
	case !same:
		*prev = ""
	}
	return nil
}

// compactReadings is n zeroed readings, lent by the arena when it has the
// room (ReadingArena), else allocated and counted for the next Reset.
func (d *decoder) compactReadings(n int) []Reading {
	if d.arena == nil {
		return make([]Reading, n)
	}
	if cap(d.arena.spare()) < n {
		d.arena.short += n
		return make([]Reading, n)
	}
	rs := d.arena.take(n)
	// A decode that failed may have written into the spare room.
	clear(rs)
	return rs
}

func (d *decoder) compactErr(what string) error {
	return fmt.Errorf("%w at offset %d: %s", errCompact, d.pos, what)
}

func (d *decoder) compactUvarint() (uint64, error) {
	v, n := binary.Uvarint(d.data[d.pos:])
	if n <= 0 {
		return 0, d.compactErr("malformed length")
	}
	d.pos += n
	return v, nil
}

// compactBytes reads a string; the result aliases the input.
func (d *decoder) compactBytes() ([]byte, error) {
	n, err := d.compactUvarint()
	if err != nil {
		return nil, err
	}
	if n > uint64(len(d.data)-d.pos) {
		return nil, d.compactErr("string beyond the end")
	}
	b := d.data[d.pos : d.pos+int(n)]
	d.pos += int(n)
	if !utf8.Valid(b) {
		return nil, d.compactErr("string is not UTF-8")
	}
	return b, nil
}

func (d *decoder) compactTime() (time.Time, error) {
	ms, n := binary.Varint(d.data[d.pos:])
	if n <= 0 {
		return time.Time{}, d.compactErr("malformed timestamp")
	}
	d.pos += n
	t := time.UnixMilli(ms).UTC()
	if y := t.Year(); y < minYear || y > maxYear {
		return time.Time{}, d.compactErr("timestamp out of range")
	}
	return t, nil
}

func (d *decoder) compactFloat() (*float64, error) {
	if len(d.data)-d.pos < 8 {
		return nil, d.compactErr("truncated number")
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.data[d.pos:]))
	d.pos += 8
	if !finite(v) {
		return nil, d.compactErr("number is not finite")
	}
	return d.newFloat(v), nil
}
