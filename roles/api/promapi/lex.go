package promapi

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// The lexer reads PromQL's tokens, including the operators and keywords
// this API does not evaluate, so that the parser can name what a query
// uses that is unsupported instead of reporting a syntax error.

type tokKind int

const (
	tokEOF tokKind = iota
	tokIdent
	tokString
	tokNumber
	tokDuration
	tokLParen
	tokRParen
	tokLBrace
	tokRBrace
	tokLBracket
	tokRBracket
	tokComma
	tokEq  // =
	tokNeq // !=
	tokRe  // =~
	tokNre // !~
	tokBinOp
	tokAt
	tokColon
)

type token struct {
	kind tokKind
	pos  int    // byte offset
	text string // as written
	val  string // a string's value
	num  float64
	dur  time.Duration
}

func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokString:
		return "string " + shorten(t.text)
	case tokIdent:
		return strconv.Quote(t.text)
	}
	return strconv.Quote(t.text)
}

func shorten(s string) string {
	const max = 40
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

type lexer struct {
	src string
	pos int
}

// errorAt is a syntax error in the query at a byte offset; the handler
// answers it with bad_data.
type errorAt struct {
	pos int
	msg string
}

func (e *errorAt) Error() string { return e.msg }

func (l *lexer) errorf(pos int, format string, args ...any) *errorAt {
	return &errorAt{pos: pos, msg: fmt.Sprintf(format, args...)}
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// isIdentChar admits '.' besides PromQL's characters: edgeplat metric
// names are <device>.<reading>, and PromQL gives '.' no other meaning
// outside numbers.
func isIdentChar(c byte) bool {
	return isIdentStart(c) || c == '.' || (c >= '0' && c <= '9')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (l *lexer) next() (token, error) {
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			l.pos++
			continue
		}
		if c == '#' {
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
			continue
		}
		break
	}
	start := l.pos
	if start >= len(l.src) {
		return token{kind: tokEOF, pos: start}, nil
	}
	c := l.src[start]
	one := func(k tokKind) (token, error) {
		l.pos++
		return token{kind: k, pos: start, text: l.src[start:l.pos]}, nil
	}
	two := func(k tokKind) (token, error) {
		l.pos += 2
		return token{kind: k, pos: start, text: l.src[start:l.pos]}, nil
	}
	peek := byte(0)
	if start+1 < len(l.src) {
		peek = l.src[start+1]
	}
	switch c {
	case '(':
		return one(tokLParen)
	case ')':
		return one(tokRParen)
	case '{':
		return one(tokLBrace)
	case '}':
		return one(tokRBrace)
	case '[':
		return one(tokLBracket)
	case ']':
		return one(tokRBracket)
	case ',':
		return one(tokComma)
	case '@':
		return one(tokAt)
	case ':':
		return one(tokColon)
	case '=':
		switch peek {
		case '~':
			return two(tokRe)
		case '=':
			return two(tokBinOp)
		}
		return one(tokEq)
	case '!':
		switch peek {
		case '=':
			return two(tokNeq)
		case '~':
			return two(tokNre)
		}
		return token{}, l.errorf(start, "unexpected character %q", "!")
	case '<', '>':
		if peek == '=' {
			return two(tokBinOp)
		}
		return one(tokBinOp)
	case '+', '-', '*', '/', '%', '^':
		return one(tokBinOp)
	case '"', '\'', '`':
		return l.lexString()
	}
	if isDigit(c) || (c == '.' && isDigit(peek)) {
		return l.lexNumber()
	}
	if isIdentStart(c) {
		for l.pos < len(l.src) && isIdentChar(l.src[l.pos]) {
			l.pos++
		}
		return token{kind: tokIdent, pos: start, text: l.src[start:l.pos]}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[start:])
	return token{}, l.errorf(start, "unexpected character %q", r)
}

// lexString reads a double- or single-quoted string with Go's escapes, or a
// raw backquoted one.
func (l *lexer) lexString() (token, error) {
	start := l.pos
	q := l.src[start]
	l.pos++
	if q == '`' {
		end := strings.IndexByte(l.src[l.pos:], '`')
		if end < 0 {
			return token{}, l.errorf(start, "unterminated raw string")
		}
		val := l.src[l.pos : l.pos+end]
		l.pos += end + 1
		if !utf8.ValidString(val) {
			return token{}, l.errorf(start, "string is not valid UTF-8")
		}
		return token{kind: tokString, pos: start, text: l.src[start:l.pos], val: val}, nil
	}
	var b strings.Builder
	rest := l.src[l.pos:]
	for {
		if rest == "" {
			return token{}, l.errorf(start, "unterminated string")
		}
		if rest[0] == q {
			rest = rest[1:]
			break
		}
		if rest[0] == '\n' {
			return token{}, l.errorf(start, "unterminated string: a quoted string cannot contain a newline")
		}
		r, multi, tail, err := strconv.UnquoteChar(rest, q)
		if err != nil {
			return token{}, l.errorf(len(l.src)-len(rest), "invalid escape in string")
		}
		if r < utf8.RuneSelf || !multi {
			b.WriteByte(byte(r))
		} else {
			b.WriteRune(r)
		}
		rest = tail
	}
	l.pos = len(l.src) - len(rest)
	val := b.String()
	if !utf8.ValidString(val) {
		return token{}, l.errorf(start, "string is not valid UTF-8")
	}
	return token{kind: tokString, pos: start, text: l.src[start:l.pos], val: val}, nil
}

// lexNumber reads a number or a duration: both start with a digit.
func (l *lexer) lexNumber() (token, error) {
	start := l.pos
	for l.pos < len(l.src) {
		c := l.src[l.pos]
		if isIdentChar(c) && c != ':' { // the colon of a subquery's [5m:1m]
			l.pos++
			continue
		}
		// A sign right after a decimal exponent belongs to the number.
		if (c == '+' || c == '-') && l.pos > start && (l.src[l.pos-1] == 'e' || l.src[l.pos-1] == 'E') &&
			!strings.HasPrefix(strings.ToLower(l.src[start:l.pos]), "0x") {
			l.pos++
			continue
		}
		break
	}
	text := l.src[start:l.pos]
	if d, ok := parseDuration(text); ok {
		return token{kind: tokDuration, pos: start, text: text, dur: d}, nil
	}
	if len(text) > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X') {
		n, err := strconv.ParseUint(text[2:], 16, 64)
		if err != nil {
			return token{}, l.errorf(start, "invalid number %q", shorten(text))
		}
		return token{kind: tokNumber, pos: start, text: text, num: float64(n)}, nil
	}
	f, err := strconv.ParseFloat(text, 64)
	if err != nil || strings.ContainsAny(text, "_xXpP") {
		return token{}, l.errorf(start, "invalid number or duration %q", shorten(text))
	}
	return token{kind: tokNumber, pos: start, text: text, num: f}, nil
}

