package brokerauth

import (
	"net/http"
	"os"
	"testing"

	"github.com/edgeplat/edgeplat/config"
)

// TestEmptyAllowedNetworksEnvRefusesEveryCaller loads the configuration
// as serve-api does: BROKER_AUTH_ALLOWED_NETWORKS set to the empty string
// admits no caller without the secret (loopback included), unset admits
// loopback by default.
func TestEmptyAllowedNetworksEnvRefusesEveryCaller(t *testing.T) {
	a := newAuthorizer(t, newMemStore())
	body := jsonBody(t, map[string]any{"username": serviceUser})
	for _, tt := range []struct {
		name    string
		env     *string
		allowed bool
	}{
		{"unset: loopback by default", nil, true},
		{"set to empty: none", new(""), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const env = "BROKER_AUTH_ALLOWED_NETWORKS"
			t.Setenv(env, "")
			if tt.env == nil {
				os.Unsetenv(env)
			}
			cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
			if err != nil {
				t.Fatal(err)
			}
			e := newEngine(t, a, cfg.BrokerAuth)
			for _, remote := range []string{loopback, "[::1]:4000", "10.1.2.3:4000"} {
				status, out := call(t, e, PathUser, "application/json", body, remote, nil)
				// The guard's refusal has the API's error shape; a caller it
				// admits gets the callback's own answer.
				errObj, _ := out["error"].(map[string]any)
				refused := status == http.StatusForbidden && errObj["code"] == "forbidden"
				if want := !tt.allowed || remote == "10.1.2.3:4000"; refused != want {
					t.Errorf("from %s: %d %v, refused=%v want %v", remote, status, out, refused, want)
				}
			}
		})
	}
}
