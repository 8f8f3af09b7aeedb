package promapi

import (
	"errors"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/query"
)

// FuzzParse: the selector parser never panics on any input; an error is
// always a positioned *errorAt inside the input (answered with bad_data),
// and whatever it accepts translates to an expression the query language
// parses back, or is refused with bad_data, never a server error.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`boiler.temp`, `boiler.temp{agent="3f2b8c1e-9d4a-4b7e-8f00-1a2b3c4d5e6f", device="boiler"}`,
		`{"pump-1.temp", "unit"="°C", quality!~'BAD'}`, `{__name__=~"boiler\\..*"}[5m]`,
		`sum by (agent) (rate(x[5m]))`, `topk(3, avg_over_time(x[1h30m]))`, `quantile(0.9, x) without (device)`,
		`1+1`, `-(2^3) % 0x10`, `x offset 5m`, `rate(x[5m:1m])`, "x{a=`raw\\d`} # c", `x{a="\u00e9\x41\101"}`,
		`x{a="unterminated`, `((((x))))`, `count_values("v", x)`, `1e`, `.5e-3`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		n, err := parse(src)
		if err == nil {
			var p plan
			if p, err = translate(n); err == nil {
				if p.expr != nil {
					if _, qerr := query.Parse(p.expr.String()); qerr != nil {
						var pe *query.ParseError
						var le *query.LimitError
						if !errors.As(qerr, &pe) && !errors.As(qerr, &le) {
							t.Fatalf("%q: the query language failed with %T: %v", src, qerr, qerr)
						}
					}
				}
				return
			}
		}
		var ea *errorAt
		if !errors.As(err, &ea) || ea.msg == "" || ea.pos > len(src) {
			t.Fatalf("%q: error %T %v, want a positioned *errorAt", src, err, err)
		}
		if located := locate(src, err); located.Error() == "" {
			t.Fatalf("%q: empty located error", src)
		}
	})
}
