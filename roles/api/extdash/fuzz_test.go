package extdash

import (
	"encoding/json"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/extdash/grafanatest"
)

// FuzzDecodeAlertRule: whatever Grafana answers, decoding does not panic,
// and a threshold found can be set and is read back as set.
func FuzzDecodeAlertRule(f *testing.F) {
	g := grafanatest.New(f, "t")
	for _, uid := range []string{grafanatest.RuleThreshold, grafanatest.RuleClassic, grafanatest.RuleRange} {
		raw, _ := json.Marshal(g.Rule(uid))
		f.Add(raw, 42.5)
	}
	f.Add([]byte(`{"uid":"x","condition":"C","data":[{"refId":"C","datasourceUid":"__expr__","model":{"type":"threshold","conditions":[{"evaluator":{"type":"gt","params":[]}}]}}]}`), 1.0)
	f.Fuzz(func(t *testing.T, body []byte, v float64) {
		r, err := DecodeAlertRule(body)
		if err != nil || r.Threshold == nil {
			return
		}
		out, err := r.withThreshold(v)
		if err != nil {
			return // NaN and infinities do not encode
		}
		back, err := DecodeAlertRule(out)
		if err != nil || back.Threshold == nil || back.Threshold.Value != v {
			t.Fatalf("set %g, read back %+v, %v from %s", v, back.Threshold, err, out)
		}
	})
}

// FuzzDecodeThresholdUpdate: a request body never panics the decoder, and
// what it accepts has a rule uid and a finite threshold.
func FuzzDecodeThresholdUpdate(f *testing.F) {
	f.Add([]byte(`{"ruleUid":"abc","threshold":85}`))
	f.Add([]byte(`{"ruleUid":"a/b","threshold":1e999}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		u, err := DecodeThresholdUpdate(body)
		if err == nil && (u.RuleUID == "" || u.Threshold == nil) {
			t.Fatalf("accepted %q as %+v", body, u)
		}
	})
}
