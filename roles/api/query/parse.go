package query

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/edgeplat/edgeplat/core/codec"
)

// Parse parses a query with the default limits' length and nesting caps.
// Errors are *ParseError or *LimitError.
func Parse(src string) (Expr, error) { return ParseLimits(src, DefaultLimits()) }

// ParseLimits parses a query, refusing one longer than lim.MaxQueryBytes or
// nested deeper than lim.MaxDepth (zero fields take the defaults). Errors
// are *ParseError or *LimitError. Label names, regular expressions and
// parameters are validated here, so every error in the query text carries a
// position.
func ParseLimits(src string, lim Limits) (Expr, error) {
	lim = lim.WithDefaults()
	if len(src) > lim.MaxQueryBytes {
		return nil, limitError("max_query_bytes", "query length", fmt.Sprintf("%d bytes", len(src)), fmt.Sprintf("%d bytes", lim.MaxQueryBytes), "")
	}
	p := &parser{Scanner: NewScanner(NewLexer(src, "")), maxDepth: lim.MaxDepth}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if p.Tok.Kind != TokEOF {
		return nil, p.unexpected("end of input")
	}
	return e, nil
}

type parser struct {
	*Scanner
	depth    int
	maxDepth int
}

func (p *parser) errorf(pos int, format string, args ...any) *ParseError {
	return newParseError(p.lex.src, pos, format, args...)
}

// unexpected reports the current token where want was expected, naming the
// PromQL features this language leaves out when the token is one of theirs.
func (p *parser) unexpected(want string) *ParseError {
	t := p.Tok
	switch {
	case t.Kind == TokBinOp:
		return p.errorf(t.Pos, "binary operators (%s) are not supported", t.Text)
	case t.Kind == TokAt:
		return p.errorf(t.Pos, "the @ modifier is not supported")
	case t.Kind == TokColon:
		return p.errorf(t.Pos, "subqueries are not supported")
	case t.Kind == TokIdent && strings.EqualFold(t.Text, "offset"):
		return p.errorf(t.Pos, "offset modifiers are not supported")
	case t.Kind == TokLBracket:
		return p.errorf(t.Pos, "a range selector [...] is only allowed directly inside a range function, as in rate(readings{...}[5m])")
	}
	return p.errorf(t.Pos, "unexpected %s, expected %s", t.describe(), want)
}

func (p *parser) expect(k TokKind, want string) error {
	if p.Tok.Kind != k {
		return p.unexpected(want)
	}
	return p.Advance()
}

