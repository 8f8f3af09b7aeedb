package promapi

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	*query.Scanner
	depth int
}

// identChars are what PromQL metric names hold besides the query
// language's identifier characters: ':' from PromQL, and '.' because
// edgeplat metric names are <device>.<reading> (PromQL gives '.' no other
// meaning outside numbers).
const identChars = ":."

// parse reads a PromQL expression. Errors are *errorAt.
func parse(src string) (node, error) {
	p := &parser{Scanner: query.NewScanner(query.NewLexer(src, identChars))}
	n, err := p.parse()
	var pe *query.ParseError
	if errors.As(err, &pe) { // from the lexer
		return nil, &errorAt{pos: pe.Offset, msg: pe.Msg}
	}
	return n, err
}

func (p *parser) parse() (node, error) {
	if err := p.Advance(); err != nil {
		return nil, err
	}
	n, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.Tok.Kind != query.TokEOF {
		return nil, p.unexpected("end of input")
	}
	return n, nil
}

// errorAt is a syntax error in the query at a byte offset; the handler
// answers it with bad_data.
type errorAt struct {
	pos int
	msg string
}

func (e *errorAt) Error() string { return e.msg }

func (p *parser) errorf(pos int, format string, args ...any) error {
	return &errorAt{pos: pos, msg: fmt.Sprintf(format, args...)}
}

// describe names a token in an error message, as written.
func describe(t query.Token) string {
	switch t.Kind {
	case query.TokEOF:
		return "end of input"
	case query.TokString:
		return "string " + query.Shorten(t.Text)
	}
	return strconv.Quote(t.Text)
}

// labelName is the label a token names, when it can name one: PromQL's
// Inf and NaN lex as numbers but are names inside braces and groupings.
func labelName(t query.Token) (string, bool) {
	switch t.Kind {
	case query.TokIdent:
		return t.Text, true
	case query.TokString:
		return t.Val, true
	case query.TokNumber:
		if strings.EqualFold(t.Text, "inf") || strings.EqualFold(t.Text, "nan") {
			return t.Text, true
		}
	}
	return "", false
}

// checkRange refuses what the query language's lexer reads but Prometheus
// does not: a number beyond float64 (1e400) or a duration over maxDuration.
func (p *parser) checkRange(t query.Token) error {
	if (t.Kind == query.TokNumber && math.IsInf(t.Num, 0) && !strings.EqualFold(t.Text, "inf")) ||
		(t.Kind == query.TokDuration && t.Dur > maxDuration) {
		return p.errorf(t.Pos, "invalid number or duration %q", query.Shorten(t.Text))
	}
	return nil
}

// unexpected names the PromQL feature the current token starts when it is
// one this API leaves out.
func (p *parser) unexpected(want string) error {
	t := p.Tok
	if err := p.checkRange(t); err != nil {
		return err
	}
	switch {
	case t.Kind == query.TokAt:
		return p.errorf(t.Pos, "unsupported: the @ modifier")
	case t.Kind == query.TokColon:
		return p.errorf(t.Pos, "unsupported: subqueries")
	case t.Kind == query.TokIdent && strings.EqualFold(t.Text, "offset"):
		return p.errorf(t.Pos, "unsupported: the offset modifier")
	case t.Kind == query.TokBinOp:
		return p.errorf(t.Pos, "unsupported: binary operator %q between series (only arithmetic between numbers, such as 1+1, is supported)", t.Text)
	case t.Kind == query.TokIdent && isSetOp(t.Text):
		return p.errorf(t.Pos, "unsupported: binary operator %q", t.Text)
	case t.Kind == query.TokLBracket:
		return p.errorf(t.Pos, "a range [...] may only follow a vector selector, as in metric[5m]")
	}
	return p.errorf(t.Pos, "unexpected %s, expected %s", describe(t), want)
}

func isSetOp(s string) bool {
	switch strings.ToLower(s) {
	case "and", "or", "unless":
		return true
	}
	return false
}

