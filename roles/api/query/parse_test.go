package query

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseValid(t *testing.T) {
	tests := []struct {
		src  string
		want string // String() of the result
	}{
		{`readings`, `readings`},
		{`readings{}`, `readings`},
		{`  readings  # all of them`, `readings`},
		{`{metric_name="boiler.temp"}`, `readings{metric_name="boiler.temp"}`},
		{`readings{metric_name="a",}`, `readings{metric_name="a"}`},
		{`readings{metric_name='single \' quoted', device_name=~"b.*", unit!="", protocol!~'x|y'}`,
			`readings{metric_name="single ' quoted", device_name=~"b.*", unit!="", protocol!~"x|y"}`},
		{"readings{metric_name=`raw\\d+`}", `readings{metric_name="raw\\d+"}`},
		{`readings{metric_name="\x41\101\u00e9\U0001F600\t\n\\\""}`, `readings{metric_name="AAé😀\t\n\\\""}`},
		{`readings{quality="good"}`, `readings{quality="good"}`},
		{`readings{agent_uuid="3F2B8C1E-9D4A-4B7E-8F00-1A2B3C4D5E6F"}`, `readings{agent_uuid="3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f"}`},
		{`readings{agent_uuid=~"3F2B.*"}`, `readings{agent_uuid=~"3F2B.*"}`},
		{`rate(readings{metric_name=~"boiler.*"}[5m])`, `rate(readings{metric_name=~"boiler.*"}[5m])`},
		{`rate({metric_name="x"}[90s])`, `rate(readings{metric_name="x"}[1m30s])`},
		{`increase(readings[1h30m])`, `increase(readings[1h30m])`},
		{`delta(readings[250ms])`, `delta(readings[250ms])`},
		{`avg_over_time(readings[1d])`, `avg_over_time(readings[1d])`},
		{`max_over_time(readings[2w])`, `max_over_time(readings[2w])`},
		{`min_over_time(readings[1y])`, `min_over_time(readings[52w1d])`},
		{`sum_over_time(readings[1m])`, `sum_over_time(readings[1m])`},
		{`count_over_time(readings[1m])`, `count_over_time(readings[1m])`},
		{`last_over_time(readings[1m])`, `last_over_time(readings[1m])`},
		{`avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`, `avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`},
		{`avg(rate(readings[5m])) by (agent_uuid, unit)`, `avg by (agent_uuid, unit) (rate(readings[5m]))`},
		{`SUM BY (device_name) (rate(readings[5m]))`, `sum by (device_name) (rate(readings[5m]))`},
		{`sum by () (rate(readings[5m]))`, `sum (rate(readings[5m]))`},
		{`sum without () (rate(readings[5m]))`, `sum without () (rate(readings[5m]))`},
		{`count without (protocol, unit,) (rate(readings[5m]))`, `count without (protocol, unit) (rate(readings[5m]))`},
		{`max(min by (agent_uuid) (rate(readings[5m])))`, `max (min by (agent_uuid) (rate(readings[5m])))`},
		{`((rate(readings[5m])))`, `rate(readings[5m])`},
		{`sum((rate(readings[5m])))`, `sum (rate(readings[5m]))`},
		{`topk(3, rate(readings[5m]))`, `topk (3, rate(readings[5m]))`},
		{`bottomk by (agent_uuid) (0x2, rate(readings[5m]))`, `bottomk by (agent_uuid) (2, rate(readings[5m]))`},
		{`quantile(0.9, rate(readings[5m]))`, `quantile (0.9, rate(readings[5m]))`},
		{`quantile(1e-1, rate(readings[5m]))`, `quantile (0.1, rate(readings[5m]))`},
		{`stddev(rate(readings[5m]))`, `stddev (rate(readings[5m]))`},
		{`stdvar(rate(readings[5m]))`, `stdvar (rate(readings[5m]))`},
		{"sum by (agent_uuid)\n  (\n    rate(readings{metric_name=~\"boiler.*\"}[5m])\n  )", `sum by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`},
	}
	for _, tt := range tests {
		e, err := Parse(tt.src)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.src, err)
			continue
		}
		if got := e.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %s, want %s", tt.src, got, tt.want)
		}
		e2, err := Parse(e.String())
		if err != nil || !reflect.DeepEqual(e, e2) {
			t.Errorf("round trip of %q: %v, %#v != %#v", tt.src, err, e2, e)
		}
	}
}

