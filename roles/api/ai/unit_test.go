package ai

import (
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/roles/api/dashboards"
)

func TestDecodeResponse(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		err        string
		content    string
		calls      int
		tokens     int64
	}{
		{"answer", `{"choices":[{"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`, "", "hi", 0, 7},
		{"tool calls, null content", `{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"get_fleet","arguments":""}}]}}]}`, "", "", 1, 0},
		{"no role", `{"choices":[{"message":{"content":"x"}}]}`, "", "x", 0, 0},
		{"not json", `<html>`, "not a chat completion", "", 0, 0},
		{"error object", `{"error":{"message":"quota"}}`, "error: quota", "", 0, 0},
		{"no choices", `{"choices":[]}`, "no choices", "", 0, 0},
		{"empty message", `{"choices":[{"message":{"role":"assistant","content":""},"finish_reason":"length"}]}`, "neither content nor tool calls", "", 0, 0},
		{"content parts", `{"choices":[{"message":{"content":[{"type":"text","text":"x"}]}}]}`, "string or null", "", 0, 0},
		{"user role", `{"choices":[{"message":{"role":"user","content":"x"}}]}`, "role", "", 0, 0},
		{"no call id", `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}}]}`, "id", "", 0, 0},
		{"repeated call id", `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f"}},{"id":"a","function":{"name":"g"}}]}}]}`, "used twice", "", 0, 0},
		{"bad tool name", `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"rm -rf","arguments":"{}"}}]}}]}`, "function.name", "", 0, 0},
		{"other call type", `{"choices":[{"message":{"tool_calls":[{"id":"a","type":"code","function":{"name":"f"}}]}}]}`, "type must be function", "", 0, 0},
		{"arguments object", `{"choices":[{"message":{"tool_calls":[{"id":"a","function":{"name":"f","arguments":{}}}]}}]}`, "not a chat completion", "", 0, 0},
		{"negative usage", `{"choices":[{"message":{"content":"x"}}],"usage":{"total_tokens":-1}}`, "usage", "", 0, 0},
		{"too many calls", `{"choices":[{"message":{"tool_calls":[` + strings.Repeat(`{"id":"x","function":{"name":"f"}},`, maxToolCalls) + `{"id":"y","function":{"name":"f"}}]}}]}`, "more than", "", 0, 0},
	} {
		c, err := DecodeResponse([]byte(tc.body))
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.err)
			}
			var pe *ProviderError
			if err != nil && !asProviderError(err, &pe) {
				t.Errorf("%s: %T is no *ProviderError", tc.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case c.Message.Content != tc.content || len(c.Message.ToolCalls) != tc.calls || c.Usage.TotalTokens != tc.tokens:
			t.Errorf("%s: got %+v", tc.name, c)
		}
		if err == nil && tc.calls > 0 && c.Message.ToolCalls[0].Function.Arguments != "{}" {
			t.Errorf("%s: empty arguments are not {}", tc.name)
		}
	}
	if _, err := DecodeResponse(make([]byte, maxResponseBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized answer: %v", err)
	}
}

func asProviderError(err error, pe **ProviderError) bool {
	p, ok := err.(*ProviderError)
	*pe = p
	return ok
}

func TestProposeRules(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	var many []MetricSchema
	for i := range 30 {
		many = append(many, MetricSchema{Metric: "m" + string(rune('a'+i%26)) + string(rune('a'+i/26)), DeviceName: []string{"d1", "d2"}[i%2], Kind: KindNumeric,
			Samples: 100, Min: f(0), Max: f(1)})
	}
	for _, tc := range []struct {
		name    string
		schemas []MetricSchema
		want    string
	}{
		{"none", nil, ""},
		{"boolean first", []MetricSchema{{Metric: "t", DeviceName: "d", Kind: KindNumeric, Samples: 50, Min: f(1), Max: f(2)}, {Metric: "on", DeviceName: "d", Kind: KindBoolean, Samples: 50}},
			"stat:on@d line:t@d"},
		{"skipped left out", []MetricSchema{{Metric: "x", DeviceName: "d", Kind: KindEmpty, Skipped: "no values"}}, ""},
		{"few samples gauge", []MetricSchema{{Metric: "g", DeviceName: "d", Kind: KindNumeric, Samples: seriesMinSamples - 1, Min: f(5), Max: f(5)}}, "gauge:g@d"},
		{"the rest in tables per device", many,
			"line:maa@d1 line:mba@d2 line:mca@d1 line:mda@d2 line:mea@d1 line:mfa@d2 line:mga@d1 line:mha@d2 line:mia@d1 line:mja@d2 line:mka@d1 line:mla@d2 " +
				"table:mma+moa+mqa+msa+mua+mwa+mya+mab+mcb@d1 table:mna+mpa+mra+mta+mva+mxa+mza+mbb+mdb@d2"},
	} {
		l := propose(tc.schemas)
		if got := summary(l); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	lo, hi := gaugeRange(MetricSchema{Min: f(5), Max: f(5)})
	if lo != 4 || hi != 6 {
		t.Errorf("flat gauge range %v..%v, want 4..6", lo, hi)
	}
	if l := propose([]MetricSchema{{Metric: "on", DeviceName: "d", Kind: KindBoolean}}); l.Widgets[0].Type != dashboards.TypeStat || *l.Widgets[0].Options.Decimals != 0 {
		t.Errorf("status widget %+v", l.Widgets[0])
	}
}

func TestInfer(t *testing.T) {
	for _, tc := range []struct {
		values []float64
		kind   string
	}{
		{nil, KindEmpty}, {[]float64{1, 0, 1}, KindBoolean}, {[]float64{0, 0}, KindBoolean}, {[]float64{0, 2}, KindNumeric}, {[]float64{0.5}, KindNumeric},
	} {
		var s MetricSchema
		infer(&s, tc.values)
		if s.Kind != tc.kind {
			t.Errorf("%v: kind %s, want %s", tc.values, s.Kind, tc.kind)
		}
	}
}

func TestExtractJSON(t *testing.T) {
	for in, want := range map[string]string{
		"```json\n{\"a\":1}\n```": `{"a":1}`, `{"a":{}}`: `{"a":{}}`, "no json": "no json", "} {": "} {",
	} {
		if got := string(extractJSON(in)); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