func (p *parser) expect(k query.TokKind, want string) error {
	if p.Tok.Kind != k {
		return p.unexpected(want)
	}
	return p.Advance()
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return p.errorf(p.Tok.Pos, "expression nested deeper than %d levels", maxDepth)
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
	for p.Tok.Kind == query.TokBinOp || (p.Tok.Kind == query.TokIdent && isSetOp(p.Tok.Text)) {
		op := p.Tok
		if op.Kind != query.TokBinOp {
			return nil, p.unexpected("")
		}
		prec := precedence(op.Text)
		if prec < minPrec {
			break
		}
		if err := p.Advance(); err != nil {
			return nil, err
		}
		if p.Tok.Kind == query.TokIdent && (strings.EqualFold(p.Tok.Text, "bool") || strings.EqualFold(p.Tok.Text, "on") ||
			strings.EqualFold(p.Tok.Text, "ignoring")) {
			return nil, p.errorf(p.Tok.Pos, "unsupported: %q in binary operations", p.Tok.Text)
		}
		next := prec + 1
		if op.Text == "^" {
			next = prec // right-associative
		}
		right, err := p.parseExpr(next)
		if err != nil {
			return nil, err
		}
		l, lok := left.(*number)
		r, rok := right.(*number)
		if !lok || !rok || prec == 1 {
			return nil, p.errorf(op.Pos, "unsupported: binary operator %q between series or comparisons (only arithmetic between numbers, such as 1+1, is supported)", op.Text)
		}
		left = &number{v: arith(op.Text, l.v, r.v)}
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
	if p.Tok.Kind == query.TokBinOp && (p.Tok.Text == "-" || p.Tok.Text == "+") {
		op := p.Tok
		if err := p.Advance(); err != nil {
			return nil, err
		}
		n, err := p.parseUnary()
		if err != nil {
			return nil, err
		}
		num, ok := n.(*number)
		if !ok {
			return nil, p.errorf(op.Pos, "unsupported: unary %q on a series", op.Text)
		}
		if op.Text == "-" {
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
	if p.Tok.Kind != query.TokLBracket {
		if p.Tok.Kind == query.TokAt || (p.Tok.Kind == query.TokIdent && strings.EqualFold(p.Tok.Text, "offset")) {
			return nil, p.unexpected("")
		}
		return n, nil
	}
	sel, ok := n.(*vectorSel)
	if !ok {
		return nil, p.errorf(p.Tok.Pos, "unsupported: subqueries (a range after an expression other than a vector selector)")
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	dt := p.Tok
	if err := p.checkRange(dt); err != nil {
		return nil, err
	}
	switch dt.Kind {
	case query.TokDuration:
	case query.TokNumber:
		return nil, p.errorf(dt.Pos, "range %q needs a unit, as in [5m]", dt.Text)
	default:
		return nil, p.unexpected("a duration such as 5m")
	}
	if dt.Dur <= 0 {
		return nil, p.errorf(dt.Pos, "range must be positive, got %q", dt.Text)
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if p.Tok.Kind == query.TokColon {
		return nil, p.unexpected("")
	}
	if err := p.expect(query.TokRBracket, `"]"`); err != nil {
		return nil, err
	}
	m := &matrixSel{sel: sel, rng: dt.Dur}
	if p.Tok.Kind == query.TokAt || (p.Tok.Kind == query.TokIdent && strings.EqualFold(p.Tok.Text, "offset")) {
		return nil, p.unexpected("")
	}
	return m, nil
}

func (p *parser) parseOperand() (node, error) {
	t := p.Tok
	switch t.Kind {
	case query.TokNumber:
		if err := p.checkRange(t); err != nil {
			return nil, err
		}
		if err := p.Advance(); err != nil {
			return nil, err
		}
		return &number{v: t.Num}, nil
	case query.TokLParen:
		if err := p.Advance(); err != nil {
			return nil, err
		}
		n, err := p.parseExpr(0)
		if err != nil {
			return nil, err
		}
		return n, p.expect(query.TokRParen, `")"`)
	case query.TokLBrace:
		return p.parseSelector("", t.Pos)
	case query.TokString:
		return nil, p.errorf(t.Pos, "unsupported: string literals")
	case query.TokIdent:
		return p.parseIdent()
	}
	return nil, p.unexpected("a selector, function, aggregation or number")
}

func (p *parser) parseIdent() (node, error) {
	t := p.Tok
	next, err := p.Peek()
	if err != nil {
		return nil, err
	}
	lower := strings.ToLower(t.Text)
	switch {
	case aggOps[lower] && (next.Kind == query.TokLParen || isGrouping(next)):
		return p.parseAggregate()
	case promAggOps[lower] && (next.Kind == query.TokLParen || isGrouping(next)):
		return nil, p.errorf(t.Pos, "unsupported: aggregation %q; supported aggregations are %s", t.Text, sortedKeys(aggOps))
	case next.Kind == query.TokLParen:
		if f, ok := rangeFuncs[t.Text]; ok {
			return p.parseCall(f)
		}
		return nil, p.errorf(t.Pos, "unsupported: function %q; supported functions are %s, and the aggregations %s",
			t.Text, sortedKeys(rangeFuncs), sortedKeys(aggOps))
	case isSetOp(t.Text) || strings.EqualFold(t.Text, "by") || strings.EqualFold(t.Text, "without") ||
		strings.EqualFold(t.Text, "offset") || strings.EqualFold(t.Text, "bool"):
		return nil, p.unexpected("a selector, function, aggregation or number")
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if p.Tok.Kind == query.TokLBrace {
		return p.parseSelector(t.Text, t.Pos)
	}
	return &vectorSel{matchers: []query.Matcher{{Label: query.LabelMetricName, Op: query.MatchEqual, Value: t.Text}}}, nil
}

func isGrouping(t query.Token) bool {
	return t.Kind == query.TokIdent && (strings.EqualFold(t.Text, "by") || strings.EqualFold(t.Text, "without"))
}

// parseSelector parses {matchers} after an optional metric name. Inside
// the braces a lone string is the metric name (Prometheus 3's quoted
// form, {"boiler.temp"}) and label names may be quoted too.
func (p *parser) parseSelector(metric string, pos int) (node, error) {
	sel := &vectorSel{}
	if metric != "" {
		sel.matchers = append(sel.matchers, query.Matcher{Label: query.LabelMetricName, Op: query.MatchEqual, Value: metric})
	}
	if err := p.expect(query.TokLBrace, `"{"`); err != nil {
		return nil, err
	}
	for p.Tok.Kind != query.TokRBrace {
		lt := p.Tok
		if _, ok := labelName(lt); !ok {
			return nil, p.unexpected("a label name")
		}
		if err := p.Advance(); err != nil {
			return nil, err
		}
		if lt.Kind == query.TokString && (p.Tok.Kind == query.TokComma || p.Tok.Kind == query.TokRBrace) {
			if metric != "" {
				return nil, p.errorf(lt.Pos, "the metric name is given twice")
			}
			metric = lt.Val
			sel.matchers = append(sel.matchers, query.Matcher{Label: query.LabelMetricName, Op: query.MatchEqual, Value: lt.Val})
		} else {
			m, err := p.parseMatcher(lt)
			if err != nil {
				return nil, err
			}
			sel.matchers = append(sel.matchers, m)
		}
		if p.Tok.Kind == query.TokComma {
			if err := p.Advance(); err != nil {
				return nil, err
			}
			continue
		}
		if p.Tok.Kind != query.TokRBrace {
			return nil, p.unexpected(`"," or "}"`)
		}
	}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if len(sel.matchers) == 0 {
		return nil, p.errorf(pos, "vector selector must contain at least one matcher or a metric name")
	}
	return sel, nil
}

func (p *parser) parseMatcher(lt query.Token) (query.Matcher, error) {
	name, _ := labelName(lt)
	label, ok := labelNames[name]
	if !ok {
		if name == "tenant_id" || name == "tenant" {
			return query.Matcher{}, p.errorf(lt.Pos, "%s cannot be matched: every query is scoped to the credential's tenant", name)
		}
		return query.Matcher{}, p.errorf(lt.Pos, "unknown label %q: labels are __name__, agent, device, protocol and unit, and quality can be matched", name)
	}
	var op query.MatchOp
	switch p.Tok.Kind {
	case query.TokEq:
		op = query.MatchEqual
	case query.TokNeq:
		op = query.MatchNotEqual
	case query.TokRe:
		op = query.MatchRegexp
	case query.TokNre:
		op = query.MatchNotRegexp
	default:
		return query.Matcher{}, p.unexpected(`"=", "!=", "=~" or "!~"`)
	}
	if err := p.Advance(); err != nil {
		return query.Matcher{}, err
	}
	vt := p.Tok
	if vt.Kind != query.TokString {
		return query.Matcher{}, p.unexpected("a quoted string")
	}
	if label == query.LabelAgentUUID && (op == query.MatchEqual || op == query.MatchNotEqual) {
		if _, err := codec.ParseUUID(vt.Val); err != nil {
			return query.Matcher{}, p.errorf(vt.Pos, "%s %s %s: not an agent UUID (8-4-4-4-12 hex digits); use =~ to match part of one", name, op, query.Shorten(vt.Text))
		}
	}
	return query.Matcher{Label: label, Op: op, Value: vt.Val}, p.Advance()
}

// parseCall parses fn(expr); translate checks that expr is a range
// selector.
func (p *parser) parseCall(f query.Func) (node, error) {
	c := &call{fn: f, pos: p.Tok.Pos}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	if err := p.expect(query.TokLParen, `"("`); err != nil {
		return nil, err
	}
	arg, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.Tok.Kind == query.TokComma {
		return nil, p.errorf(p.Tok.Pos, "%s takes one argument", f)
	}
	c.arg = arg
	return c, p.expect(query.TokRParen, `")"`)
}

// parseAggregate parses op [grouping] ([param,] expr) [grouping].
func (p *parser) parseAggregate() (node, error) {
	a := &aggregate{op: query.AggOp(strings.ToLower(p.Tok.Text)), pos: p.Tok.Pos}
	if err := p.Advance(); err != nil {
		return nil, err
	}
	grouped := false
	if isGrouping(p.Tok) {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
		grouped = true
	}
	if err := p.expect(query.TokLParen, `"("`); err != nil {
		return nil, err
	}
	first, err := p.parseExpr(0)
	if err != nil {
		return nil, err
	}
	if p.Tok.Kind == query.TokComma {
		if err := p.Advance(); err != nil {
			return nil, err
		}
		a.param = first
		if first, err = p.parseExpr(0); err != nil {
			return nil, err
		}
	}
	a.expr = first
	if err := p.expect(query.TokRParen, `")"`); err != nil {
		return nil, err
	}
	if !grouped && isGrouping(p.Tok) {
		if err := p.parseGrouping(a); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func (p *parser) parseGrouping(a *aggregate) error {
	a.without = strings.EqualFold(p.Tok.Text, "without")
	if err := p.Advance(); err != nil {
		return err
	}
	if err := p.expect(query.TokLParen, `"("`); err != nil {
		return err
	}
	for p.Tok.Kind != query.TokRParen {
		t := p.Tok
		name, ok := labelName(t)
		if !ok {
			return p.unexpected(`a label name or ")"`)
		}
		label, known := labelNames[name]
		switch {
		case !known:
			return p.errorf(t.Pos, "unknown label %q: labels are __name__, agent, device, protocol and unit", name)
		case label == query.AttrQuality:
			return p.errorf(t.Pos, "quality is a sample attribute, not a series label: it can be matched but not grouped by")
		}
		if !slices.Contains(a.grouping, label) {
			a.grouping = append(a.grouping, label)
		}
		if err := p.Advance(); err != nil {
			return err
		}
		if p.Tok.Kind == query.TokComma {
			if err := p.Advance(); err != nil {
				return err
			}
			continue
		}
		if p.Tok.Kind != query.TokRParen {
			return p.unexpected(`"," or ")"`)
		}
	}
	return p.Advance()
}
