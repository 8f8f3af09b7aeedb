package telemetry

import (
	"errors"
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/edgeplat/edgeplat/core/codec"
)

// decodeMessage decodes one stream entry value into m, accepting exactly
// what json.Unmarshal into a Message accepts and producing the same value.
//
// Ingest workers decode every entry, and encoding/json's reflection was a
// third of their CPU. The schema is fixed and small, so this reads it
// directly: one pass, no reflection, no intermediate values. The rules of
// encoding/json it keeps, checked against it by FuzzDecodeMatchesStdlib:
// the whole input must be valid JSON (values of unknown keys included, at
// most maxDepth deep); keys match field names exactly or, failing that,
// case-insensitively; a repeated key's last value wins; null leaves a
// string unchanged and sets a pointer or slice to nil; invalid UTF-8 and
// lone surrogates in strings become U+FFFD; a value of the wrong type, or a
// number out of float64's range, is an error.
func decodeMessage(data []byte, m *Message) error {
	d := decoder{data: data}
	return d.entry(m)
}

// entry decodes a whole stream entry value, in either form: compact
// (CompactPrefix) or JSON.
func (d *decoder) entry(m *Message) error {
	if len(d.data) > 0 && d.data[0] == 0 {
		return d.compactMessage(m)
	}
	d.ws()
	if err := d.message(m); err != nil {
		return err
	}
	d.ws()
	if d.pos != len(d.data) {
		return d.syntax("data after the top-level value")
	}
	return nil
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

type decoder struct {
	data  []byte
	pos   int
	depth int
	buf   []byte // scratch for keys and escaped strings
	// floats hands out the readings' values: one allocation for many
	// instead of one per reading. A full slab is replaced, never grown, so
	// the pointers into it stay valid.
	floats []float64
	// interned holds the units and qualities met so far: a message repeats
	// a few of them over its readings, and each was an allocation.
	interned  [16]string
	ninterned int
	// arena, when set, lends the readings slices (ReadingArena).
	arena *ReadingArena
}

// floatSlab is how many values one allocation of decoder.floats holds.
const floatSlab = 64

// newFloat returns a pointer to a copy of v.
func (d *decoder) newFloat(v float64) *float64 {
	if len(d.floats) == cap(d.floats) {
		d.floats = make([]float64, 0, floatSlab)
	}
	d.floats = append(d.floats, v)
	return &d.floats[len(d.floats)-1]
}

// intern returns b as a string, the same string for the same bytes while
// there is room to remember them.
func (d *decoder) intern(b []byte) string {
	for _, s := range d.interned[:d.ninterned] {
		if s == string(b) {
			return s
		}
	}
	s := string(b)
	if d.ninterned < len(d.interned) {
		d.interned[d.ninterned] = s
		d.ninterned++
	}
	return s
}

var errType = errors.New("value of the wrong type")

func (d *decoder) syntax(what string) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", d.pos, what)
}

func (d *decoder) typeErr(field string) error {
	return fmt.Errorf("%s: %w", field, errType)
}

func (d *decoder) ws() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *decoder) peek() byte {
	if d.pos < len(d.data) {
		return d.data[d.pos]
	}
	return 0
}

func (d *decoder) literal(word string) bool {
	if len(d.data)-d.pos >= len(word) && string(d.data[d.pos:d.pos+len(word)]) == word {
		d.pos += len(word)
		return true
	}
	return false
}

// object calls field for each key of the object at pos, positioned at the
// value, which field must consume.
func (d *decoder) object(field func(key []byte) error) error {
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nested too deep")
	}
	d.pos++ // '{'
	d.ws()
	if d.peek() == '}' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if d.peek() != '"' {
			return d.syntax("object key is not a string")
		}
		key, err := d.str(true)
		if err != nil {
			return err
		}
		d.ws()
		if d.peek() != ':' {
			return d.syntax("missing ':' after object key")
		}
		d.pos++
		d.ws()
		// Keep the key: the value may reuse the scratch buffer.
		k := foldKey(key)
		if err := field(k); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.pos++
			d.ws()
		case '}':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax("missing ',' or '}' in object")
		}
	}
}

