package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
)

// TestTrickledBodiesGetRequestTimeoutIntegration: the routes that read
// their body themselves, because it is optional (provisioning keys) or not
// JSON (device log uploads), answer a body that trickles in past the body
// timeout with 408 and Connection: close, as every other route does. They
// used to answer 400 and keep the connection.
func TestTrickledBodiesGetRequestTimeoutIntegration(t *testing.T) {
	d := dbtest.Migrated(t, "sqlite")
	e, _, _ := fullRoleWith(t, d, testLicence(t, 0), func(cfg *config.Config) {
		cfg.Lifecycle.HTTPBodyTimeout = 300 * time.Millisecond
	})
	tok := admin(t, e)
	dev := call(t, e, "POST", "/api/v1/provision/agent", "", map[string]string{"key": provisioningKey(t, e, tok), "agentName": "press"})
	if dev.status != http.StatusCreated {
		t.Fatalf("register: %d %s", dev.status, dev.raw)
	}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	for _, tc := range []struct {
		name, path string
		header     string
	}{
		{"provisioning key", "/api/v1/provisioning/keys", "Authorization: Bearer " + tok},
		{"provisioning key, generate", "/api/v1/provisioning/keys/generate", "Authorization: Bearer " + tok},
		{"log upload", "/api/v1/device/" + dev.str("agentUuid") + "/logs", "X-Device-API-Key: " + dev.str("apiKey")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := coretest.TrickleBody(t, srv.Listener.Addr().String(), tc.path, tc.header)
			if resp.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, `"request_timeout"`) {
				t.Errorf("POST %s trickled = %d %s, want 408 request_timeout", tc.path, resp.StatusCode, body)
			}
			if !resp.Close {
				t.Errorf("POST %s trickled: the connection was kept open", tc.path)
			}
		})
	}
}
