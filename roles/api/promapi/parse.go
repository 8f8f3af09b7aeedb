package promapi

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/roles/api/query"
)

// The parser reads the part of PromQL this API answers into a small tree
// (node), whose labels are already the query language's. translate.go
// turns the tree into a query.Expr. Everything else PromQL has is read
// far enough to be named in the error.

// node is a parsed PromQL expression.
type node interface{ promType() string }

// vectorSel is an instant vector selector: metric{matchers}.
type vectorSel struct {
	matchers []query.Matcher
}

// matrixSel is a range vector selector: metric{matchers}[range].
type matrixSel struct {
	sel *vectorSel
	rng time.Duration
}

// call is one of the query language's range functions.
type call struct {
	fn  query.Func
	arg node
	pos int
}

// aggregate is an aggregation operator.
type aggregate struct {
	op       query.AggOp
	param    node // topk, bottomk, quantile
	grouping []string
	without  bool
	expr     node
	pos      int
}

// number is a scalar literal, or constant arithmetic folded into one.
type number struct{ v float64 }

func (*vectorSel) promType() string { return "instant vector" }
func (*matrixSel) promType() string { return "range vector" }
func (*call) promType() string      { return "instant vector" }
func (*aggregate) promType() string { return "instant vector" }
func (*number) promType() string    { return "scalar" }

// labelNames maps the label names a query may use to the query language's:
// the names results carry (__name__, agent, device, protocol, unit), the
// query language's own names as aliases, and quality, which filters
// samples but is no series label.
var labelNames = map[string]string{
	"__name__":    query.LabelMetricName,
	"metric_name": query.LabelMetricName,
	"agent":       query.LabelAgentUUID,
	"agent_uuid":  query.LabelAgentUUID,
	"device":      query.LabelDeviceName,
	"device_name": query.LabelDeviceName,
	"protocol":    query.LabelProtocol,
	"unit":        query.LabelUnit,
	"quality":     query.AttrQuality,
}

// promLabels maps the query language's series labels to the names results
// carry, in the order /labels lists them.
var promLabels = []struct{ lang, prom string }{
	{query.LabelMetricName, "__name__"},
	{query.LabelAgentUUID, "agent"},
	{query.LabelDeviceName, "device"},
	{query.LabelProtocol, "protocol"},
	{query.LabelUnit, "unit"},
}

func toPromLabels(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for _, l := range promLabels {
		if v := m[l.lang]; v != "" {
			out[l.prom] = v
		}
	}
	return out
}

var rangeFuncs = map[string]query.Func{}

var aggOps = map[string]bool{}

func init() {
	for _, f := range []query.Func{query.FuncRate, query.FuncIncrease, query.FuncDelta, query.FuncAvgOverTime, query.FuncMinOverTime,
		query.FuncMaxOverTime, query.FuncSumOverTime, query.FuncCntOverTime, query.FuncLastOver} {
		rangeFuncs[string(f)] = f
	}
	for _, a := range []query.AggOp{query.AggSum, query.AggAvg, query.AggMin, query.AggMax, query.AggCount, query.AggStddev,
		query.AggStdvar, query.AggTopK, query.AggBottomK, query.AggQuantile} {
		aggOps[string(a)] = true
	}
}

// promAggOps are PromQL's aggregations this API does not have, named in
// the error rather than taken for a metric.
var promAggOps = map[string]bool{"group": true, "count_values": true, "limitk": true, "limit_ratio": true}

func sortedKeys[V any](m map[string]V) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// maxDepth bounds nesting while parsing, before the query language's own
// max_depth applies to what is left: a deep input must not exhaust the
// stack.
const maxDepth = 50

type parser struct {
	lex   lexer
	tok   token
	ahead *token
	depth int
}

