package query

import (
	"database/sql/driver"
	"fmt"
	"regexp"
	"regexp/syntax"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"modernc.org/sqlite"
)

// Regular expressions are RE2 (Go's regexp) on both engines and always
// match the whole label value, as in PromQL: =~ "boiler.*" means
// ^(?:boiler.*)$.
//
// SQLite has no REGEXP function of its own. This package registers
// sqliteRegexpFunc with the modernc driver, running Go's regexp, so the
// semantics are RE2's exactly.
//
// PostgreSQL's ~ is Henry Spencer's ARE, whose syntax and semantics differ
// from RE2 in places (what \b, (?m), {n,m} above 255 and some escapes
// mean). Rather than hand PostgreSQL the user's text, pgRegex parses it with
// Go's regexp/syntax and writes the parse tree back out as an ARE built only
// from constructs both engines read the same way: escaped code points,
// bracket expressions of code-point ranges, (?:...), |, *, +, ?, {n,m} and
// ^/$ (begin and end of text). Constructs outside that subset are refused
// with an error naming them, on both engines, so a query means the same
// everywhere. The result is always a bound parameter, never SQL text.

// sqliteRegexpFunc is the SQLite function edgeplat_re_match(pattern,
// value): 1 when the RE2 pattern matches value, else 0 (NULL for a NULL
// value). The name is ours so it cannot collide with a REGEXP someone else
// registers.
const sqliteRegexpFunc = "edgeplat_re_match"

// maxPGRegexBytes caps a translated pattern: Unicode classes (\pL) expand
// into hundreds of ranges.
const maxPGRegexBytes = 32 << 10

// maxPGRepeat is the largest {n,m} count PostgreSQL accepts.
const maxPGRepeat = 255

func init() {
	sqlite.MustRegisterDeterministicScalarFunction(sqliteRegexpFunc, 2, sqliteRegexpMatch)
}

// anchored wraps a validated pattern for full-match semantics. pattern
// must compile on its own (so its parentheses balance and the wrapper
// cannot be escaped); compileAnchored re-checks that the wrapped form
// compiles, which catches an unterminated \Q.
func anchored(pattern string) string { return "^(?:" + pattern + ")$" }

func compileAnchored(pattern string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, err
	}
	re, err := regexp.Compile(anchored(pattern))
	if err != nil {
		return nil, fmt.Errorf("cannot be anchored (an unterminated \\Q? close it with \\E): %w", err)
	}
	return re, nil
}