func TestParseAST(t *testing.T) {
	e, err := Parse(`avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*", unit!="C"}[5m]))`)
	if err != nil {
		t.Fatal(err)
	}
	want := &Aggregate{
		Op:       AggAvg,
		Grouping: []string{"agent_uuid"},
		Expr: &Call{
			Func: FuncRate,
			Selector: &Selector{Matchers: []Matcher{
				{Label: "metric_name", Op: MatchRegexp, Value: "boiler.*"},
				{Label: "unit", Op: MatchNotEqual, Value: "C"},
			}},
			Range: 5 * time.Minute,
		},
	}
	if !reflect.DeepEqual(e, want) {
		t.Errorf("got %#v, want %#v", e, want)
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		src       string
		line, col int
		msg       string
	}{
		{``, 1, 1, "unexpected end of input, expected a selector, range function or aggregation"},
		{`foo`, 1, 1, `unknown metric "foo": the only series source is readings; select a metric with readings{metric_name="foo"}`},
		{`foo(readings[5m])`, 1, 1, `unknown function "foo"`},
		{`Rate(readings[5m])`, 1, 1, `unknown function "Rate"`},
		{`readings{`, 1, 10, "unexpected end of input, expected a label name"},
		{`readings{metric_name="x"`, 1, 25, `unexpected end of input, expected "," or "}"`},
		{`readings{metric_name}`, 1, 21, `unexpected "}", expected "=", "!=", "=~" or "!~"`},
		{`readings{metric_name=x}`, 1, 22, `unexpected identifier "x", expected a quoted string`},
		{`readings{metric_name==""}`, 1, 21, "binary operators (==) are not supported"},
		{`readings{foo="x"}`, 1, 10, `unknown label "foo": labels are agent_uuid, metric_name, device_name, protocol, unit, and quality can be matched`},
		{`readings{tenant_id="t2"}`, 1, 10, "tenant_id cannot be matched: every query is scoped to the caller's tenant"},
		{`readings{__name__="x"}`, 1, 10, `unknown label "__name__"`},
		{`readings{metric_name="x` + "\n" + `"}`, 1, 22, "unterminated string (newline in a quoted string; use \\n)"},
		{`readings{metric_name="x}`, 1, 22, "unterminated string"},
		{`readings{metric_name="\q"}`, 1, 23, `invalid escape sequence \q`},
		{`readings{metric_name="\x4"}`, 1, 23, `invalid escape sequence "\\x4\""`},
		{`readings{metric_name="\uD800"}`, 1, 23, "not a Unicode character"},
		{`readings{metric_name="\x00"}`, 1, 22, "string contains a NUL character"},
		{`readings{metric_name="\xff"}`, 1, 22, "string is not valid UTF-8"},
		{`readings{metric_name="\400"}`, 1, 23, "octal value over 255"},
		{`readings{agent_uuid="abc"}`, 1, 21, `agent_uuid = "abc": not a UUID`},
		{`readings{metric_name=~"("}`, 1, 23, "invalid regex \"(\": missing closing ): `(`"},
		{`readings{metric_name=~"a)|(b"}`, 1, 23, "invalid regex"},
		{`readings{metric_name=~"\\Qa"}`, 1, 23, `cannot be anchored (an unterminated \Q? close it with \E)`},
		{`readings{metric_name=~"\\bx"}`, 1, 23, `word boundaries (\b, \B) are not supported`},
		{`readings{metric_name=~"(?m)^x$"}`, 1, 23, "multi-line anchors"},
		{`readings{metric_name=~"a{256}"}`, 1, 23, "repetition counts above 255 are not supported"},
		{`readings{metric_name=~"\\pL\\pL\\pL\\pL\\pL"}`, 1, 23, "too large once translated"},
		{`{}`, 1, 1, "empty selector {}: write readings to select every reading"},
		{`readings[5m]`, 1, 9, "a range selector [...] is only allowed directly inside a range function"},
		{`rate(readings)`, 1, 14, "rate needs a range: rate(readings[5m])"},
		{`rate(readings{unit="C"})`, 1, 24, `rate needs a range: rate(readings{unit="C"}[5m])`},
		{`rate(readings[5])`, 1, 15, `range "5" needs a unit, as in [5m]`},
		{`rate(readings[0s])`, 1, 15, `range must be positive, got "0s"`},
		{`rate(readings[5m:1m])`, 1, 17, "subqueries are not supported"},
		{`rate(readings[1.5h])`, 1, 15, `invalid number "1.5h"`},
		{`rate(readings[5x])`, 1, 15, `invalid number "5x"`},
		{`rate(readings[5m3])`, 1, 17, `invalid duration "5m3": missing unit`},
		{`rate(readings[1m1h])`, 1, 17, "units must go from largest to smallest, each once"},
		{`rate(readings[99999999999y])`, 1, 15, "too large"},
		{`rate(sum(rate(readings[5m]))[5m])`, 1, 6, "rate takes a range selector such as readings{...}[5m], not an expression"},
		{`rate(readings[5m]) offset 5m`, 1, 20, "offset modifiers are not supported"},
		{`rate(readings[5m]) @ 100`, 1, 20, "the @ modifier is not supported"},
		{`rate(readings[5m]) + 1`, 1, 20, "binary operators (+) are not supported"},
		{`sum(readings)`, 1, 5, "sum over raw samples is not supported: wrap the selector in a range function"},
		{`sum by (quality) (rate(readings[5m]))`, 1, 9, "quality is a sample attribute, not a series label"},
		{`sum by (tenant_id) (rate(readings[5m]))`, 1, 9, "tenant_id is not a label"},
		{`sum by (agent_uuid rate(readings[5m]))`, 1, 20, `unexpected identifier "rate", expected "," or ")"`},
		{`sum by agent_uuid (rate(readings[5m]))`, 1, 8, `unexpected identifier "agent_uuid", expected "(" and label names`},
		{`sum(rate(readings[5m])) by (unit) by (unit)`, 1, 35, `unexpected identifier "by", expected end of input`},
		{`by (unit) (rate(readings[5m]))`, 1, 1, "by and without follow an aggregation operator"},
		{`topk(rate(readings[5m]))`, 1, 6, "topk needs a number first, as in topk(5, rate(readings[5m]))"},
		{`topk(1.5, rate(readings[5m]))`, 1, 6, "topk needs a whole number k from 1 to 1000000, got 1.5"},
		{`topk(0, rate(readings[5m]))`, 1, 6, "got 0"},
		{`quantile(2, rate(readings[5m]))`, 1, 10, "quantile must be between 0 and 1, got 2"},
		{`quantile(NaN, rate(readings[5m]))`, 1, 10, "quantile must be between 0 and 1, got NaN"},
		{`quantile(0.5 rate(readings[5m]))`, 1, 14, `unexpected identifier "rate", expected ","`},
		{`sum(1, rate(readings[5m]))`, 1, 5, "unexpected number \"1\": numbers are only allowed as the first argument of topk, bottomk and quantile"},
		{`42`, 1, 1, "unexpected number"},
		{`"x"`, 1, 1, "unexpected string: label matchers go inside braces"},
		{`rate(readings[5m]`, 1, 18, `unexpected end of input, expected ")"`},
		{`(rate(readings[5m])`, 1, 20, `unexpected end of input, expected ")"`},
		{`readings $`, 1, 10, `unexpected character '$'`},
		{"readings\n  {metric_name=\"x\"} }", 2, 21, `unexpected "}", expected end of input`},
		{"sum by (agent_uuid) (\n  rate(readings{metric_name=~\"é(\"}[5m]))", 2, 30, "invalid regex"},
		{"readings{metric_name=\"é\", \xff}", 1, 27, "invalid UTF-8 in query"},
		{`0x`, 1, 1, `invalid number "0x"`},
		{`0x1g`, 1, 1, `invalid number "0x1g"`},
		{`1.2.3`, 1, 1, `invalid number "1.2."`},
	}
	for _, tt := range tests {
		_, err := Parse(tt.src)
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) = %v, want a *ParseError", tt.src, err)
			continue
		}
		if pe.Line != tt.line || pe.Column != tt.col || !strings.Contains(pe.Msg, tt.msg) {
			t.Errorf("Parse(%q):\n got  %d:%d %s\n want %d:%d ...%s...", tt.src, pe.Line, pe.Column, pe.Msg, tt.line, tt.col, tt.msg)
		}
		if want := "parse error at line "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("Error() = %q, want prefix %q", err.Error(), want)
		}
	}
}

