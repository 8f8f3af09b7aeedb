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
	p := &parser{lex: lexer{src: src}, maxDepth: lim.MaxDepth}
	if err := p.advance(); err != nil {
		return nil, err
	}
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected("end of input")
	}
	return e, nil
}

type parser struct {
	lex      lexer
	tok      token
	ahead    *token
	depth    int
	maxDepth int
}

func (p *parser) advance() error {
	if p.ahead != nil {
		p.tok, p.ahead = *p.ahead, nil
		return nil
	}
	t, err := p.lex.next()
	if err != nil {
		return err
	}
	p.tok = t
	return nil
}

func (p *parser) peek() (token, error) {
	if p.ahead == nil {
		t, err := p.lex.next()
		if err != nil {
			return token{}, err
		}
		p.ahead = &t
	}
	return *p.ahead, nil
}

func (p *parser) errorf(pos int, format string, args ...any) *ParseError {
	return newParseError(p.lex.src, pos, format, args...)
}

// unexpected reports the current token where want was expected, naming the
// PromQL features this language leaves out when the token is one of theirs.
func (p *parser) unexpected(want string) *ParseError {
	t := p.tok
	switch {
	case t.kind == tokBinOp:
		return p.errorf(t.pos, "binary operators (%s) are not supported", t.text)
	case t.kind == tokAt:
		return p.errorf(t.pos, "the @ modifier is not supported")
	case t.kind == tokColon:
		return p.errorf(t.pos, "subqueries are not supported")
	case t.kind == tokIdent && strings.EqualFold(t.text, "offset"):
		return p.errorf(t.pos, "offset modifiers are not supported")
	case t.kind == tokLBracket:
		return p.errorf(t.pos, "a range selector [...] is only allowed directly inside a range function, as in rate(readings{...}[5m])")
	}
	return p.errorf(t.pos, "unexpected %s, expected %s", t.describe(), want)
}

