package query

import (
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/core/db"
	"github.com/edgeplat/edgeplat/roles/api/rollup"
)

// seedQueries start both fuzz targets; the parser and golden tests' inputs
// are good seeds too, so they are added as well.
var seedQueries = []string{
	`readings`,
	`{metric_name="x"}`,
	`readings{metric_name=~"boiler.*", agent_uuid="3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f", unit!="", quality!~"bad|uncertain"}`,
	`avg by (agent_uuid) (rate(readings{metric_name=~"boiler.*"}[5m]))`,
	`sum without (unit) (max_over_time(readings{device_name=~"(?i)pump"}[1h]))`,
	`topk(3, increase(readings[1h30m]))`,
	`quantile by (device_name) (0.9, delta(readings{protocol='modbus'}[250ms]))`,
	`max(min by (agent_uuid) (last_over_time(readings[1d])))`,
	"readings{metric_name=`raw\\d+`, device_name=\"\\u00e9\\x41\\101\\n\"} # comment",
	`readings{metric_name="it's \"quoted\"; DROP TABLE readings; --"}`,
	`count_over_time(readings{metric_name=~"a{2,5}|[^a-z]|\\pL|(?s:.)|x*?"}[90s])`,
	`((sum((stddev by (unit) (rate(readings[5m]))))))`,
	`rate(readings[5m]) offset 5m`,
	`readings{metric_name=~"("}`,
}

func addSeeds(f *testing.F, args ...any) {
	for _, s := range seedQueries {
		f.Add(append([]any{s}, args...)...)
	}
}

// FuzzParse: the parser never panics, reports positions inside the input,
// and String() of any AST parses back to an equal AST (and is a fixed
// point).
func FuzzParse(f *testing.F) {
	addSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		e, err := Parse(src)
		if err != nil {
			var pe *ParseError
			var le *LimitError
			switch {
			case errors.As(err, &pe):
				if pe.Offset < 0 || pe.Offset > len(src) || pe.Line < 1 || pe.Column < 1 || pe.Msg == "" {
					t.Fatalf("bad position in %#v for %q", pe, src)
				}
			case errors.As(err, &le):
			default:
				t.Fatalf("Parse(%q): error of type %T: %v", src, err, err)
			}
			return
		}
		s := e.String()
		e2, err := ParseLimits(s, Limits{MaxQueryBytes: 1 << 20})
		if err != nil {
			t.Fatalf("Parse(%q).String() = %q does not parse: %v", src, s, err)
		}
		if !reflect.DeepEqual(e, e2) {
			t.Fatalf("round trip changed the AST:\n src %q\n 1st %#v\n str %q\n 2nd %#v", src, e, s, e2)
		}
		if s2 := e2.String(); s2 != s {
			t.Fatalf("String is not a fixed point: %q then %q", s, s2)
		}
	})
}

// FuzzTranslate proves that no text from the query reaches the SQL. For
// every query that parses and plans, on every dialect:
//
//  1. the SQL consists only of whitelisted tokens: known keywords,
//     functions, columns and aliases; $n placeholders; the numbers and
//     string literals of the dialect's bucket expression for this plan;
//     a fixed set of small integers and punctuation;
//  2. the SQL is byte-for-byte the same when every string in the query is
//     replaced by a fixed one, so it is a function of the query's shape
//     alone;
//  3. the tenant condition is there, bound to the caller's tenant, and
//     each matcher value is bound as an argument (as is, or translated for
//     regular expressions).
//
// fuzzCoverage holds rollups of part of FuzzTranslate's ranges.
var fuzzCoverage = rollup.Coverage{
	Hourly: rollup.Window{From: testStart.Add(-48 * time.Hour), To: testStart.Add(30 * time.Hour)},
	Daily:  rollup.Window{From: testStart.Add(-10 * time.Hour).Truncate(24 * time.Hour), To: testStart.Add(14 * time.Hour).Truncate(24 * time.Hour)},
}

func FuzzTranslate(f *testing.F) {
	addSeeds(f, uint32(60), uint32(60))
	f.Add(`rate(readings[7s])`, uint32(3), uint32(1440))
	// Whole-hour buckets, which read rollups with fuzzCoverage.
	f.Add(`rate(readings{unit="x"}[1h])`, uint32(3599), uint32(2880))
	f.Add(`sum by (unit) (avg_over_time(readings{device_name=~"a.*", metric_name!="b"}[1d]))`, uint32(7199), uint32(4000))
	f.Fuzz(func(t *testing.T, src string, stepSec, spanMin uint32) {
		e, err := Parse(src)
		if err != nil {
			return
		}
		r := Range{
			Start: testStart,
			End:   testStart.Add(time.Duration(spanMin%(60*24*100)) * time.Minute),
			Step:  time.Duration(stepSec%86400+1) * time.Second,
		}
		blank := blanked(e)
		for _, d := range dialects {
			p, err := NewPlan(e, testTenant, r, d, Limits{})
			if err != nil {
				var le *LimitError
				var pe *ParamError
				if !errors.As(err, &le) && !errors.As(err, &pe) {
					t.Fatalf("NewPlan(%q, %s): unexpected error %T: %v", src, d, err, err)
				}
				continue
			}
			pb, err := NewPlan(blank, testTenant, r, d, Limits{})
			if err != nil {
				t.Fatalf("blanked %s does not plan: %v", blank, err)
			}
			// The same checks over rollups that hold part of the range.
			for _, c := range []*rollup.Coverage{nil, &fuzzCoverage} {
				p, pb := p, pb
				if c != nil {
					p, pb = p.WithRollups(*c), pb.WithRollups(*c)
				}
				sql, args := p.SQL()
				checkSQLTokens(t, d, p, sql, len(args))
				if len(args) == 0 || args[0] != testTenant || !strings.Contains(sql, "WHERE tenant_id = $1\n") {
					t.Fatalf("tenant condition missing: %s %v", sql, args)
				}
				for _, m := range matchersOf(e) {
					want := m.Value
					if m.Op == MatchRegexp || m.Op == MatchNotRegexp {
						want = anchored(m.Value)
						if d.Engine == db.Postgres {
							want, _ = pgRegex(m.Value)
						}
					}
					if !slices.Contains(args, any(want)) {
						t.Fatalf("value %q of %s is not among the arguments %q", want, m, args)
					}
				}
				if sqlB, _ := pb.SQL(); sqlB != sql {
					t.Fatalf("SQL depends on the query's strings:\n%s\n--- blanked:\n%s", sql, sqlB)
				}
			}
		}
	})
}

