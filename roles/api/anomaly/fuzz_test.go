package anomaly

import (
	"testing"

	"github.com/edgeplat/edgeplat/core/httpx"
)

// FuzzDecodeEventPayload: whatever an agent publishes on its events topic
// decodes to a valid event or an error, never a panic.
func FuzzDecodeEventPayload(f *testing.F) {
	f.Add([]byte(`{"id":"e1","kind":"anomaly_alert","severity":"critical","timestamp":1764000000000,"data":{"metric":"t"}}`))
	f.Add([]byte(`{"id":"","kind":"drift"}`))
	f.Add([]byte{0x78, 0x9c, 0x03, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeEventPayload(b)
		if err == nil {
			if verr := ev.Validate(); verr != nil {
				t.Fatalf("decoded an invalid event: %v", verr)
			}
		}
	})
}

// FuzzRuleInput: a rule body either is refused or normalizes to a rule
// whose stored form normalizes to itself.
func FuzzRuleInput(f *testing.F) {
	f.Add([]byte(`{"name":"x","type":"zscore","metric":"t*","k":3,"window":"5m"}`))
	f.Add([]byte(`{"name":"x","type":"correlation","window":"5m","conditions":[{"type":"threshold","metric":"a","op":"above","threshold":1},{"type":"rate_of_change","metric":"b","rate":1,"per":"second","window":"1m"}]}`))
	f.Add([]byte(`{"name":"x","type":"threshold","metric":"[","op":"below","threshold":1e308}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var in RuleInput
		if httpx.DecodeStrict(b, &in) != nil {
			return
		}
		r, err := in.normalize()
		if err != nil {
			return
		}
		again := RuleInput{Name: &r.Name, Type: r.Type, Severity: r.Severity, Enabled: &r.Enabled, Scope: &r.Scope,
			Condition: r.Condition, Conditions: r.Conditions, RecoverAfter: r.RecoverAfter}
		if _, err := again.normalize(); err != nil {
			t.Fatalf("a normalized rule is refused: %v", err)
		}
	})
}
