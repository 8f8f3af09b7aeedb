package admin

import (
	"testing"
)

// FuzzDecodeChanges: no PUT body panics the decoder or a key's value
// check, and every value a key accepts is stored in a form it accepts
// again unchanged.
func FuzzDecodeChanges(f *testing.F) {
	f.Add([]byte(`{"log.level":"WARNING","auth.rate_limit_global":3}`))
	f.Add([]byte(`{"api.dedup_ttl":"7d","auth.rate_limit_admin":null}`))
	f.Add([]byte(`{"api.dedup_ttl":"1h30m"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		changes, err := DecodeChanges(body)
		if err != nil {
			return
		}
		for _, c := range changes {
			def, ok := settingByKey(c.Key)
			if !ok {
				t.Fatalf("unknown key %q accepted", c.Key)
			}
			if c.Value == nil {
				continue
			}
			v, err := def.decode(c.Value)
			if err != nil {
				continue
			}
			var s Settings
			def.set(&s, v)
			if got := def.get(&s); got != v {
				t.Fatalf("%s: stored %v, read back %v", c.Key, v, got)
			}
		}
	})
}
