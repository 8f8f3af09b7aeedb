package query

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// TokKind is the kind of a lexical token.
type TokKind int

const (
	TokEOF      TokKind = iota
	TokIdent            // readings, sum, by, metric_name
	TokString           // "x", 'x', `x` (Val holds the unquoted value)
	TokNumber           // 3, 0.5, 1e3, 0x1f, Inf, NaN
	TokDuration         // 5m, 1h30m, 250ms
	TokLBrace           // {
	TokRBrace           // }
	TokLParen           // (
	TokRParen           // )
	TokLBracket         // [
	TokRBracket         // ]
	TokComma            // ,
	TokEq               // =
	TokNeq              // !=
	TokRe               // =~
	TokNre              // !~
	TokBinOp            // + - * / % ^ == < > <= >= (lexed only to report them)
	TokAt               // @ (lexed only to report it)
	TokColon            // : (subqueries; lexed only to report them)
)

func (k TokKind) String() string {
	switch k {
	case TokEOF:
		return "end of input"
	case TokIdent:
		return "identifier"
	case TokString:
		return "string"
	case TokNumber:
		return "number"
	case TokDuration:
		return "duration"
	case TokLBrace:
		return `"{"`
	case TokRBrace:
		return `"}"`
	case TokLParen:
		return `"("`
	case TokRParen:
		return `")"`
	case TokLBracket:
		return `"["`
	case TokRBracket:
		return `"]"`
	case TokComma:
		return `","`
	case TokEq:
		return `"="`
	case TokNeq:
		return `"!="`
	case TokRe:
		return `"=~"`
	case TokNre:
		return `"!~"`
	case TokBinOp:
		return "operator"
	case TokAt:
		return `"@"`
	case TokColon:
		return `":"`
	}
	return fmt.Sprintf("token(%d)", int(k))
}

// Token is one lexeme.
type Token struct {
	Kind TokKind
	Pos  int           // byte offset into the source
	Text string        // the source text
	Val  string        // TokString: the unquoted value
	Num  float64       // TokNumber: the value
	Dur  time.Duration // TokDuration: the value
}

// describe names a token in an error message.
func (t Token) describe() string {
	switch t.Kind {
	case TokEOF:
		return "end of input"
	case TokIdent, TokNumber, TokDuration, TokBinOp:
		return fmt.Sprintf("%s %q", t.Kind, t.Text)
	case TokString:
		return "string " + Shorten(t.Text)
	}
	return t.Kind.String()
}

