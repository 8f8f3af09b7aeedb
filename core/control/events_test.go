package control

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeEvent(t *testing.T) {
	ok := `{"id":"a-1","kind":"anomaly_alert","severity":"critical","timestamp":1700000000000,"data":{"metric":"t"}}`
	tests := []struct {
		name, in, err string
	}{
		{"valid", ok, ""},
		{"unknown kind kept", strings.Replace(ok, "anomaly_alert", "future_kind", 1), ""},
		{"unknown field ignored", strings.Replace(ok, `"id"`, `"extra":1,"id"`, 1), ""},
		{"no id", strings.Replace(ok, `"a-1"`, `""`, 1), "id must be"},
		{"id with space", strings.Replace(ok, `"a-1"`, `"a 1"`, 1), "id must be"},
		{"no kind", strings.Replace(ok, `"anomaly_alert"`, `""`, 1), "kind must be"},
		{"bad severity", strings.Replace(ok, `"critical"`, `"fatal"`, 1), "severity must be"},
		{"no timestamp", strings.Replace(ok, `1700000000000`, `0`, 1), "timestamp must be"},
		{"null data", strings.Replace(ok, `{"metric":"t"}`, `null`, 1), "data must be an object"},
		{"array data", strings.Replace(ok, `{"metric":"t"}`, `[1]`, 1), "data must be an object"},
		{"big data", strings.Replace(ok, `"t"`, `"`+strings.Repeat("x", MaxEventDataBytes)+`"`, 1), "over"},
		{"trailing", ok + `{}`, "trailing data"},
		{"not json", `{`, "event:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeEvent([]byte(tt.in))
			switch {
			case tt.err == "" && err != nil:
				t.Fatalf("DecodeEvent: %v", err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Fatalf("DecodeEvent error = %v, want one containing %q", err, tt.err)
			}
		})
	}
}

func FuzzDecodeEvent(f *testing.F) {
	f.Add([]byte(`{"id":"a-1","kind":"drift","severity":"warning","timestamp":1,"data":{"field":"x"}}`))
	f.Add([]byte(`{"id":"a","kind":"k","severity":"info","timestamp":1,"data":{}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := DecodeEvent(b)
		if err != nil {
			return
		}
		// An accepted event re-encodes to one that decodes the same.
		out, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("marshal accepted %q: %v", b, err)
		}
		e2, err := DecodeEvent(out)
		if err != nil || e2.ID != e.ID || e2.Kind != e.Kind || e2.Severity != e.Severity || e2.Timestamp != e.Timestamp {
			t.Fatalf("round trip of %q: %+v, %v", b, e2, err)
		}
	})
}
