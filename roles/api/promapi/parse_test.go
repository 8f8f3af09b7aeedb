package promapi

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

const agent = "3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f"

// TestTranslate pins what each supported PromQL form means in the query
// language.
func TestTranslate(t *testing.T) {
	for _, tt := range []struct {
		src, want string
	}{
		{`boiler.temp`, `last_over_time(readings{metric_name="boiler.temp"}[5m])`},
		{`boiler.temp{agent="` + strings.ToUpper(agent) + `", device="boiler"}`,
			`last_over_time(readings{metric_name="boiler.temp", agent_uuid="` + strings.ToUpper(agent) + `", device_name="boiler"}[5m])`},
		{`{"pump-1.temp", "unit"="°C", quality!~'BAD'}`, `last_over_time(readings{metric_name="pump-1.temp", unit="°C", quality!~"BAD"}[5m])`},
		{`{__name__=~"boiler\\..*", protocol!=""}`, `last_over_time(readings{metric_name=~"boiler\\..*", protocol!=""}[5m])`},
		{`rate(pump.strokes[5m])`, `rate(readings{metric_name="pump.strokes"}[5m])`},
		{`avg_over_time(x{agent_uuid=~"3f.*"}[1h30m])`, `avg_over_time(readings{metric_name="x", agent_uuid=~"3f.*"}[1h30m])`},
		{`sum by (agent, __name__) (rate(x[5m]))`, `sum by (agent_uuid, metric_name) (rate(readings{metric_name="x"}[5m]))`},
		{`max(x) without (device)`, `max without (device_name) (last_over_time(readings{metric_name="x"}[5m]))`},
		{`topk(3.9, x)`, `topk (3, last_over_time(readings{metric_name="x"}[5m]))`},
		{`quantile(0.9, avg by (device) (x))`, `quantile (0.9, avg by (device_name) (last_over_time(readings{metric_name="x"}[5m])))`},
		{`(((x)))  # comment`, `last_over_time(readings{metric_name="x"}[5m])`},
		{`job:up.rate{device="a"}`, `last_over_time(readings{metric_name="job:up.rate", device_name="a"}[5m])`},
		{`infinity.x`, `last_over_time(readings{metric_name="infinity.x"}[5m])`},
	} {
		n, err := parse(tt.src)
		if err != nil {
			t.Errorf("parse(%q): %v", tt.src, err)
			continue
		}
		p, err := translate(n)
		if err != nil {
			t.Errorf("translate(%q): %v", tt.src, err)
			continue
		}
		if got := p.expr.String(); got != tt.want {
			t.Errorf("%q\n got %s\nwant %s", tt.src, got, tt.want)
		}
		if _, err := query.Parse(p.expr.String()); err != nil {
			t.Errorf("%q: the query language refuses the translation: %v", tt.src, err)
		}
	}
}

func TestScalarsAndRangeSelectors(t *testing.T) {
	for _, tt := range []struct {
		src  string
		want float64
	}{
		{`1+1`, 2}, {`2 * 3 + 4`, 10}, {`2 + 3 * 4`, 14}, {`2 ^ 3 ^ 2`, 512}, {`-(1 - 3) / 4`, 0.5}, {`7 % 4`, 3}, {`0x10`, 16},
		{`1e3`, 1000}, {`.5`, 0.5}, {`+Inf`, math.Inf(1)}, {`-inf`, math.Inf(-1)}, {`1e308 * 10`, math.Inf(1)},
	} {
		n, err := parse(tt.src)
		if err != nil {
			t.Errorf("parse(%q): %v", tt.src, err)
			continue
		}
		p, _ := translate(n)
		if p.scalar == nil || *p.scalar != tt.want {
			t.Errorf("%q: %+v, want the scalar %v", tt.src, p, tt.want)
		}
	}
	n, err := parse(`boiler.temp{device="b"}[1m30s]`)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := translate(n)
	if p.raw == nil || p.raw.rng != 90*time.Second || len(p.raw.sel.matchers) != 2 {
		t.Errorf("range selector: %+v", p)
	}
}

// TestUnsupported: what the API does not evaluate is named in the error.
func TestUnsupported(t *testing.T) {
	for _, tt := range []struct{ src, want string }{
		{`x + y`, `binary operator "+"`},
		{`x > 1`, `binary operator ">"`},
		{`x and y`, `binary operator "and"`},
		{`x offset 5m`, `offset`},
		{`x @ 100`, `@ modifier`},
		{`rate(x[5m:1m])`, `subqueries`},
		{`irate(x[5m])`, `function "irate"`},
		{`histogram_quantile(0.9, x)`, `function "histogram_quantile"`},
		{`count_values("v", x)`, `aggregation "count_values"`},
		{`rate(x)`, `expects a range vector`},
		{`sum(x[5m])`, `range vector here`},
		{`"text"`, `string literals`},
		{`{}`, `at least one matcher`},
		{`x{foo="1"}`, `unknown label "foo"`},
		{`x{tenant_id="t"}`, `scoped to the credential's tenant`},
		{`x{agent="abc"}`, `not an agent UUID`},
		{`sum by (quality) (x)`, `sample attribute`},
		{`topk(x, y)`, `must be a number`},
		{`topk(x)`, `needs a number`},
		{`sum(1, x)`, `takes no parameter`},
		{`-x`, `unary "-"`},
		{`x[5]`, `needs a unit`},
		{`x{unit="\q"}`, `invalid escape`},
		{`x{unit="\xff"}`, `not valid UTF-8`},
		{`x{unit="a\x00"}`, `NUL`},
		{`1e400`, `invalid number or duration "1e400"`},
		{`x 1e400`, `invalid number or duration "1e400"`},
		{`x[200y]`, `invalid number or duration "200y"`},
		{`x{NaN="1"}`, `unknown label "NaN"`},
		{`sum by (inf) (x)`, `unknown label "inf"`},
		{`x{`, `expected`},
		{strings.Repeat("(", 60) + "x" + strings.Repeat(")", 60), `nested deeper`},
	} {
		n, err := parse(tt.src)
		if err == nil {
			_, err = translate(n)
		}
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v, want one saying %q", tt.src, err, tt.want)
		}
		var ea *errorAt
		if err != nil && !errors.As(err, &ea) {
			t.Errorf("%q: error %T, want *errorAt (bad_data)", tt.src, err)
		}
	}
}

func TestLocate(t *testing.T) {
	src := "sum(\n  x + y)"
	_, err := parse(src)
	if got := locate(src, err).Error(); !strings.HasPrefix(got, "2:5: parse error: ") {
		t.Errorf("located error %q, want it at 2:5", got)
	}
}
