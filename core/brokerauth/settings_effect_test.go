package brokerauth

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// TestAuthCacheTTLSetting: MQTT_AUTH_CACHE_TTL_SECONDS, changed from its
// default (300), is how long the authorizer caches its answers.
func TestAuthCacheTTLSetting(t *testing.T) {
	if o := OptionsFromConfig(config.MQTT{AuthCacheTTLSeconds: 42}); o.CacheTTL != 42*time.Second {
		t.Errorf("CacheTTL = %s, want 42s", o.CacheTTL)
	}
}
