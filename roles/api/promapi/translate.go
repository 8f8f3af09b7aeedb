package promapi

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// lookback is how far back a bare vector selector looks for a series'
// latest sample, Prometheus's default lookback delta: metric{...} is
// answered as last_over_time(metric{...}[5m]).
const lookback = 5 * time.Minute

// plan is a PromQL expression in the query language's terms: a scalar, a
// range selector (raw samples) or an expression of values per step.
type plan struct {
	// sel is set, besides expr, when the expression is a bare vector
	// selector: the series lookups take only those.
	sel    *vectorSel
	scalar *float64
	raw    *matrixSel
	expr   query.Expr
}

// translate maps a parsed PromQL expression onto the query language.
func translate(n node) (plan, error) {
	switch n := n.(type) {
	case *number:
		return plan{scalar: &n.v}, nil
	case *matrixSel:
		return plan{raw: n}, nil
	}
	e, err := vectorExpr(n)
	if err != nil {
		return plan{}, err
	}
	sel, _ := n.(*vectorSel)
	return plan{expr: e, sel: sel}, nil
}

// locate prefixes a syntax error with its line and column in src, as
// Prometheus does ("1:14: parse error: ...").
func locate(src string, err error) error {
	var ea *errorAt
	if !errors.As(err, &ea) || ea.pos < 0 {
		return err
	}
	pos := min(ea.pos, len(src))
	line, col := 1, 1
	for _, r := range src[:pos] {
		if r == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &errorAt{pos: -1, msg: fmt.Sprintf("%d:%d: parse error: %s", line, col, ea.msg)}
}

// vectorExpr translates an expression whose value is an instant vector.
func vectorExpr(n node) (query.Expr, error) {
	switch n := n.(type) {
	case *vectorSel:
		return &query.Call{Func: query.FuncLastOver, Selector: &query.Selector{Matchers: n.matchers}, Range: lookback}, nil
	case *call:
		m, ok := n.arg.(*matrixSel)
		if !ok {
			return nil, &errorAt{pos: n.pos, msg: fmt.Sprintf("%s expects a range vector such as metric[5m], got %s", n.fn, n.arg.promType())}
		}
		return &query.Call{Func: n.fn, Selector: &query.Selector{Matchers: m.sel.matchers}, Range: m.rng}, nil
	case *aggregate:
		a := &query.Aggregate{Op: n.op, Grouping: n.grouping, Without: n.without}
		needs := n.op == query.AggTopK || n.op == query.AggBottomK || n.op == query.AggQuantile
		switch {
		case needs && n.param == nil:
			return nil, &errorAt{pos: n.pos, msg: fmt.Sprintf("%s needs a number first, as in %s(5, ...)", n.op, n.op)}
		case !needs && n.param != nil:
			return nil, &errorAt{pos: n.pos, msg: fmt.Sprintf("%s takes no parameter", n.op)}
		case needs:
			num, ok := n.param.(*number)
			if !ok {
				return nil, &errorAt{pos: n.pos, msg: fmt.Sprintf("unsupported: the parameter of %s must be a number, got %s", n.op, n.param.promType())}
			}
			a.Param = num.v
			if n.op != query.AggQuantile {
				// PromQL truncates k.
				a.Param = math.Trunc(num.v)
			}
		}
		inner, err := vectorExpr(n.expr)
		if err != nil {
			return nil, err
		}
		a.Expr = inner
		return a, nil
	case *matrixSel:
		return nil, &errorAt{pos: -1, msg: "unsupported: a range vector here; wrap it in a function such as avg_over_time(metric[5m])"}
	case *number:
		return nil, &errorAt{pos: -1, msg: "unsupported: a number inside an expression over series (only alone, or as the parameter of topk, bottomk and quantile)"}
	}
	panic(fmt.Sprintf("BUG: translate of %T", n))
}