// enter counts one level of nesting.
func (p *parser) enter() error {
	p.depth++
	if p.depth > p.maxDepth {
		return limitError("max_depth", "nesting depth", strconv.Itoa(p.depth), strconv.Itoa(p.maxDepth), "aggregations, function calls and parentheses each add one")
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// parseExpr parses a selector, call, aggregation or parenthesised
// expression.
func (p *parser) parseExpr() (Expr, error) {
	t := p.Tok
	switch t.Kind {
	case TokLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.Advance(); err != nil {
			return nil, err
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(TokRParen, `")"`); err != nil {
			return nil, err
		}
		p.leave()
		return e, nil
	case TokLBrace:
		return p.parseSelector()
	case TokIdent:
		if t.Text == "readings" {
			return p.parseSelector()
		}
		if _, ok := aggOps[AggOp(strings.ToLower(t.Text))]; ok {
			return p.parseAggregate()
		}
		if _, ok := funcs[Func(t.Text)]; ok {
			return p.parseCall()
		}
		if strings.EqualFold(t.Text, "by") || strings.EqualFold(t.Text, "without") {
			return nil, p.errorf(t.Pos, "unexpected %q: by and without follow an aggregation operator, as in sum by (agent_uuid) (...)", t.Text)
		}
		next, err := p.Peek()
		if err != nil {
			return nil, err
		}
		if next.Kind == TokLParen {
			return nil, p.errorf(t.Pos, "unknown function %q; range functions are %s; aggregations are %s", t.Text, funcNames(), aggNames())
		}
		return nil, p.errorf(t.Pos, "unknown metric %q: the only series source is readings; select a metric with readings{metric_name=%q}", t.Text, t.Text)
	case TokNumber:
		return nil, p.errorf(t.Pos, "unexpected number %q: numbers are only allowed as the first argument of topk, bottomk and quantile", t.Text)
	case TokString:
		return nil, p.errorf(t.Pos, "unexpected string: label matchers go inside braces, as in readings{metric_name=\"...\"}")
	}
	return nil, p.unexpected("a selector, range function or aggregation")
}

func funcNames() string {
	names := make([]string, 0, len(funcs))
	for f := range funcs {
		names = append(names, string(f))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func aggNames() string {
	names := make([]string, 0, len(aggOps))
	for a := range aggOps {
		names = append(names, string(a))
	}
	slices.Sort(names)
	return strings.Join(names, ", ")
}

// parseSelector parses readings, readings{...} or {...}.
func (p *parser) parseSelector() (*Selector, error) {
	start := p.Tok.Pos
	bare := p.Tok.Kind == TokLBrace
	if !bare {
		if err := p.Advance(); err != nil {
			return nil, err
		}
	}
	sel := &Selector{}
	if p.Tok.Kind == TokLBrace {
		ms, err := p.parseMatchers()
		if err != nil {
			return nil, err
		}
		if bare && len(ms) == 0 {
			return nil, p.errorf(start, "empty selector {}: write readings to select every reading")
		}
		if len(ms) > 0 {
			sel.Matchers = ms
		}
	}
	return sel, nil
}

// parseMatchers parses {label op "value", ...}; a trailing comma is
// allowed.
func (p *parser) parseMatchers() ([]Matcher, error) {
	if err := p.expect(TokLBrace, `"{"`); err != nil {
		return nil, err
	}
	var ms []Matcher
	for p.Tok.Kind != TokRBrace {
		m, err := p.parseMatcher()
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
		if p.Tok.Kind == TokComma {
			if err := p.Advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.Tok.Kind != TokRBrace {
			return nil, p.unexpected(`"," or "}"`)
		}
	}
	return ms, p.Advance()
}

func (p *parser) parseMatcher() (Matcher, error) {
	lt := p.Tok
	if lt.Kind != TokIdent {
		return Matcher{}, p.unexpected("a label name")
	}
	if err := checkMatchLabel(lt.Text); err != nil {
		return Matcher{}, p.errorf(lt.Pos, "%s", err)
	}
	if err := p.Advance(); err != nil {
		return Matcher{}, err
	}
	var op MatchOp
	switch p.Tok.Kind {
	case TokEq:
		op = MatchEqual
	case TokNeq:
		op = MatchNotEqual
	case TokRe:
		op = MatchRegexp
	case TokNre:
		op = MatchNotRegexp
	default:
		return Matcher{}, p.unexpected(`"=", "!=", "=~" or "!~"`)
	}
	if err := p.Advance(); err != nil {
		return Matcher{}, err
	}
	vt := p.Tok
	if vt.Kind != TokString {
		return Matcher{}, p.unexpected("a quoted string")
	}
	m := Matcher{Label: lt.Text, Op: op, Value: vt.Val}
	switch {
	case op == MatchRegexp || op == MatchNotRegexp:
		if _, err := pgRegex(m.Value); err != nil {
			return Matcher{}, p.errorf(vt.Pos, "%s", err)
		}
	case m.Label == LabelAgentUUID:
		u, err := codec.ParseUUID(m.Value)
		if err != nil {
			return Matcher{}, p.errorf(vt.Pos, "agent_uuid %s %s: not a UUID (8-4-4-4-12 hex digits); use =~ to match part of one", op, Shorten(strconv.Quote(m.Value)))
		}
		m.Value = u.String()
	}
	return m, p.Advance()
}

// parseCall parses func(selector[range]).
func (p *parser) parseCall() (*Call, error) {
	ft := p.Tok
	c := &Call{Func: Func(ft.Text)}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if err := p.expect(TokLParen, fmt.Sprintf(`"(" after %s`, ft.Text)); err != nil {
		return nil, err
	}
	if !(p.Tok.Kind == TokLBrace || (p.Tok.Kind == TokIdent && p.Tok.Text == "readings")) {
		if p.Tok.Kind == TokIdent || p.Tok.Kind == TokLParen {
			return nil, p.errorf(p.Tok.Pos, "%s takes a range selector such as readings{...}[5m], not an expression", ft.Text)
		}
		return nil, p.unexpected("a range selector such as readings{...}[5m]")
	}
	sel, err := p.parseSelector()
	if err != nil {
		return nil, err
	}
	c.Selector = sel
	if p.Tok.Kind != TokLBracket {
		return nil, p.errorf(p.Tok.Pos, "%s needs a range: %s(%s[5m])", ft.Text, ft.Text, Shorten(sel.String()))
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	dt := p.Tok
	switch dt.Kind {
	case TokDuration:
	case TokNumber:
		return nil, p.errorf(dt.Pos, "range %q needs a unit, as in [5m] (units ms, s, m, h, d, w, y)", dt.Text)
	default:
		return nil, p.unexpected("a duration such as 5m")
	}
	if dt.Dur <= 0 {
		return nil, p.errorf(dt.Pos, "range must be positive, got %q", dt.Text)
	}
	c.Range = dt.Dur
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if err := p.expect(TokRBracket, `"]"`); err != nil {
		return nil, err
	}
	if err := p.expect(TokRParen, `")"`); err != nil {
		return nil, err
	}
	p.leave()
	return c, nil
}

// parseAggregate parses op [grouping] ([param,] expr) [grouping].
func (p *parser) parseAggregate() (*Aggregate, error) {
	ot := p.Tok
	a := &Aggregate{Op: AggOp(strings.ToLower(ot.Text))}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	grouped := false
	if p.isGroupingKeyword() {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
		grouped = true
	}
	if err := p.expect(TokLParen, fmt.Sprintf(`"(" after %s`, a.Op)); err != nil {
		return nil, err
	}
	if aggOps[a.Op].param {
		nt := p.Tok
		if nt.Kind != TokNumber {
			return nil, p.errorf(nt.Pos, "%s needs a number first, as in %s", a.Op, paramExample(a.Op))
		}
		if err := checkParam(a.Op, nt.Num); err != nil {
			return nil, p.errorf(nt.Pos, "%s", err)
		}
		a.Param = nt.Num
		if err := p.Advance(); err != nil {
			return nil, err
		}
		if err := p.expect(TokComma, `","`); err != nil {
			return nil, err
		}
	}
	inner := p.Tok
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if _, raw := e.(*Selector); raw {
		return nil, p.errorf(inner.Pos, "%s over raw samples is not supported: wrap the selector in a range function, as in %s(avg_over_time(readings{...}[5m]))", a.Op, a.Op)
	}
	a.Expr = e
	if err := p.expect(TokRParen, `")"`); err != nil {
		return nil, err
	}
	if !grouped && p.isGroupingKeyword() {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
	}
	p.leave()
	return a, nil
}

func paramExample(op AggOp) string {
	if op == AggQuantile {
		return "quantile(0.9, rate(readings[5m]))"
	}
	return string(op) + "(5, rate(readings[5m]))"
}

// checkParam validates k (a whole number from 1 to 1e6) or φ (0 to 1).
func checkParam(op AggOp, v float64) error {
	if op == AggQuantile {
		if !(v >= 0 && v <= 1) {
			return fmt.Errorf("quantile must be between 0 and 1, got %v", v)
		}
		return nil
	}
	if v != math.Trunc(v) || v < 1 || v > 1e6 {
		return fmt.Errorf("%s needs a whole number k from 1 to 1000000, got %v", op, v)
	}
	return nil
}

func (p *parser) isGroupingKeyword() bool {
	return p.Tok.Kind == TokIdent && (strings.EqualFold(p.Tok.Text, "by") || strings.EqualFold(p.Tok.Text, "without"))
}

// parseGrouping parses by (l, ...) or without (l, ...); by () is the same as
// no grouping and is stored as none.
func (p *parser) parseGrouping(a *Aggregate) error {
	a.Without = strings.EqualFold(p.Tok.Text, "without")
	if err := p.Advance(); err != nil {
		return err
	}
	if err := p.expect(TokLParen, `"(" and label names`); err != nil {
		return err
	}
	var labels []string
	for p.Tok.Kind != TokRParen {
		if p.Tok.Kind != TokIdent {
			return p.unexpected(`a label name or ")"`)
		}
		if err := checkGroupLabel(p.Tok.Text); err != nil {
			return p.errorf(p.Tok.Pos, "%s", err)
		}
		labels = append(labels, p.Tok.Text)
		if err := p.Advance(); err != nil {
			return err
		}
		if p.Tok.Kind == TokComma {
			if err := p.Advance(); err != nil {
				return err
			}
			continue
		}
		if p.Tok.Kind != TokRParen {
			return p.unexpected(`"," or ")"`)
		}
	}
	a.Grouping = labels
	return p.Advance()
}