// array calls elem for each element of the array at pos.
func (d *decoder) array(elem func() error) error {
	if d.depth++; d.depth > maxDepth {
		return d.syntax("nested too deep")
	}
	d.pos++ // '['
	d.ws()
	if d.peek() == ']' {
		d.pos++
		d.depth--
		return nil
	}
	for {
		if err := elem(); err != nil {
			return err
		}
		d.ws()
		switch d.peek() {
		case ',':
			d.pos++
			d.ws()
		case ']':
			d.pos++
			d.depth--
			return nil
		default:
			return d.syntax("missing ',' or ']' in array")
		}
	}
}

// skip consumes any JSON value, checking its syntax.
func (d *decoder) skip() error {
	switch c := d.peek(); {
	case c == '{':
		return d.object(func([]byte) error { return d.skip() })
	case c == '[':
		return d.array(d.skip)
	case c == '"':
		_, err := d.str(false)
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := d.number()
		return err
	case d.literal("true"), d.literal("false"), d.literal("null"):
		return nil
	}
	return d.syntax("not a JSON value")
}

// number consumes a number and returns its text.
func (d *decoder) number() ([]byte, error) {
	start := d.pos
	if d.peek() == '-' {
		d.pos++
	}
	switch c := d.peek(); {
	case c == '0':
		d.pos++
	case c >= '1' && c <= '9':
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
	default:
		return nil, d.syntax("malformed number")
	}
	if d.peek() == '.' {
		d.pos++
		if c := d.peek(); c < '0' || c > '9' {
			return nil, d.syntax("malformed number")
		}
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
	}
	if c := d.peek(); c == 'e' || c == 'E' {
		d.pos++
		if c := d.peek(); c == '+' || c == '-' {
			d.pos++
		}
		if c := d.peek(); c < '0' || c > '9' {
			return nil, d.syntax("malformed number")
		}
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
	}
	return d.data[start:d.pos], nil
}

// str consumes a string. The result aliases the input when the string has
// no escapes and is valid UTF-8, else the scratch buffer; scratch makes it
// always use the buffer, so the caller may keep it past the next read of
// the input.
func (d *decoder) str(scratch bool) ([]byte, error) {
	d.pos++ // '"'
	start := d.pos
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			s := d.data[start:d.pos]
			d.pos++
			if scratch {
				d.buf = append(d.buf[:0], s...)
				return d.buf, nil
			}
			return s, nil
		case c == '\\' || c >= utf8.RuneSelf:
			d.pos = start
			return d.unquote()
		case c < 0x20:
			return nil, d.syntax("control character in string")
		}
		d.pos++
	}
	return nil, d.syntax("unterminated string")
}

// unquote decodes a string with escapes or non-ASCII bytes into the
// scratch buffer, with the codec's JSON string rules (encoding/json's).
func (d *decoder) unquote() ([]byte, error) {
	b, end, err := codec.AppendUnquotedJSON(d.buf[:0], d.data, d.pos)
	if err != nil {
		d.pos = end
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	d.pos, d.buf = end, b
	return b, nil
}

// foldKey is encoding/json's key folding: ASCII upper case, and each other
// rune the smallest of its case-folding orbit, so keys match field names
// case-insensitively exactly as there. It folds in place.
func foldKey(key []byte) []byte {
	ascii := true
	for i, c := range key {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		if 'a' <= c && c <= 'z' {
			key[i] = c - ('a' - 'A')
		}
	}
	if ascii {
		return key
	}
	out := make([]byte, 0, len(key))
	for i := 0; i < len(key); {
		if c := key[i]; c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			}
			out = append(out, c)
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		out = utf8.AppendRune(out, foldRune(r))
		i += n
	}
	return out
}

func foldRune(r rune) rune {
	for {
		r2 := unicode.SimpleFold(r)
		if r2 <= r {
			return r2
		}
		r = r2
	}
}

// stringField decodes a string or null (which leaves *dst unchanged).
func (d *decoder) stringField(name string, dst *string) error {
	return d.stringFieldAs(name, dst, false)
}

// internedField is stringField for values a message repeats (units,
// qualities).
func (d *decoder) internedField(name string, dst *string) error {
	return d.stringFieldAs(name, dst, true)
}

func (d *decoder) stringFieldAs(name string, dst *string, interned bool) error {
	switch d.peek() {
	case '"':
		s, err := d.str(false)
		if err != nil {
			return err
		}
		if interned {
			*dst = d.intern(s)
		} else {
			*dst = string(s)
		}
		return nil
	case 'n':
		if d.literal("null") {
			return nil
		}
	}
	if err := d.skip(); err != nil {
		return err
	}
	return d.typeErr(name)
}