// durationUnits are PromQL's, largest first; each may appear once, in
// this order.
var durationUnits = []struct {
	name string
	d    time.Duration
}{
	{"y", 365 * 24 * time.Hour}, {"w", 7 * 24 * time.Hour}, {"d", 24 * time.Hour},
	{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond},
}

// maxDuration keeps a duration's sum from overflowing: far beyond any
// limit a query may reach.
const maxDuration = 100 * 365 * 24 * time.Hour

// parseDuration parses PromQL's duration syntax: "5m", "1h30m", "250ms".
func parseDuration(s string) (time.Duration, bool) {
	if s == "" {
		return 0, false
	}
	var total time.Duration
	next := 0 // index into durationUnits of the smallest unit still allowed
	for s != "" {
		i := 0
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		if i == 0 || i > 12 {
			return 0, false
		}
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil {
			return 0, false
		}
		s = s[i:]
		matched := false
		for j := next; j < len(durationUnits); j++ {
			u := durationUnits[j]
			// "m" must not take the "m" of "ms".
			if strings.HasPrefix(s, u.name) && !(u.name == "m" && strings.HasPrefix(s, "ms")) {
				if time.Duration(n) > maxDuration/u.d {
					return 0, false
				}
				total += time.Duration(n) * u.d
				if total > maxDuration {
					return 0, false
				}
				s, next, matched = s[len(u.name):], j+1, true
				break
			}
		}
		if !matched {
			return 0, false
		}
	}
	return total, true
}
