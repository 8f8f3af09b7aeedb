package registry

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/roles/api/secret"
)

func TestSplitKey(t *testing.T) {
	secret := strings.Repeat("a", secretLen)
	for _, tt := range []struct {
		key, scheme, want string
		ok                bool
	}{
		{"dk2_Ab12Cd34_" + secret, deviceScheme, "Ab12Cd34", true},
		{"pk_Ab12Cd34_" + secret, provisioningScheme, "Ab12Cd34", true},
		{"pk_Ab12Cd34_" + secret, deviceScheme, "", false},
		{"dk2_Ab12Cd3_" + secret + "a", deviceScheme, "", false}, // short kid
		{"dk2_Ab12Cd34_" + secret[1:], deviceScheme, "", false},  // short secret
		{"dk2_Ab12-d34_" + secret, deviceScheme, "", false},      // outside the alphabet
		{"dk2_Ab12Cd34-" + secret, deviceScheme, "", false},      // wrong separator
		{"dk2_Ab12Cd34_" + secret[1:] + "/", deviceScheme, "", false},
		{"", deviceScheme, "", false},
	} {
		got, ok := splitKey(tt.key, tt.scheme)
		if got != tt.want || ok != tt.ok {
			t.Errorf("splitKey(%q, %q) = %q, %v; want %q, %v", tt.key, tt.scheme, got, ok, tt.want, tt.ok)
		}
	}
}

func TestGeneratedKeysAreMQTTUsernames(t *testing.T) {
	for range 100 {
		key := deviceScheme + secret.Random(prefixLen) + "_" + secret.Random(secretLen)
		if err := brokerauth.ValidateIdentifier(key); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		if kid, ok := splitKey(key, deviceScheme); !ok || !strings.HasPrefix(key, DeviceKeyPrefix(kid)) {
			t.Fatalf("%s does not split into its kid", key)
		}
	}
}

func TestMatchTags(t *testing.T) {
	have := map[string]string{"site": "north", "line": "3"}
	for _, tt := range []struct {
		want map[string]string
		ok   bool
	}{
		{nil, true},
		{map[string]string{"site": "north"}, true},
		{map[string]string{"site": "north", "line": "3"}, true},
		{map[string]string{"site": "*"}, true},
		{map[string]string{"site": "south"}, false},
		{map[string]string{"zone": "*"}, false},
	} {
		if got := matchTags(have, tt.want); got != tt.ok {
			t.Errorf("matchTags(%v) = %v, want %v", tt.want, got, tt.ok)
		}
	}
}

func TestChecks(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
	}{
		{"tags over the count", checkTags(func() map[string]string {
			m := map[string]string{}
			for i := range maxTags + 1 {
				m[strings.Repeat("k", i+1)] = "v"
			}
			return m
		}())},
		{"blank tag key", checkTags(map[string]string{" ": "v"})},
		{"latitude", (&Location{Latitude: 91}).check()},
		{"longitude", (&Location{Longitude: -181}).check()},
		{"control character in a name", func() error { _, err := checkName("name", "a\x00b"); return err }()},
		{"blank name", func() error { _, err := checkName("name", "  "); return err }()},
	} {
		if !errors.Is(tt.err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tt.name, tt.err)
		}
	}
	if err := (&Location{Latitude: 48.1, Longitude: 11.6}).check(); err != nil {
		t.Errorf("a valid location: %v", err)
	}
	if n, err := checkName("name", "  press 7 "); err != nil || n != "press 7" {
		t.Errorf("checkName trims: %q %v", n, err)
	}
}

func TestParseTagQuery(t *testing.T) {
	have := map[string]string{"site": "north", "line": "3", "owner": ""}
	for _, tt := range []struct {
		query string
		ok    bool
	}{
		{`{}`, true},
		{`{"site": "north"}`, true},
		{`{"site": {"eq": "north"}, "line": "3"}`, true},
		{`{"site": "south"}`, false},
		{`{"line": ["1", "3"]}`, true},
		{`{"line": {"in": ["1", "2"]}}`, false},
		{`{"zone": ["a"]}`, false},
		{`{"site": "*", "owner": {"exists": true}}`, true},
		{`{"zone": {"exists": true}}`, false},
		{`{"zone": {"exists": false}}`, true},
		{`{"site": {"exists": false}}`, false},
		{`{"owner": ""}`, true},
	} {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(tt.query), &raw); err != nil {
			t.Fatal(err)
		}
		conds, err := ParseTagQuery(raw)
		if err != nil {
			t.Errorf("%s: %v", tt.query, err)
			continue
		}
		if got := matchConds(have, conds); got != tt.ok {
			t.Errorf("%s matches %v, want %v", tt.query, got, tt.ok)
		}
	}
	for _, bad := range []string{`{"a": 1}`, `{"a": null}`, `{"a": []}`, `{"a": [1]}`, `{"a": {}}`, `{"a": {"eq": "x", "in": ["x"]}}`,
		`{"a": {"like": "x"}}`, `{"a": {"exists": "yes"}}`, `{"a": {"in": "x"}}`, `{"": "x"}`, `{"a": true}`} {
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(bad), &raw); err != nil {
			t.Fatal(err)
		}
		if _, err := ParseTagQuery(raw); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}

func FuzzParseTagQuery(f *testing.F) {
	f.Add([]byte(`{"site": "north", "line": ["1", "3"], "zone": {"exists": false}, "x": {"in": ["a"]}}`))
	f.Add([]byte(`{"a": {"eq": "*"}}`))
	have := map[string]string{"site": "north", "line": "3"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var raw map[string]json.RawMessage
		if json.Unmarshal(b, &raw) != nil {
			return
		}
		conds, err := ParseTagQuery(raw)
		if err != nil {
			return
		}
		if len(conds) != len(raw) {
			t.Fatalf("%d conditions from %d keys", len(conds), len(raw))
		}
		// Every accepted condition has a known operator (matchConds
		// panics on others) and bounded values.
		matchConds(have, conds)
		for _, c := range conds {
			if len(c.Values) > maxTagInValues {
				t.Fatalf("condition with %d values", len(c.Values))
			}
		}
	})
}

func TestLocationTag(t *testing.T) {
	for in, want := range map[string]*Location{
		"48.1,11.6":     {Latitude: 48.1, Longitude: 11.6},
		" -33.9 , 18.4": {Latitude: -33.9, Longitude: 18.4},
		"91,0":          nil,
		"0,181":         nil,
		"NaN,0":         nil,
		"1e999,0":       nil,
		"north":         nil,
		"1,2,3":         nil,
		"":              nil,
	} {
		got := locationTag(in)
		if (got == nil) != (want == nil) || (got != nil && *got != *want) {
			t.Errorf("locationTag(%q) = %+v, want %+v", in, got, want)
		}
	}
}

func FuzzLocationTag(f *testing.F) {
	f.Add("48.1,11.6")
	f.Add("-90,-180")
	f.Fuzz(func(t *testing.T, v string) {
		if l := locationTag(v); l != nil && l.check() != nil {
			t.Fatalf("locationTag(%q) = %+v, out of range", v, l)
		}
	})
}