// pgRegex validates pattern (RE2 syntax, within the portable subset) and
// returns the anchored PostgreSQL ARE that matches exactly the same
// strings.
func pgRegex(pattern string) (string, error) {
	if _, err := compileAnchored(pattern); err != nil {
		return "", fmt.Errorf("invalid regex %s: %s", Shorten(strconv.Quote(pattern)), strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil { // unreachable: compiled above with the same flags
		return "", fmt.Errorf("invalid regex %s: %w", Shorten(strconv.Quote(pattern)), err)
	}
	var b strings.Builder
	b.WriteString("^(?:")
	if err := writeARE(&b, tree); err != nil {
		return "", fmt.Errorf("regex %s: %w (see the regex section of docs/query-language.md)", Shorten(strconv.Quote(pattern)), err)
	}
	b.WriteString(")$")
	if b.Len() > maxPGRegexBytes {
		return "", fmt.Errorf("regex %s is too large once translated for the database (%d bytes, limit %d); large Unicode classes such as \\pL count in full", Shorten(strconv.Quote(pattern)), b.Len(), maxPGRegexBytes)
	}
	return b.String(), nil
}

// writeARE writes re as a PostgreSQL ARE. Every operand of a quantifier or
// alternation is grouped with (?:...), so precedence never depends on how
// the two engines read a bare sequence.
func writeARE(b *strings.Builder, re *syntax.Regexp) error {
	switch re.Op {
	case syntax.OpNoMatch:
		// No stored text contains NUL, so this class matches nothing.
		b.WriteString(`[^\u0001-\U0010FFFF]`)
	case syntax.OpEmptyMatch:
		b.WriteString("(?:)")
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 {
				writeFolded(b, r)
			} else {
				writeRune(b, r)
			}
		}
	case syntax.OpCharClass:
		if len(re.Rune) == 0 {
			b.WriteString(`[^\u0001-\U0010FFFF]`)
			break
		}
		b.WriteByte('[')
		for i := 0; i+1 < len(re.Rune); i += 2 {
			writeRune(b, re.Rune[i])
			if re.Rune[i+1] != re.Rune[i] {
				b.WriteByte('-')
				writeRune(b, re.Rune[i+1])
			}
		}
		b.WriteByte(']')
	case syntax.OpAnyCharNotNL:
		b.WriteString(`[^\n]`)
	case syntax.OpAnyChar:
		// Outside newline-sensitive mode (we never turn it on) an ARE's
		// dot matches newline too.
		b.WriteByte('.')
	case syntax.OpBeginText:
		b.WriteByte('^')
	case syntax.OpEndText:
		b.WriteByte('$')
	case syntax.OpBeginLine, syntax.OpEndLine:
		return fmt.Errorf("multi-line anchors ((?m)^ and (?m)$) are not supported")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return fmt.Errorf(`word boundaries (\b, \B) are not supported`)
	case syntax.OpCapture:
		return writeGroup(b, re.Sub[0], "")
	case syntax.OpStar:
		return writeGroup(b, re.Sub[0], "*")
	case syntax.OpPlus:
		return writeGroup(b, re.Sub[0], "+")
	case syntax.OpQuest:
		return writeGroup(b, re.Sub[0], "?")
	case syntax.OpRepeat:
		if re.Min > maxPGRepeat || re.Max > maxPGRepeat {
			return fmt.Errorf("repetition counts above %d are not supported", maxPGRepeat)
		}
		var q string
		switch {
		case re.Max < 0:
			q = fmt.Sprintf("{%d,}", re.Min)
		case re.Max == re.Min:
			q = fmt.Sprintf("{%d}", re.Min)
		default:
			q = fmt.Sprintf("{%d,%d}", re.Min, re.Max)
		}
		return writeGroup(b, re.Sub[0], q)
	case syntax.OpConcat:
		for _, s := range re.Sub {
			if err := writeARE(b, s); err != nil {
				return err
			}
		}
	case syntax.OpAlternate:
		b.WriteString("(?:")
		for i, s := range re.Sub {
			if i > 0 {
				b.WriteByte('|')
			}
			if err := writeARE(b, s); err != nil {
				return err
			}
		}
		b.WriteByte(')')
	default:
		return fmt.Errorf("construct %v is not supported", re.Op)
	}
	return nil
}

// writeGroup writes (?:re) followed by the quantifier q. Greediness is
// dropped: a full match either exists or not, whichever way is preferred.
func writeGroup(b *strings.Builder, re *syntax.Regexp, q string) error {
	b.WriteString("(?:")
	if err := writeARE(b, re); err != nil {
		return err
	}
	b.WriteByte(')')
	b.WriteString(q)
	return nil
}

// writeRune writes r as itself when it is an ASCII letter or digit, else
// as \uXXXX or \UXXXXXXXX, which means the code point in an ARE both inside
// and outside brackets.
func writeRune(b *strings.Builder, r rune) {
	switch {
	case ('a' <= r && r <= 'z') || ('A' <= r && r <= 'Z') || ('0' <= r && r <= '9'):
		b.WriteRune(r)
	case r <= 0xFFFF:
		fmt.Fprintf(b, `\u%04X`, r)
	default:
		fmt.Fprintf(b, `\U%08X`, r)
	}
}

// writeFolded writes a bracket expression of r's simple case-folding
// orbit, which is what (?i) matches in RE2.
func writeFolded(b *strings.Builder, r rune) {
	f := unicode.SimpleFold(r)
	if f == r {
		writeRune(b, r)
		return
	}
	b.WriteByte('[')
	writeRune(b, r)
	for ; f != r; f = unicode.SimpleFold(f) {
		writeRune(b, f)
	}
	b.WriteByte(']')
}

// regexpCache keeps compiled patterns for the SQLite function, which is
// called once per row with the same pattern. It is bounded: when full it is
// emptied.
var regexpCache = struct {
	sync.Mutex
	m map[string]*regexp.Regexp
}{m: map[string]*regexp.Regexp{}}

const regexpCacheSize = 256

func cachedRegexp(pattern string) (*regexp.Regexp, error) {
	regexpCache.Lock()
	defer regexpCache.Unlock()
	if re, ok := regexpCache.m[pattern]; ok {
		return re, nil
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, err
	}
	if len(regexpCache.m) >= regexpCacheSize {
		clear(regexpCache.m)
	}
	regexpCache.m[pattern] = re
	return re, nil
}

// sqliteRegexpMatch implements edgeplat_re_match(pattern, value). The
// pattern arrives already anchored (see anchored).
func sqliteRegexpMatch(_ *sqlite.FunctionContext, args []driver.Value) (driver.Value, error) {
	pattern, ok := args[0].(string)
	if !ok {
		return nil, fmt.Errorf("%s: pattern must be text, got %T", sqliteRegexpFunc, args[0])
	}
	var s string
	switch v := args[1].(type) {
	case nil:
		return nil, nil
	case string:
		s = v
	case []byte:
		s = string(v)
	default:
		return nil, fmt.Errorf("%s: value must be text, got %T", sqliteRegexpFunc, args[1])
	}
	re, err := cachedRegexp(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", sqliteRegexpFunc, err)
	}
	if re.MatchString(s) {
		return int64(1), nil
	}
	return int64(0), nil
}
