package query

import (
	"strconv"
	"strings"
	"time"
)

// Expr is a parsed query: a *Selector (raw samples), a *Call (a range
// function over a selector) or an *Aggregate. String gives query text that
// parses back to an equal Expr.
type Expr interface {
	String() string
	exprNode()
}

// MatchOp is a label matcher's operator.
type MatchOp int

// The four matcher operators, as in PromQL.
const (
	MatchEqual     MatchOp = iota // =
	MatchNotEqual                 // !=
	MatchRegexp                   // =~ (full match, RE2)
	MatchNotRegexp                // !~
)

// String returns the operator as written in a query.
func (op MatchOp) String() string {
	switch op {
	case MatchEqual:
		return "="
	case MatchNotEqual:
		return "!="
	case MatchRegexp:
		return "=~"
	case MatchNotRegexp:
		return "!~"
	}
	return "?"
}

// Matcher is one label matcher: Label Op "Value". Label is one of the
// matchable labels (see Labels and SampleAttributes); for =~ and !~ Value is
// an RE2 expression matched against the whole label value.
type Matcher struct {
	Label string
	Op    MatchOp
	Value string
}

// String returns label, operator and the value as a double-quoted string.
func (m Matcher) String() string {
	return m.Label + m.Op.String() + strconv.Quote(m.Value)
}

// Selector selects samples from the readings table. Matchers are ANDed;
// nil selects every reading of the tenant.
type Selector struct {
	Matchers []Matcher
}

// String returns readings{...}, or readings without matchers.
func (s *Selector) String() string {
	if len(s.Matchers) == 0 {
		return "readings"
	}
	var b strings.Builder
	b.WriteString("readings{")
	for i, m := range s.Matchers {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(m.String())
	}
	b.WriteByte('}')
	return b.String()
}

// Func is a range function's name.
type Func string

// The range functions. Each turns the samples of a series in the window
// [t-Range, t) into one value at t.
const (
	FuncRate        Func = "rate"
	FuncIncrease    Func = "increase"
	FuncDelta       Func = "delta"
	FuncAvgOverTime Func = "avg_over_time"
	FuncMinOverTime Func = "min_over_time"
	FuncMaxOverTime Func = "max_over_time"
	FuncSumOverTime Func = "sum_over_time"
	FuncCntOverTime Func = "count_over_time"
	FuncLastOver    Func = "last_over_time"
)

// funcs lists the known range functions; counter is true for those that
// need each bucket's first and last sample (window functions in SQL).
var funcs = map[Func]struct{ counter bool }{
	FuncRate:        {counter: true},
	FuncIncrease:    {counter: true},
	FuncDelta:       {counter: true},
	FuncLastOver:    {counter: true},
	FuncAvgOverTime: {},
	FuncMinOverTime: {},
	FuncMaxOverTime: {},
	FuncSumOverTime: {},
	FuncCntOverTime: {},
}

// Call is a range function over a range selector: Func(Selector[Range]).
type Call struct {
	Func     Func
	Selector *Selector
	Range    time.Duration
}

// String returns func(readings{...}[range]).
func (c *Call) String() string {
	return string(c.Func) + "(" + c.Selector.String() + "[" + formatDuration(c.Range) + "])"
}

// AggOp is an aggregation operator.
type AggOp string

// The aggregation operators. TopK, BottomK and Quantile take a parameter.
const (
	AggSum      AggOp = "sum"
	AggAvg      AggOp = "avg"
	AggMin      AggOp = "min"
	AggMax      AggOp = "max"
	AggCount    AggOp = "count"
	AggStddev   AggOp = "stddev"
	AggStdvar   AggOp = "stdvar"
	AggTopK     AggOp = "topk"
	AggBottomK  AggOp = "bottomk"
	AggQuantile AggOp = "quantile"
)

var aggOps = map[AggOp]struct{ param bool }{
	AggSum: {}, AggAvg: {}, AggMin: {}, AggMax: {}, AggCount: {},
	AggStddev: {}, AggStdvar: {},
	AggTopK: {param: true}, AggBottomK: {param: true}, AggQuantile: {param: true},
}

// Aggregate combines the series of Expr at each step, per group of series
// that agree on the Grouping labels (by), or on all labels but those
// (Without). No grouping puts every series in one group.
type Aggregate struct {
	Op AggOp
	// Param is k for topk and bottomk, φ for quantile; otherwise 0.
	Param    float64
	Grouping []string
	Without  bool
	Expr     Expr
}

// String returns op by (labels) (expr), with the parameter first inside
// the parentheses for topk, bottomk and quantile.
func (a *Aggregate) String() string {
	var b strings.Builder
	b.WriteString(string(a.Op))
	if a.Without || len(a.Grouping) > 0 {
		if a.Without {
			b.WriteString(" without (")
		} else {
			b.WriteString(" by (")
		}
		b.WriteString(strings.Join(a.Grouping, ", "))
		b.WriteString(")")
	}
	b.WriteString(" (")
	if aggOps[a.Op].param {
		b.WriteString(strconv.FormatFloat(a.Param, 'g', -1, 64))
		b.WriteString(", ")
	}
	b.WriteString(a.Expr.String())
	b.WriteString(")")
	return b.String()
}

func (*Selector) exprNode()  {}
func (*Call) exprNode()      {}
func (*Aggregate) exprNode() {}

// depth is the nesting depth as Limits.MaxDepth counts it: a selector is 0,
// each call or aggregation adds one.
func depth(e Expr) int {
	switch e := e.(type) {
	case *Call:
		return 1
	case *Aggregate:
		return 1 + depth(e.Expr)
	}
	return 0
}