// Shorten keeps error messages bounded when they quote the query.
func Shorten(s string) string {
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

// Lexer turns a query into tokens, PromQL style: # starts a comment to the
// end of the line; strings are double-quoted or single-quoted with Go
// escapes, or backquoted raw. The Prometheus API reads PromQL with it too,
// so the two accept the same strings, numbers and durations.
type Lexer struct {
	src        string
	pos        int
	identChars string
}

// NewLexer returns a lexer over src. identChars lists the bytes besides
// letters, digits and '_' that may continue (never start) an identifier:
// the query language has none; PromQL metric names take ':', and
// edgeplat's <device>.<reading> names '.'.
func NewLexer(src, identChars string) *Lexer {
	return &Lexer{src: src, identChars: identChars}
}

func (l *Lexer) errorf(pos int, format string, args ...any) *ParseError {
	return newParseError(l.src, pos, format, args...)
}

func (l *Lexer) continuesIdent(c byte) bool {
	return isIdentChar(c) || strings.IndexByte(l.identChars, c) >= 0
}

// Next returns the next token, TokEOF at the end, or a *ParseError.
func (l *Lexer) Next() (Token, error) {
	l.skipSpace()
	start := l.pos
	if l.pos >= len(l.src) {
		return Token{Kind: TokEOF, Pos: start}, nil
	}
	c := l.src[l.pos]
	single := func(k TokKind) (Token, error) {
		l.pos++
		return Token{Kind: k, Pos: start, Text: l.src[start:l.pos]}, nil
	}
	two := func(k TokKind) (Token, error) {
		l.pos += 2
		return Token{Kind: k, Pos: start, Text: l.src[start:l.pos]}, nil
	}
	peek := byte(0)
	if l.pos+1 < len(l.src) {
		peek = l.src[l.pos+1]
	}
	switch {
	case c == '{':
		return single(TokLBrace)
	case c == '}':
		return single(TokRBrace)
	case c == '(':
		return single(TokLParen)
	case c == ')':
		return single(TokRParen)
	case c == '[':
		return single(TokLBracket)
	case c == ']':
		return single(TokRBracket)
	case c == ',':
		return single(TokComma)
	case c == '@':
		return single(TokAt)
	case c == ':':
		return single(TokColon)
	case c == '=' && peek == '~':
		return two(TokRe)
	case c == '=' && peek == '=':
		return two(TokBinOp)
	case c == '=':
		return single(TokEq)
	case c == '!' && peek == '=':
		return two(TokNeq)
	case c == '!' && peek == '~':
		return two(TokNre)
	case (c == '<' || c == '>') && peek == '=':
		return two(TokBinOp)
	case strings.IndexByte("+-*/%^<>", c) >= 0:
		return single(TokBinOp)
	case c == '"' || c == '\'' || c == '`':
		return l.lexString()
	case isDigit(c) || (c == '.' && isDigit(peek)):
		return l.lexNumberOrDuration()
	case isIdentStart(c):
		for l.pos < len(l.src) && l.continuesIdent(l.src[l.pos]) {
			l.pos++
		}
		text := l.src[start:l.pos]
		switch strings.ToLower(text) {
		case "inf", "nan":
			v, _ := strconv.ParseFloat(text, 64)
			return Token{Kind: TokNumber, Pos: start, Text: text, Num: v}, nil
		}
		return Token{Kind: TokIdent, Pos: start, Text: text}, nil
	}
	r, _ := utf8.DecodeRuneInString(l.src[l.pos:])
	if r == utf8.RuneError {
		return Token{}, l.errorf(start, "invalid UTF-8 in query")
	}
	return Token{}, l.errorf(start, "unexpected character %q", r)
}

func (l *Lexer) skipSpace() {
	for l.pos < len(l.src) {
		switch l.src[l.pos] {
		case ' ', '\t', '\n', '\r':
			l.pos++
		case '#':
			for l.pos < len(l.src) && l.src[l.pos] != '\n' {
				l.pos++
			}
		default:
			return
		}
	}
}

func isDigit(c byte) bool      { return '0' <= c && c <= '9' }
func isIdentStart(c byte) bool { return c == '_' || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z') }
func isIdentChar(c byte) bool  { return isIdentStart(c) || isDigit(c) }
func isHexDigit(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// lexNumberOrDuration reads a number (decimal, with optional fraction and
// exponent, or 0x hex) or, when digits run straight into a unit, a duration
// (1h30m, 250ms).
func (l *Lexer) lexNumberOrDuration() (Token, error) {
	start := l.pos
	s := l.src
	if s[l.pos] == '0' && l.pos+1 < len(s) && (s[l.pos+1] == 'x' || s[l.pos+1] == 'X') {
		l.pos += 2
		for l.pos < len(s) && isHexDigit(s[l.pos]) {
			l.pos++
		}
		text := s[start:l.pos]
		if len(text) == 2 {
			return Token{}, l.errorf(start, "invalid number %q: no digits after 0x", text)
		}
		if l.pos < len(s) && isIdentChar(s[l.pos]) {
			return Token{}, l.errorf(start, "invalid number %q", s[start:l.pos+1])
		}
		u, err := strconv.ParseUint(text[2:], 16, 64)
		if err != nil {
			return Token{}, l.errorf(start, "invalid number %q: too large", text)
		}
		return Token{Kind: TokNumber, Pos: start, Text: text, Num: float64(u)}, nil
	}
	intStart := l.pos
	for l.pos < len(s) && isDigit(s[l.pos]) {
		l.pos++
	}
	// Digits followed by a duration unit: a duration.
	if l.pos > intStart && l.pos < len(s) && strings.IndexByte("smhdwy", s[l.pos]) >= 0 {
		l.pos = start
		return l.lexDuration()
	}
	if l.pos < len(s) && s[l.pos] == '.' {
		l.pos++
		for l.pos < len(s) && isDigit(s[l.pos]) {
			l.pos++
		}
	}
	if l.pos < len(s) && (s[l.pos] == 'e' || s[l.pos] == 'E') {
		p := l.pos + 1
		if p < len(s) && (s[p] == '+' || s[p] == '-') {
			p++
		}
		if p < len(s) && isDigit(s[p]) {
			for p < len(s) && isDigit(s[p]) {
				p++
			}
			l.pos = p
		}
	}
	text := s[start:l.pos]
	if l.pos < len(s) && (isIdentChar(s[l.pos]) || s[l.pos] == '.') {
		return Token{}, l.errorf(start, "invalid number %q", s[start:l.pos+1])
	}
	v, err := strconv.ParseFloat(text, 64)
	if err != nil && !isRangeErr(err) {
		return Token{}, l.errorf(start, "invalid number %q", text)
	}
	return Token{Kind: TokNumber, Pos: start, Text: text, Num: v}, nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// durationUnits in the order they must appear, largest first, as in
// PromQL's durations (1w2d3h4m5s6ms).
var durationUnits = []struct {
	name string
	d    time.Duration
}{
	{"y", 365 * 24 * time.Hour},
	{"w", 7 * 24 * time.Hour},
	{"d", 24 * time.Hour},
	{"h", time.Hour},
	{"m", time.Minute},
	{"s", time.Second},
	{"ms", time.Millisecond},
}

// lexDuration reads one or more <integer><unit> parts with units strictly
// decreasing.
func (l *Lexer) lexDuration() (Token, error) {
	start := l.pos
	s := l.src
	var total time.Duration
	last := -1
	for l.pos < len(s) && isDigit(s[l.pos]) {
		numStart := l.pos
		for l.pos < len(s) && isDigit(s[l.pos]) {
			l.pos++
		}
		digits := s[numStart:l.pos]
		unit := -1
		for i, u := range durationUnits {
			if strings.HasPrefix(s[l.pos:], u.name) {
				// "m" must not take the "m" of "ms".
				if u.name == "m" && strings.HasPrefix(s[l.pos:], "ms") {
					continue
				}
				unit = i
				break
			}
		}
		if unit < 0 {
			return Token{}, l.errorf(numStart, "invalid duration %q: missing unit (ms, s, m, h, d, w or y)", s[start:l.pos])
		}
		if unit <= last {
			return Token{}, l.errorf(numStart, "invalid duration %q: units must go from largest to smallest, each once", s[start:l.pos+len(durationUnits[unit].name)])
		}
		last = unit
		l.pos += len(durationUnits[unit].name)
		n, err := strconv.ParseInt(digits, 10, 64)
		u := durationUnits[unit].d
		if err != nil || n > math.MaxInt64/int64(u) || total > math.MaxInt64-time.Duration(n)*u {
			return Token{}, l.errorf(start, "invalid duration %q: too large", s[start:l.pos])
		}
		total += time.Duration(n) * u
	}
	if l.pos < len(s) && (isIdentChar(s[l.pos]) || s[l.pos] == '.') {
		return Token{}, l.errorf(start, "invalid duration %q", s[start:l.pos+1])
	}
	return Token{Kind: TokDuration, Pos: start, Text: s[start:l.pos], Dur: total}, nil
}

// formatDuration writes d the way lexDuration reads it, exactly: d must be a
// positive whole number of milliseconds.
func formatDuration(d time.Duration) string {
	if d <= 0 {
		return "0s"
	}
	var b strings.Builder
	for _, u := range durationUnits[1:] { // never "y": 365d is clearer
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// displayDuration formats d for error messages: days, hours, minutes,
// seconds and milliseconds ("90d", "1d12h"), or Go's form below a
// millisecond.
func displayDuration(d time.Duration) string {
	if d <= 0 || d%time.Millisecond != 0 {
		return d.String()
	}
	var b strings.Builder
	for _, u := range durationUnits[2:] {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.d
		}
	}
	return b.String()
}

// lexString reads a quoted string and unescapes it. Escapes are Go's: \a \b
// \f \n \r \t \v \\, the quote itself, \xHH, \OOO, \uHHHH, \UHHHHHHHH.
// Backquoted strings are raw. The value must be valid UTF-8 without NUL: no
// stored label can contain either, and PostgreSQL refuses both in text.
func (l *Lexer) lexString() (Token, error) {
	start := l.pos
	quote := l.src[l.pos]
	l.pos++
	var b strings.Builder
	for {
		if l.pos >= len(l.src) {
			return Token{}, l.errorf(start, "unterminated string")
		}
		c := l.src[l.pos]
		if c == quote {
			l.pos++
			break
		}
		if quote != '`' && c == '\n' {
			return Token{}, l.errorf(start, "unterminated string (newline in a quoted string; use \\n)")
		}
		if quote == '`' || c != '\\' {
			b.WriteByte(c)
			l.pos++
			continue
		}
		if err := l.lexEscape(&b, quote); err != nil {
			return Token{}, err
		}
	}
	val := b.String()
	if !utf8.ValidString(val) {
		return Token{}, l.errorf(start, "string is not valid UTF-8")
	}
	if strings.IndexByte(val, 0) >= 0 {
		return Token{}, l.errorf(start, "string contains a NUL character")
	}
	return Token{Kind: TokString, Pos: start, Text: l.src[start:l.pos], Val: val}, nil
}

// lexEscape reads the escape at l.pos (a backslash) into b.
func (l *Lexer) lexEscape(b *strings.Builder, quote byte) error {
	esc := l.pos
	l.pos++
	if l.pos >= len(l.src) {
		return l.errorf(esc, "unterminated escape sequence")
	}
	c := l.src[l.pos]
	l.pos++
	switch c {
	case 'a':
		b.WriteByte('\a')
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'v':
		b.WriteByte('\v')
	case '\\':
		b.WriteByte('\\')
	case quote:
		b.WriteByte(quote)
	case 'x', 'u', 'U', '0', '1', '2', '3', '4', '5', '6', '7':
		n, base := 2, 16
		switch c {
		case 'u':
			n = 4
		case 'U':
			n = 8
		case 'x':
		default:
			n, base = 2, 8 // the first octal digit was c
		}
		digits := ""
		if base == 8 {
			digits = string(c)
		}
		if l.pos+n > len(l.src) {
			return l.errorf(esc, "invalid escape sequence: too few digits")
		}
		digits += l.src[l.pos : l.pos+n]
		l.pos += n
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return l.errorf(esc, "invalid escape sequence %q", l.src[esc:l.pos])
		}
		switch c {
		case 'u', 'U':
			if v > utf8.MaxRune || (0xD800 <= v && v < 0xE000) {
				return l.errorf(esc, "invalid escape sequence %q: not a Unicode character", l.src[esc:l.pos])
			}
			b.WriteRune(rune(v))
		default:
			if v > 255 {
				return l.errorf(esc, "invalid escape sequence %q: octal value over 255", l.src[esc:l.pos])
			}
			b.WriteByte(byte(v))
		}
	default:
		r, _ := utf8.DecodeRuneInString(l.src[l.pos-1:])
		return l.errorf(esc, "invalid escape sequence \\%c", r)
	}
	return nil
}

// Scanner reads tokens from a Lexer with one token of lookahead: what both
// the query language's parser and the Prometheus API's read from.
type Scanner struct {
	// Tok is the current token, set by Advance.
	Tok   Token
	lex   *Lexer
	ahead *Token
}

// NewScanner returns a scanner over l; call Advance for the first token.
func NewScanner(l *Lexer) *Scanner { return &Scanner{lex: l} }

// Advance moves to the next token. Errors are *ParseError.
func (s *Scanner) Advance() error {
	if s.ahead != nil {
		s.Tok, s.ahead = *s.ahead, nil
		return nil
	}
	t, err := s.lex.Next()
	if err != nil {
		return err
	}
	s.Tok = t
	return nil
}

// Peek returns the token after Tok without moving. Errors are *ParseError.
func (s *Scanner) Peek() (Token, error) {
	if s.ahead == nil {
		t, err := s.lex.Next()
		if err != nil {
			return Token{}, err
		}
		s.ahead = &t
	}
	return *s.ahead, nil
}
