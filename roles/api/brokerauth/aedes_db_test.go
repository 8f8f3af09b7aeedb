package brokerauth

import (
	"net/http/httptest"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/codec"
	"github.com/edgeplat/edgeplat/core/db/dbtest"
	"github.com/edgeplat/edgeplat/roles/api/accounts"
	"github.com/edgeplat/edgeplat/roles/api/registry"
)

// TestAedesWithRegistryIntegration is TestAedesIntegration's refusals with
// the devices the API really registers: the callbacks check credentials
// in the agent registry on PostgreSQL and on SQLite.
func TestAedesWithRegistryIntegration(t *testing.T) {
	node, module := aedesModule(t)
	for _, engine := range []string{"postgres", "sqlite"} {
		t.Run(engine, func(t *testing.T) {
			d := dbtest.Migrated(t, engine)
			ctx := t.Context()
			admin, err := accounts.NewStore(d).Bootstrap(ctx, accounts.NewUser{Email: "ops@example.com", Password: "correct horse battery"})
			if err != nil {
				t.Fatal(err)
			}
			agents := registry.NewStore(d)
			register := func(name string) registry.Credentials {
				_, key, err := agents.CreateProvisioningKey(ctx, admin.TenantUUID, admin.ID, registry.NewProvisioningKey{})
				if err != nil {
					t.Fatal(err)
				}
				cr, _, err := agents.Register(ctx, registry.Registration{Key: key, AgentName: name}, nil)
				if err != nil {
					t.Fatal(err)
				}
				return cr
			}
			dev, other := register("press-1"), register("press-2")
			a := newAuthorizer(t, agents)
			srv := httptest.NewServer(newEngine(t, a, config.BrokerAuth{Secret: brokerSecret}))
			defer srv.Close()
			for _, style := range []string{"goauth-json", "emqx"} {
				t.Run(style, func(t *testing.T) {
					addr := startAedes(t, node, module, srv.URL, style, brokerSecret)
					checkRegisteredDevice(t, addr, dev, other)
				})
			}
		})
	}
}

func checkRegisteredDevice(t *testing.T, addr string, dev, other registry.Credentials) {
	topic := func(cr registry.Credentials, suffix string) string {
		tu, _ := codec.ParseUUID(cr.Agent.TenantID)
		au, _ := codec.ParseUUID(cr.Agent.UUID)
		return "i/" + codec.EncodeID(tu) + "/a/" + codec.EncodeID(au) + "/" + suffix
	}
	clientID := "agent-" + dev.Agent.UUID
	for _, tt := range []struct{ name, user, pass, clientID string }{
		{"wrong password", dev.APIKey, dev.MQTTPassword + "x", clientID},
		{"anonymous", "", "", clientID},
		{"another agent's client id", dev.APIKey, dev.MQTTPassword, "agent-" + other.Agent.UUID},
	} {
		if c, err := mqttDial(addr, tt.user, tt.pass, tt.clientID); err == nil {
			c.Disconnect(100)
			t.Errorf("%s: connect accepted", tt.name)
		}
	}

	seen := make(chan string, 16)
	obs := mustMQTT(t, addr, serviceUser, servicePassword, "observer")
	if code := obs.subscribe(t, "#", func(_ paho.Client, m paho.Message) { seen <- m.Topic() + " " + string(m.Payload()) }); code != 1 {
		t.Fatalf("observer's subscription got SUBACK %#x", code)
	}
	c := mustMQTT(t, addr, dev.APIKey, dev.MQTTPassword, clientID)
	own := topic(dev, "endpoints/modbus")
	c.publish(t, own, "reading")
	if m := receive(t, seen, "the device's telemetry"); m != own+" reading" {
		t.Fatalf("observer got %q", m)
	}
	for _, filter := range []string{"#", "i/#", topic(other, "cmd/#")} {
		if code := c.subscribe(t, filter, func(paho.Client, paho.Message) {}); code != 0x80 {
			t.Errorf("subscribe %q: SUBACK %#x, want 0x80", filter, code)
		}
	}
	// Its own command subtree: subscribed, and the service user (the
	// Cloud API) publishes there.
	cmds := make(chan string, 4)
	if code := c.subscribe(t, topic(dev, "cmd/#"), func(_ paho.Client, m paho.Message) { cmds <- m.Topic() + " " + string(m.Payload()) }); code != 1 {
		t.Fatalf("subscribe to its own command subtree: SUBACK %#x, want 1", code)
	}
	notice := topic(dev, "cmd/target-state")
	obs.publish(t, notice, `{"version":1}`)
	if m := receive(t, cmds, "the cloud's command"); m != notice+` {"version":1}` {
		t.Fatalf("device got %q", m)
	}
	if m := receive(t, seen, "the command"); m != notice+` {"version":1}` {
		t.Fatalf("observer got %q", m)
	}
	for _, foreign := range []string{topic(other, "endpoints/modbus"), topic(other, "cmd/target-state")} {
		c := mustMQTT(t, addr, dev.APIKey, dev.MQTTPassword, clientID)
		c.Publish(foreign, 1, false, "forged")
		select {
		case <-c.lost:
		case <-time.After(wait):
			t.Fatalf("aedes kept the connection of a device publishing on %s", foreign)
		}
		obs.publish(t, foreign, "marker")
		if m := receive(t, seen, "the marker"); m != foreign+" marker" {
			t.Fatalf("observer got %q before the marker: the forged publish was delivered", m)
		}
	}
}
