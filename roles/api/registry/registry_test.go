package registry

import (
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
