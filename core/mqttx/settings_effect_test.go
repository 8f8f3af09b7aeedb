package mqttx

import (
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// TestReconnectSettings: MQTT_MAX_RECONNECT_ATTEMPTS and
// MQTT_FATAL_RECOVERY_COOLDOWN_MS, changed from their defaults (20 and
// 60000), set the client's give-up point and its wait in the fatal state.
func TestReconnectSettings(t *testing.T) {
	o := OptionsFromConfig(config.MQTT{BrokerURL: "tcp://b:1883", MaxReconnectAttempts: 3, FatalRecoveryCooldownMS: 1500}, "id")
	if o.MaxReconnectAttempts != 3 {
		t.Errorf("MaxReconnectAttempts = %d, want 3", o.MaxReconnectAttempts)
	}
	if o.FatalRecoveryCooldown != 1500*time.Millisecond {
		t.Errorf("FatalRecoveryCooldown = %s, want 1.5s", o.FatalRecoveryCooldown)
	}
	if _, err := New(o); err != nil {
		t.Errorf("New refused the options: %v", err)
	}
}
