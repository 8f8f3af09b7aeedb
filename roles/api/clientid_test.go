package api

import (
	"context"
	"strings"
	"testing"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/core/mqttx"
)

// TestDefaultClientIDFromInstallationIntegration: serve-api's default MQTT
// client id follows the database, not the host: two fresh databases on one
// host give two ids (a new installation never resumes an old one's
// session), one database gives the same id across restarts, and
// mqtt.client_id still wins.
func TestDefaultClientIDFromInstallationIntegration(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test; -short given")
	}
	cfg, err := config.Load(config.LoadOptions{Role: config.RoleAPI})
	if err != nil {
		t.Fatal(err)
	}
	cfg.MQTT.ClientID = ""
	ctx := context.Background()
	clientID := func(t *testing.T, dbCfg config.DB) string {
		t.Helper()
		d := dbtest.Open(t, dbCfg)
		defer d.Close()
		mo := mqttOptions(cfg, d)
		if mo.ClientID != "" || mo.ResolveClientID == nil {
			t.Fatalf("without mqtt.client_id: client id %q fixed before Start, want it resolved from the database", mo.ClientID)
		}
		id, err := mo.ResolveClientID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(id, "edgeplat-api-") {
			t.Errorf("client id %q, want the edgeplat-api- prefix", id)
		}
		return id
	}
	for _, e := range []struct {
		name  string
		fresh func(testing.TB) config.DB
	}{{"postgres", coretest.Postgres}, {"sqlite", coretest.SQLite}} {
		t.Run(e.name, func(t *testing.T) {
			a, b := e.fresh(t), e.fresh(t)
			idA, idB := clientID(t, a), clientID(t, b)
			if idA == idB {
				t.Errorf("two installations on one host share the client id %q", idA)
			}
			if again := clientID(t, a); again != idA {
				t.Errorf("client id changed across a restart: %q then %q", idA, again)
			}

			// A database in use before installation ids keeps the
			// host-name id its broker session is queued under.
			d := dbtest.Open(t, b)
			if _, err := d.SQL().ExecContext(ctx, `UPDATE installation_identity SET legacy_client_id = $1`, true); err != nil {
				t.Fatal(err)
			}
			d.Close()
			if legacy := clientID(t, b); legacy != mqttx.DefaultClientID("edgeplat-api") {
				t.Errorf("legacy database: client id %q, want the host-name one %q", legacy, mqttx.DefaultClientID("edgeplat-api"))
			}
		})
	}

	explicit := *cfg
	explicit.MQTT.ClientID = "api-replica-7"
	mo := mqttOptions(&explicit, nil)
	if mo.ClientID != "api-replica-7" || mo.ResolveClientID != nil {
		t.Errorf("with mqtt.client_id: client id %q (resolver set: %v), want the configured one", mo.ClientID, mo.ResolveClientID != nil)
	}
}