func TestParseLimits(t *testing.T) {
	long := `readings{metric_name="` + strings.Repeat("a", 5000) + `"}`
	_, err := Parse(long)
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != "max_query_bytes" || le.Value != "5024 bytes" || le.Max != "4096 bytes" {
		t.Fatalf("long query: %v", err)
	}
	if want := "query length 5024 bytes exceeds the limit of 4096 bytes (max_query_bytes)"; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if _, err := ParseLimits(long, Limits{MaxQueryBytes: 8192}); err != nil {
		t.Errorf("with a larger limit: %v", err)
	}

	deep := `sum(sum(sum(sum(sum(rate(readings[5m]))))))`
	_, err = Parse(deep)
	if !errors.As(err, &le) || le.Limit != "max_depth" || le.Value != "6" || le.Max != "5" {
		t.Fatalf("deep query: %v", err)
	}
	if _, err := ParseLimits(deep, Limits{MaxDepth: 6}); err != nil {
		t.Errorf("with a larger limit: %v", err)
	}
	// Parentheses count: a parser that recursed without bound could be
	// made to overflow its stack.
	_, err = ParseLimits(strings.Repeat("(", 100000)+"readings"+strings.Repeat(")", 100000), Limits{MaxQueryBytes: 1 << 20})
	if !errors.As(err, &le) || le.Limit != "max_depth" {
		t.Fatalf("deep parentheses: %v", err)
	}
}

