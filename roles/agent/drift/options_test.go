package drift

import (
	"reflect"
	"testing"

	"github.com/edgeplat/edgeplat/roles/agent/adapters"
)

func TestParseOptions(t *testing.T) {
	def := DefaultOptions()
	cases := []struct {
		in         string
		want       Options
		wantFields []string
	}{
		{in: "", want: def},
		{in: "null", want: def},
		{in: "{}", want: def},
		{in: `{"enabled":true}`, want: Options{Enabled: true, MaxFieldCount: 500}},
		{in: `{"enabled":true,"windowMs":250,"maxFieldCount":20}`, want: Options{Enabled: true, WindowMs: 250, MaxFieldCount: 20}},
		{in: `{"windowMs":3600000,"maxFieldCount":10000}`, want: Options{WindowMs: 3600000, MaxFieldCount: 10000}},
		{in: `{"windowMs":-1}`, wantFields: []string{"windowMs"}},
		{in: `{"windowMs":3600001}`, wantFields: []string{"windowMs"}},
		{in: `{"maxFieldCount":0}`, wantFields: []string{"maxFieldCount"}},
		{in: `{"maxFieldCount":10001}`, wantFields: []string{"maxFieldCount"}},
		{in: `{"windowMs":-1,"maxFieldCount":0}`, wantFields: []string{"maxFieldCount", "windowMs"}},
		{in: `{"windowMs":1.5}`, wantFields: []string{"windowMs"}},
		{in: `{"maxFieldCount":"9"}`, wantFields: []string{"maxFieldCount"}},
		{in: `{"enabled":"yes"}`, wantFields: []string{"enabled"}},
		{in: `{"window_ms":10}`, wantFields: []string{"window_ms"}},
		{in: `[1]`, wantFields: []string{"drift_options"}},
		{in: `{} {}`, wantFields: []string{"drift_options"}},
		{in: `{"enabled":`, wantFields: []string{"drift_options"}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseOptions([]byte(tc.in))
			if tc.wantFields != nil {
				if f := adapters.FieldsOf(err); !reflect.DeepEqual(f, tc.wantFields) {
					t.Fatalf("err %v names %v, want %v", err, f, tc.wantFields)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}