func matchersOf(e Expr) []Matcher {
	switch e := e.(type) {
	case *Selector:
		return e.Matchers
	case *Call:
		return e.Selector.Matchers
	case *Aggregate:
		return matchersOf(e.Expr)
	}
	return nil
}

// blanked returns a copy of e with every matcher value replaced by a fixed
// valid one.
func blanked(e Expr) Expr {
	sel := func(s *Selector) *Selector {
		out := &Selector{}
		for _, m := range s.Matchers {
			m.Value = "x"
			if m.Label == LabelAgentUUID && (m.Op == MatchEqual || m.Op == MatchNotEqual) {
				m.Value = "00000000-0000-0000-0000-000000000000"
			}
			out.Matchers = append(out.Matchers, m)
		}
		return out
	}
	switch e := e.(type) {
	case *Selector:
		return sel(e)
	case *Call:
		c := *e
		c.Selector = sel(e.Selector)
		return &c
	case *Aggregate:
		a := *e
		a.Expr = blanked(e.Expr)
		return &a
	}
	panic("unreachable")
}

// sqlWords are every identifier the generator may write.
var sqlWords = map[string]bool{}

func init() {
	for _, w := range strings.Fields(`SELECT FROM WHERE AND NOT GROUP BY ORDER LIMIT AS CASE WHEN THEN ELSE END IS NULL
		COUNT SUM MIN MAX COALESCE CAST text LAG ROW_NUMBER OVER WINDOW PARTITION
		readings time value agent_uuid metric_name device_name protocol unit quality tenant_id
		b d n p r s w rn edgeplat_re_match
		UNION ALL BIGINT u total lo hi t0 t1 readings_hourly readings_daily bucket
		count sum min max first_time last_time first_value last_value increase`) {
		sqlWords[w] = true
	}
}

// checkSQLTokens scans sql and fails on any token outside the whitelist.
func checkSQLTokens(t *testing.T, d db.Dialect, p *Plan, sql string, nargs int) {
	t.Helper()
	words := map[string]bool{}
	literals := map[string]bool{"''": true}
	numbers := map[string]bool{"0": true, "1": true, "2": true, "3": true, "4": true, "5": true, "6": true}
	if !p.raw {
		// The bucket expression is core/db's; its tokens depend only on
		// the dialect and the bucket width.
		bucket, err := d.TimeBucket(time.Duration(p.bucket)*time.Microsecond, "time")
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range sqlTokens(t, bucket) {
			switch {
			case tok[0] == '\'':
				literals[tok] = true
			case tok[0] >= '0' && tok[0] <= '9':
				numbers[tok] = true
			case isIdentStart(tok[0]):
				words[tok] = true
			}
		}
	}
	for _, tok := range sqlTokens(t, sql) {
		c := tok[0]
		switch {
		case isIdentStart(c):
			if !sqlWords[tok] && !words[tok] {
				t.Fatalf("identifier %q is not whitelisted in:\n%s", tok, sql)
			}
		case isDigit(c):
			if !numbers[tok] {
				t.Fatalf("number %q is not whitelisted in:\n%s", tok, sql)
			}
		case c == '\'':
			if !literals[tok] {
				t.Fatalf("literal %s is not whitelisted in:\n%s", tok, sql)
			}
		case c == '$':
			n, err := strconv.Atoi(tok[1:])
			if err != nil || n < 1 || n > nargs {
				t.Fatalf("placeholder %s out of range 1..%d", tok, nargs)
			}
		}
	}
}

// sqlTokens splits SQL into identifiers, numbers, 'literals', $n and
// single punctuation characters; anything else fails the test.
func sqlTokens(t *testing.T, sql string) []string {
	t.Helper()
	var toks []string
	for i := 0; i < len(sql); {
		c := sql[i]
		j := i + 1
		switch {
		case c == ' ' || c == '\n':
			i++
			continue
		case isIdentStart(c):
			for j < len(sql) && isIdentChar(sql[j]) {
				j++
			}
		case isDigit(c):
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
		case c == '$':
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if j == i+1 {
				t.Fatalf("bare $ at %d in:\n%s", i, sql)
			}
		case c == '\'':
			for j < len(sql) && sql[j] != '\'' {
				j++
			}
			if j == len(sql) {
				t.Fatalf("unterminated literal in:\n%s", sql)
			}
			j++
		case strings.IndexByte("(),.=<>!~*-+%:", c) >= 0:
		default:
			t.Fatalf("unexpected byte %q at %d in:\n%s", c, i, sql)
		}
		toks = append(toks, sql[i:j])
		i = j
	}
	return toks
}