// parse reads a PromQL expression.
func parse(src string) (node, error) {
	p := &parser{lex: lexer{src: src}}
	if err := p.advance(); err != nil {
		return nil, err
	}
	n, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind != tokEOF {
		return nil, p.unexpected("end of input")
	}
	return n, nil
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

func (p *parser) errorf(pos int, format string, args ...any) error {
	return p.lex.errorf(pos, format, args...)
}

// unexpected names the PromQL feature the current token starts when it is
// one this API leaves out.
func (p *parser) unexpected(want string) error {
	t := p.tok
	switch {
	case t.kind == tokAt:
		return p.errorf(t.pos, "unsupported: the @ modifier")
	case t.kind == tokColon:
		return p.errorf(t.pos, "unsupported: subqueries")
	case t.kind == tokIdent && strings.EqualFold(t.text, "offset"):
		return p.errorf(t.pos, "unsupported: the offset modifier")
	case t.kind == tokBinOp:
		return p.errorf(t.pos, "unsupported: binary operator %q between series (only arithmetic between numbers, such as 1+1, is supported)", t.text)
	case t.kind == tokIdent && isSetOp(t.text):
		return p.errorf(t.pos, "unsupported: binary operator %q", t.text)
	case t.kind == tokLBracket:
		return p.errorf(t.pos, "a range [...] may only follow a vector selector, as in metric[5m]")
	}
	return p.errorf(t.pos, "unexpected %s, expected %s", t.describe(), want)
}

func isSetOp(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "unless":
		return true
	}
	return false
}

func (p *parser) expect(k tokKind, want string) error {
	if p.tok.kind != k {
		return p.unexpected(want)
	}
	return p.advance()
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.tok.pos, "expression nested deeper than %d levels", maxDepth)
	}
	return nil
}

// binary operator precedence, PromQL's: higher binds tighter.
func precedence(op string) int {
	switch op {
	case "^":
		return 4
	case "*", "/", "%":
		return 3
	case "+", "-":
		return 2
	}
	return 1 // comparisons
}