func TestLexDurationRoundTrip(t *testing.T) {
	for _, d := range []time.Duration{
		time.Millisecond, time.Second, 90 * time.Second, time.Hour + time.Millisecond,
		7 * 24 * time.Hour, 8*24*time.Hour + 3*time.Hour + 4*time.Minute + 5*time.Second + 6*time.Millisecond,
		365 * 24 * time.Hour,
	} {
		s := formatDuration(d)
		l := NewLexer(s, "")
		tok, err := l.Next()
		if err != nil || tok.Kind != TokDuration || tok.Dur != d || l.pos != len(s) {
			t.Errorf("%v -> %q -> %+v, %v", d, s, tok, err)
		}
	}
	if got := displayDuration(90 * 24 * time.Hour); got != "90d" {
		t.Errorf("displayDuration(90d) = %q", got)
	}
}

func TestLexNumbers(t *testing.T) {
	for src, want := range map[string]float64{
		"1": 1, "1.5": 1.5, ".5": 0.5, "1e3": 1000, "1E-2": 0.01, "0x1F": 31, "2.": 2,
	} {
		l := NewLexer(src, "")
		tok, err := l.Next()
		if err != nil || tok.Kind != TokNumber || tok.Num != want {
			t.Errorf("lex %q = %+v, %v; want number %v", src, tok, err, want)
		}
	}
	for _, src := range []string{"Inf", "inf", "NaN", "nan"} {
		l := NewLexer(src, "")
		if tok, err := l.Next(); err != nil || tok.Kind != TokNumber {
			t.Errorf("lex %q = %+v, %v; want a number", src, tok, err)
		}
	}
}

// TestLexerIdentChars: the extra identifier characters the Prometheus API
// passes continue identifiers only; ':' still ends a duration, and a
// number still refuses a letter or '.' right after it.
func TestLexerIdentChars(t *testing.T) {
	for _, tt := range []struct {
		src, identChars string
		want            []string // kind:text, or "error" for the last
	}{
		{`boiler.temp:x[5m:1m]`, ".:", []string{`identifier:boiler.temp:x`, `"[":[`, `duration:5m`, `":"::`, `duration:1m`, `"]":]`}},
		{`inf nan.x Inf`, ".:", []string{`number:inf`, `identifier:nan.x`, `number:Inf`}},
		{`:a`, ".:", []string{`":"::`, `identifier:a`}},
		{`boiler.temp`, "", []string{`identifier:boiler`, "error"}},
		{`1.x`, ".:", []string{"error"}},
	} {
		l := NewLexer(tt.src, tt.identChars)
		var got []string
		for {
			tok, err := l.Next()
			if err != nil {
				got = append(got, "error")
				break
			}
			if tok.Kind == TokEOF {
				break
			}
			got = append(got, tok.Kind.String()+":"+tok.Text)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%q with %q: %q, want %q", tt.src, tt.identChars, got, tt.want)
		}
	}
}

func TestScannerPeek(t *testing.T) {
	s := NewScanner(NewLexer("a ( b", ""))
	if err := s.Advance(); err != nil || s.Tok.Text != "a" {
		t.Fatalf("first: %+v, %v", s.Tok, err)
	}
	if next, err := s.Peek(); err != nil || next.Kind != TokLParen || s.Tok.Text != "a" {
		t.Fatalf("peek: %+v (current %+v), %v", next, s.Tok, err)
	}
	for _, want := range []string{"(", "b", ""} {
		if err := s.Advance(); err != nil || s.Tok.Text != want {
			t.Fatalf("advance: %+v, %v; want %q", s.Tok, err, want)
		}
	}
	if s.Tok.Kind != TokEOF {
		t.Errorf("at the end: %+v", s.Tok)
	}
}
