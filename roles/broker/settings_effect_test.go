package broker

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
)

// loadAllInOne loads all-in-one's configuration with env, every other
// EDGEPLAT_ALL_IN_ONE_MQTT_ variable put aside.
func loadAllInOne(t *testing.T, env map[string]string) config.AllInOne {
	t.Helper()
	for _, e := range os.Environ() {
		if k, _, _ := strings.Cut(e, "="); strings.HasPrefix(k, "EDGEPLAT_ALL_IN_ONE_MQTT_") {
			t.Setenv(k, "")
			if err := os.Unsetenv(k); err != nil {
				t.Fatal(err)
			}
		}
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAllInOne})
	if err != nil {
		t.Fatal(err)
	}
	return cfg.AllInOne
}

// TestBrokerLimitSettings: each all_in_one.mqtt_* limit, set away from its
// default, reaches the embedded broker's limits, which the broker takes.
// What each limit does to a connection is limits_test.go's subject.
func TestBrokerLimitSettings(t *testing.T) {
	tests := []struct {
		env, val string
		got      func(Limits) any
		want     any
	}{
		{"EDGEPLAT_ALL_IN_ONE_MQTT_MAX_PACKET_BYTES", "65536", func(l Limits) any { return l.MaxPacketBytes }, 65536},
		{"EDGEPLAT_ALL_IN_ONE_MQTT_CONNECT_TIMEOUT_SECONDS", "3", func(l Limits) any { return l.ConnectTimeout }, 3 * time.Second},
		{"EDGEPLAT_ALL_IN_ONE_MQTT_RECEIVE_MAXIMUM", "16", func(l Limits) any { return l.ReceiveMaximum }, 16},
		{"EDGEPLAT_ALL_IN_ONE_MQTT_MAX_INFLIGHT", "32", func(l Limits) any { return l.MaxInflight }, 32},
		{"EDGEPLAT_ALL_IN_ONE_MQTT_MAX_QUEUED", "64", func(l Limits) any { return l.MaxQueued }, 64},
		{"EDGEPLAT_ALL_IN_ONE_MQTT_SESSION_EXPIRY_SECONDS", "600", func(l Limits) any { return l.SessionExpiry }, 10 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			def := tt.got(LimitsFromConfig(loadAllInOne(t, nil)))
			if def == tt.want {
				t.Fatalf("%s=%s is the default; the test would show nothing", tt.env, tt.val)
			}
			l := LimitsFromConfig(loadAllInOne(t, map[string]string{tt.env: tt.val}))
			if got := tt.got(l); got != tt.want {
				t.Errorf("%s=%s: limit = %v, want %v", tt.env, tt.val, got, tt.want)
			}
			// The broker takes the value (startBroker fails the test if not).
			startBroker(t, Options{Limits: l})
		})
	}
}