// parseExpr parses operands joined by binary operators of at least
// minPrec. Only arithmetic between numbers is evaluated (folded here);
// anything else involving a binary operator is refused.
func (p *parser) parseExpr(minPrec int) (node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	left, err := p.parseUnary()
	if err != nil {
		return nil, err
	}
	for p.tok.kind == tokBinOp || (p.tok.kind == tokIdent && isSetOp(p.tok.text)) {
		op := p.tok
		if op.kind != tokBinOp {
			return nil, p.unexpected("")
		}
		prec := precedence(op.text)
		if prec < minPrec {
			break
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if p.tok.kind == tokIdent && (strings.EqualFold(p.tok.text, "bool") || strings.EqualFold(p.tok.text, "on") ||
			strings.EqualFold(p.tok.text, "ignoring")) {
			return nil, p.errorf(p.tok.pos, "unsupported: %q in binary operations", p.tok.text)
		}
		next := prec + 1
		if op.text == "^" {
			next = prec // right-associative
		}
		right, err := p.parseExpr(next)
		if err != nil {
			return nil, err
		}
		l, lok := left.(*number)
		r, rok := right.(*number)
		if !lok || !rok || prec == 1 {
			return nil, p.errorf(op.pos, "unsupported: binary operator %q between series or comparisons (only arithmetic between numbers, such as 1+1, is supported)", op.text)
		}
		left = &number{v: arith(op.text, l.v, r.v)}
	}
	return left, nil
}

func arith(op string, a, b float64) float64 {
	switch op {
	case "+":
		return a + b
	case "-":
		return a - b
	case "*":
		return a * b
	case "/":
		return a / b
	case "%":
		return math.Mod(a, b)
	case "^":
		return math.Pow(a, b)
	}
	panic("BUG: arith of operator " + op)
}

// parseUnary parses an operand with an optional sign.
func (p *parser) parseUnary() (node, error) {
	if p.tok.kind == tokBinOp && (p.tok.text == "-" || p.tok.text == "+") {
		op := p.tok
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		num, ok := n.(*number)
		if !ok {
			return nil, p.errorf(op.pos, "unsupported: unary %q on a series", op.text)
		}
		if op.text == "-" {
			return &number{v: -num.v}, nil
		}
		return num, nil
	}
	n, err := p.parseOperand()
	if err != nil {
		return nil, err
	}
	return p.parseSuffix(n)
}

// parseSuffix parses what may follow an operand: a range, which makes a
// vector selector a range selector; offset, @ and subqueries are refused.
func (p *parser) parseSuffix(n node) (node, error) {
	if p.tok.kind != tokLBracket {
		if p.tok.kind == tokAt || (p.tok.kind == tokIdent && strings.EqualFold(p.tok.text, "offset")) {
			return nil, p.unexpected("")
		}
		return n, nil
	}
	sel, ok := n.(*vectorSel)
	if !ok {
		return nil, p.errorf(p.tok.pos, "unsupported: subqueries (a range after an expression other than a vector selector)")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	dt := p.tok
	switch dt.kind {
	case tokDuration:
	case tokNumber:
		return nil, p.errorf(dt.pos, "range %q needs a unit, as in [5m]", dt.text)
	default:
		return nil, p.unexpected("a duration such as 5m")
	}
	if dt.dur <= 0 {
		return nil, p.errorf(dt.pos, "range must be positive, got %q", dt.text)
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokColon {
		return nil, p.unexpected("")
	}
	if err := p.expect(tokRBracket, `"]"`); err != nil {
		return nil, err
	}
	m := &matrixSel{sel: sel, rng: dt.dur}
	if p.tok.kind == tokAt || (p.tok.kind == tokIdent && strings.EqualFold(p.tok.text, "offset")) {
		return nil, p.unexpected("")
	}
	return m, nil
}

func (p *parser) parseOperand() (node, error) {
	t := p.tok
	switch t.kind {
	case tokNumber:
		if err := p.advance(); err != nil {
			return nil, err
		}
		return &number{v: t.num}, nil
	case tokLParen:
		if err := p.advance(); err != nil {
			return nil, err
		}
		n, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		return n, p.expect(tokRParen, `")"`)
	case tokLBrace:
		return p.parseSelector("", t.pos)
	case tokString:
		return nil, p.errorf(t.pos, "unsupported: string literals")
	case tokIdent:
		return p.parseIdent()
	}
	return nil, p.unexpected("a selector, function, aggregation or number")
}

func (p *parser) parseIdent() (node, error) {
	t := p.tok
	next, err := p.peek()
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(t.text)
	switch {
	case lower == "inf" || lower == "nan":
		if err := p.advance(); err != nil {
			return nil, err
		}
		if lower == "nan" {
			return &number{v: math.NaN()}, nil
		}
		return &number{v: math.Inf(1)}, nil
	case aggOps[lower] && (next.kind == tokLParen || isGrouping(next)):
		return p.parseAggregate()
	case promAggOps[lower] && (next.kind == tokLParen || isGrouping(next)):
		return nil, p.errorf(t.pos, "unsupported: aggregation %q; supported aggregations are %s", t.text, sortedKeys(aggOps))
	case next.kind == tokLParen:
		if f, ok := rangeFuncs[t.text]; ok {
			return p.parseCall(f)
		}
		return nil, p.errorf(t.pos, "unsupported: function %q; supported functions are %s, and the aggregations %s",
			t.text, sortedKeys(rangeFuncs), sortedKeys(aggOps))
	case isSetOp(t.text) || strings.EqualFold(t.text, "by") || strings.EqualFold(t.text, "without") ||
		strings.EqualFold(t.text, "offset") || strings.EqualFold(t.text, "bool"):
		return nil, p.unexpected("a selector, function, aggregation or number")
	}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if p.tok.kind == tokLBrace {
		return p.parseSelector(t.text, t.pos)
	}
	return &vectorSel{matchers: []query.Matcher{{Label: query.LabelMetricName, Op: query.MatchEqual, Value: t.text}}}, nil
}

func isGrouping(t token) bool {
	return t.kind == tokIdent && (strings.EqualFold(t.text, "by") || strings.EqualFold(t.text, "without"))
}

// parseSelector parses {matchers} after an optional metric name. Inside
// the braces a lone string is the metric name (Prometheus 3's quoted
// form, {"boiler.temp"}) and label names may be quoted too.
func (p *parser) parseSelector(metric string, pos int) (node, error) {
	sel := &vectorSel{}
	if metric != "" {
		sel.matchers = append(sel.matchers, query.Matcher{Label: query.LabelMetricName, Op: query.MatchEqual, Value: metric})
	}
	if err := p.expect(tokLBrace, `"{"`); err != nil {
		return nil, err
	}
	for p.tok.kind != tokRBrace {
		lt := p.tok
		if lt.kind != tokIdent && lt.kind != tokString {
			return nil, p.unexpected("a label name")
		}
		if err := p.advance(); err != nil {
			return nil, err
		}
		if lt.kind == tokString && (p.tok.kind == tokComma || p.tok.kind == tokRBrace) {
			if metric != "" {
				return nil, p.errorf(lt.pos, "the metric name is given twice")
			}
			metric = lt.val
			sel.matchers = append(sel.matchers, query.Matcher{Label: query.LabelMetricName, Op: query.MatchEqual, Value: lt.val})
		} else {
			m, err := p.parseMatcher(lt)
			if err != nil {
				return nil, err
			}
			sel.matchers = append(sel.matchers, m)
		}
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
	if err := p.advance(); err != nil {
		return nil, err
	}
	if len(sel.matchers) == 0 {
		return nil, p.errorf(pos, "vector selector must contain at least one matcher or a metric name")
	}
	return sel, nil
}

func (p *parser) parseMatcher(lt token) (query.Matcher, error) {
	name := lt.text
	if lt.kind == tokString {
		name = lt.val
	}
	label, ok := labelNames[name]
	if !ok {
		if name == "tenant_id" || name == "tenant" {
			return query.Matcher{}, p.errorf(lt.pos, "%s cannot be matched: every query is scoped to the credential's tenant", name)
		}
		return query.Matcher{}, p.errorf(lt.pos, "unknown label %q: labels are __name__, agent, device, protocol and unit, and quality can be matched", name)
	}
	var op query.MatchOp
	switch p.tok.kind {
	case tokEq:
		op = query.MatchEqual
	case tokNeq:
		op = query.MatchNotEqual
	case tokRe:
		op = query.MatchRegexp
	case tokNre:
		op = query.MatchNotRegexp
	default:
		return query.Matcher{}, p.unexpected(`"=", "!=", "=~" or "!~"`)
	}
	if err := p.advance(); err != nil {
		return query.Matcher{}, err
	}
	vt := p.tok
	if vt.kind != tokString {
		return query.Matcher{}, p.unexpected("a quoted string")
	}
	if label == query.LabelAgentUUID && (op == query.MatchEqual || op == query.MatchNotEqual) {
		if _, err := codec.ParseUUID(vt.val); err != nil {
			return query.Matcher{}, p.errorf(vt.pos, "%s %s %s: not an agent UUID (8-4-4-4-12 hex digits); use =~ to match part of one", name, op, shorten(vt.text))
		}
	}
	return query.Matcher{Label: label, Op: op, Value: vt.val}, p.advance()
}

// parseCall parses fn(expr); translate checks that expr is a range
// selector.
func (p *parser) parseCall(f query.Func) (node, error) {
	c := &call{fn: f, pos: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	if err := p.expect(tokLParen, `"("`); err != nil {
		return nil, err
	}
	arg, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tokComma {
		return nil, p.errorf(p.tok.pos, "%s takes one argument", f)
	}
	c.arg = arg
	return c, p.expect(tokRParen, `")"`)
}

// parseAggregate parses op [grouping] ([param,] expr) [grouping].
func (p *parser) parseAggregate() (node, error) {
	a := &aggregate{op: query.AggOp(strings.ToLower(p.tok.text)), pos: p.tok.pos}
	if err := p.advance(); err != nil {
		return nil, err
	}
	grouped := false
	if isGrouping(p.tok) {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
		grouped = true
	}
	if err := p.expect(tokLParen, `"("`); err != nil {
		return nil, err
	}
	first, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.tok.kind == tokComma {
		if err := p.advance(); err != nil {
			return nil, err
		}
		a.param = first
		if first, err = p.parseExpr(0); err != nil {
			return nil, err
		}
	}
	a.expr = first
	if err := p.expect(tokRParen, `")"`); err != nil {
		return nil, err
	}
	if !grouped && isGrouping(p.tok) {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (p *parser) parseGrouping(a *aggregate) error {
	a.without = strings.EqualFold(p.tok.text, "without")
	if err := p.advance(); err != nil {
		return err
	}
	if err := p.expect(tokLParen, `"("`); err != nil {
		return err
	}
	for p.tok.kind != tokRParen {
		t := p.tok
		if t.kind != tokIdent && t.kind != tokString {
			return p.unexpected(`a label name or ")"`)
		}
		name := t.text
		if t.kind == tokString {
			name = t.val
		}
		label, ok := labelNames[name]
		switch {
		case !ok:
			return p.errorf(t.pos, "unknown label %q: labels are __name__, agent, device, protocol and unit", name)
		case label == query.AttrQuality:
			return p.errorf(t.pos, "quality is a sample attribute, not a series label: it can be matched but not grouped by")
		}
		if !slices.Contains(a.grouping, label) {
			a.grouping = append(a.grouping, label)
		}
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
	return p.advance()
}