// floatField decodes a number or null (nil).
func (d *decoder) floatField(name string, dst **float64) error {
	c := d.peek()
	switch {
	case c == 'n' && d.literal("null"):
		*dst = nil
		return nil
	case c == '-' || (c >= '0' && c <= '9'):
		num, err := d.number()
		if err != nil {
			return err
		}
		v, err := strconv.ParseFloat(string(num), 64)
		if err != nil {
			return fmt.Errorf("%s: number %s: %w", name, num, errType)
		}
		*dst = d.newFloat(v)
		return nil
	}
	if err := d.skip(); err != nil {
		return err
	}
	return d.typeErr(name)
}

// timestampField decodes null (nil) or hands the raw value to
// Timestamp.UnmarshalJSON, as encoding/json does.
func (d *decoder) timestampField(dst **Timestamp) error {
	if d.peek() == 'n' && d.literal("null") {
		*dst = nil
		return nil
	}
	start := d.pos
	if err := d.skip(); err != nil {
		return err
	}
	ts := *dst
	if ts == nil {
		ts = new(Timestamp)
	}
	if err := ts.UnmarshalJSON(d.data[start:d.pos]); err != nil {
		return err
	}
	*dst = ts
	return nil
}

// open reports whether the value at pos is a container opened by delim
// (true, not consumed) or null (false, consumed); any other value is
// consumed and is a type error.
func (d *decoder) open(name string, delim byte) (bool, error) {
	switch c := d.peek(); {
	case c == delim:
		return true, nil
	case c == 'n' && d.literal("null"):
		return false, nil
	}
	if err := d.skip(); err != nil {
		return false, err
	}
	return false, d.typeErr(name)
}

func (d *decoder) message(m *Message) error {
	if ok, err := d.open("message", '{'); !ok {
		return err
	}
	return d.object(func(key []byte) error {
		switch string(key) {
		case "AGENTUUID":
			return d.stringField("agentUuid", &m.AgentUUID)
		case "DEVICENAME":
			return d.stringField("deviceName", &m.DeviceName)
		case "PROTOCOL":
			return d.stringField("protocol", &m.Protocol)
		case "TIMESTAMP":
			return d.timestampField(&m.Timestamp)
		case "MSGID":
			return d.stringField("msgId", &m.MsgID)
		case "READINGS":
			return d.readings(&m.Readings)
		}
		return d.skip()
	})
}

func (d *decoder) readings(dst *[]Reading) error {
	if ok, err := d.open("readings", '['); !ok {
		if err == nil {
			*dst = nil
		}
		return err
	}
	// Like encoding/json, a repeated key decodes into the slice it already
	// holds, element by element, without zeroing reused elements first.
	rs := *dst
	// A first readings array takes its elements from the arena's spare
	// room while it lasts. Those held another batch's readings, so each is
	// zeroed as it is taken: the message then equals a freshly decoded one.
	lent := d.arena != nil && cap(rs) == 0
	outgrew := false
	if lent {
		rs = d.arena.spare()
	}
	n := 0
	err := d.array(func() error {
		switch {
		case n < len(rs):
		case n < cap(rs):
			rs = rs[:n+1]
			if lent {
				rs[n] = Reading{}
			}
		default:
			if lent {
				// Moved out of the arena; Reset makes room next time.
				outgrew, lent = true, false
			}
			rs = append(rs, Reading{})
		}
		r := &rs[n]
		n++
		if ok, err := d.open("readings[]", '{'); !ok {
			return err
		}
		return d.object(func(key []byte) error {
			switch string(key) {
			case "NAME":
				return d.stringField("name", &r.Name)
			case "VALUE":
				return d.floatField("value", &r.Value)
			case "UNIT":
				return d.internedField("unit", &r.Unit)
			case "QUALITY":
				return d.internedField("quality", &r.Quality)
			case "TIMESTAMP":
				return d.timestampField(&r.Timestamp)
			case "ANOMALYSCORE":
				return d.floatField("anomalyScore", &r.AnomalyScore)
			}
			return d.skip()
		})
	})
	if n == 0 {
		rs = []Reading{}
	} else {
		rs = rs[:n]
	}
	if outgrew {
		d.arena.short += n
	}
	if lent && n > 0 {
		// Capped, so that appending to the message never writes into the
		// next message's readings.
		rs = d.arena.take(n)
	}
	*dst = rs
	return err
}