func (p *parser) expect(k tokKind, want string) error {
	if p.tok.kind != k {
		return p.unexpected(want)
	}
	return p.advance()
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
	t := p.tok
	switch t.kind {
	case tokLParen:
		if err := p.enter(); err != nil {
			return nil, err
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		e, err := p.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := p.expect(tokRParen, `")"`); err != nil {
			return nil, err
		}
		p.leave()
		return e, nil
	case tokLBrace:
		return p.parseSelector()
	case tokIdent:
		if t.text == "readings" {
			return p.parseSelector()
		}
		if _, ok := aggOps[AggOp(strings.ToLower(t.text))]; ok {
			return p.parseAggregate()
		}
		if _, ok := funcs[Func(t.text)]; ok {
			return p.parseCall()
		}
		if strings.EqualFold(t.text, "by") || strings.EqualFold(t.text, "without") {
			return nil, p.errorf(t.pos, "unexpected %q: by and without follow an aggregation operator, as in sum by (agent_uuid) (...)", t.text)
		}
		next, err := p.peek()
		if err != nil {
			return nil, err
		}
		if next.kind == tokLParen {
			return nil, p.errorf(t.pos, "unknown function %q; range functions are %s; aggregations are %s", t.text, funcNames(), aggNames())
		}
		return nil, p.errorf(t.pos, "unknown metric %q: the only series source is readings; select a metric with readings{metric_name=%q}", t.text, t.text)
	case tokNumber:
		return nil, p.errorf(t.pos, "unexpected number %q: numbers are only allowed as the first argument of topk, bottomk and quantile", t.text)
	case tokString:
		return nil, p.errorf(t.pos, "unexpected string: label matchers go inside braces, as in readings{metric_name=\"...\"}")
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
	start := p.tok.pos
	bare := p.tok.kind == tokLBrace
	if !bare {
		if err := p.advance(); err != nil {
			return nil, err
		}
	}
	sel := &Selector{}
	if p.tok.kind == tokLBrace {
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
	if err := p.expect(tokLBrace, `"{"`); err != nil {
		return nil, err
	}
	var ms []Matcher
	for p.tok.kind != tokRBrace {
		m, err := p.parseMatcher()
		if err != nil {
			return nil, err
		}
		ms = append(ms, m)
		if p.tok.kind == tokComma {
			if err := p.advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.tok.kind != tokRBrace {
			return nil, p.unexpected(`"," or "}"`)
		}
	}
	return ms, p.advance()
}

func (p *parser) parseMatcher() (Matcher, error) {
	lt := p.tok
	if lt.kind != tokIdent {
		return Matcher{}, p.unexpected("a label name")
	}
	if err := checkMatchLabel(lt.text); err != nil {
		return Matcher{}, p.errorf(lt.pos, "%s", err)
	}
	if err := p.advance(); err != nil {
		return Matcher{}, err
	}
	var op MatchOp
	switch p.tok.kind {
	case tokEq:
		op = MatchEqual
	case tokNeq:
		op = MatchNotEqual
	case tokRe:
		op = MatchRegexp
	case tokNre:
		op = MatchNotRegexp
	default:
		return Matcher{}, p.unexpected(`"=", "!=", "=~" or "!~"`)
	}
	if err := p.advance(); err != nil {
		return Matcher{}, err
	}
	vt := p.tok
	if vt.kind != tokString {
		return Matcher{}, p.unexpected("a quoted string")
	}
	m := Matcher{Label: lt.text, Op: op, Value: vt.val}
	switch {
	case op == MatchRegexp || op == MatchNotRegexp:
		if _, err := pgRegex(m.Value); err != nil {
			return Matcher{}, p.errorf(vt.pos, "%s", err)
		}
	case m.Label == LabelAgentUUID:
		u, err := codec.ParseUUID(m.Value)
		if err != nil {
			return Matcher{}, p.errorf(vt.pos, "agent_uuid %s %s: not a UUID (8-4-4-4-12 hex digits); use =~ to match part of one", op, shorten(strconv.Quote(m.Value)))
		}
		m.Value = u.String()
	}
	return m, p.advance()
}

// parseCall parses func(selector[range]).
func (p *parser) parseCall() (*Call, error) {
	ft := p.tok
	c := &Call{Func: Func(ft.text)}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tokLParen, fmt.Sprintf(`"(" after %s`, ft.text)); err != nil {
		return nil, err
	}
	if !(p.tok.kind == tokLBrace || (p.tok.kind == tokIdent && p.tok.text == "readings")) {
		if p.tok.kind == tokIdent || p.tok.kind == tokLParen {
			return nil, p.errorf(p.tok.pos, "%s takes a range selector such as readings{...}[5m], not an expression", ft.text)
		}
		return nil, p.unexpected("a range selector such as readings{...}[5m]")
	}
	sel, err := p.parseSelector()
	if err != nil {
		return nil, err
	}
	c.Selector = sel
	if p.tok.kind != tokLBracket {
		return nil, p.errorf(p.tok.pos, "%s needs a range: %s(%s[5m])", ft.text, ft.text, shorten(sel.String()))
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	dt := p.tok
	switch dt.kind {
	case tokDuration:
	case tokNumber:
		return nil, p.errorf(dt.pos, "range %q needs a unit, as in [5m] (units ms, s, m, h, d, w, y)", dt.text)
	default:
		return nil, p.unexpected("a duration such as 5m")
	}
	if dt.dur <= 0 {
		return nil, p.errorf(dt.pos, "range must be positive, got %q", dt.text)
	}
	c.Range = dt.dur
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tokRBracket, `"]"`); err != nil {
		return nil, err
	}
	if err := p.expect(tokRParen, `")"`); err != nil {
		return nil, err
	}
	p.leave()
	return c, nil
}

// parseAggregate parses op [grouping] ([param,] expr) [grouping].
func (p *parser) parseAggregate() (*Aggregate, error) {
	ot := p.tok
	a := &Aggregate{Op: AggOp(strings.ToLower(ot.text))}
	if err := p.enter(); err != nil {
		return nil, err
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	grouped := false
	if p.isGroupingKeyword() {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
		grouped = true
	}
	if err := p.expect(tokLParen, fmt.Sprintf(`"(" after %s`, a.Op)); err != nil {
		return nil, err
	}
	if aggOps[a.Op].param {
		nt := p.tok
		if nt.kind != tokNumber {
			return nil, p.errorf(nt.pos, "%s needs a number first, as in %s", a.Op, paramExample(a.Op))
		}
		if err := checkParam(a.Op, nt.num); err != nil {
			return nil, p.errorf(nt.pos, "%s", err)
		}
		a.Param = nt.num
		if err := p.advance(); err != nil {
			return nil, err
		}
		if err := p.expect(tokComma, `","`); err != nil {
			return nil, err
		}
	}
	inner := p.tok
	e, err := p.parseExpr()
	if err != nil {
		return nil, err
	}
	if _, raw := e.(*Selector); raw {
		return nil, p.errorf(inner.pos, "%s over raw samples is not supported: wrap the selector in a range function, as in %s(avg_over_time(readings{...}[5m]))", a.Op, a.Op)
	}
	a.Expr = e
	if err := p.expect(tokRParen, `")"`); err != nil {
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
	return p.tok.kind == tokIdent && (strings.EqualFold(p.tok.text, "by") || strings.EqualFold(p.tok.text, "without"))
}

// parseGrouping parses by (l, ...) or without (l, ...); by () is the same as
// no grouping and is stored as none.
func (p *parser) parseGrouping(a *Aggregate) error {
	a.Without = strings.EqualFold(p.tok.text, "without")
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expect(tokLParen, `"(" and label names`); err != nil {
		return err
	}
	var labels []string
	for p.tok.kind != tokRParen {
		if p.tok.kind != tokIdent {
			return p.unexpected(`a label name or ")"`)
		}
		if err := checkGroupLabel(p.tok.text); err != nil {
			return p.errorf(p.tok.pos, "%s", err)
		}
		labels = append(labels, p.tok.text)
		if err := p.advance(); err != nil {
			return err
		}
		if p.tok.kind == tokComma {
			if err := p.advance(); err != nil {
				return err
			}
			continue
		}
		if p.tok.kind != tokRParen {
			return p.unexpected(`"," or ")"`)
		}
	}
	a.Grouping = labels
	return p.advance()
}
