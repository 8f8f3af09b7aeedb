package broker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/brokerauth"
	"github.com/edgeplat/edgeplat/core/codec"
)

const (
	tenantUUID      = "6f1c2a9e-3b7d-4c8a-9e21-0a1b2c3d4e5f"
	agentUUID       = "0d5e7f10-2a3b-4c5d-8e9f-a0b1c2d3e4f5"
	otherAgentUUID  = "1e2d3c4b-5a69-4788-9a0b-1c2d3e4f5a6b"
	otherTenantUUID = "9a8b7c6d-5e4f-4321-8fed-cba987654321"
	deviceKey       = "dk_live_7Qm2xZ"
	devicePassword  = "mqtt-pass-1"
	serviceUser     = "edgeplat-api"
	servicePassword = "service-secret"
	wait            = 5 * time.Second
)

var deviceClientID = brokerauth.AgentClientID(agentUUID)

// memStore is an in-memory brokerauth.Store.
type memStore struct {
	mu      sync.Mutex
	devices map[string]string // key -> password, all of agentUUID
	err     error
}

func (s *memStore) AuthenticateDevice(_ context.Context, username, password string) (brokerauth.Identity, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return brokerauth.Identity{}, s.err
	}
	if p, ok := s.devices[username]; !ok || p != password {
		return brokerauth.Identity{}, fmt.Errorf("device key: %w", brokerauth.ErrDenied)
	}
	return brokerauth.Identity{Username: username, TenantUUID: tenantUUID, AgentUUID: agentUUID}, nil
}

func topicOf(t testing.TB, tenant, agent, suffix string) string {
	t.Helper()
	tid, err := codec.IDFromUUID(tenant)
	if err != nil {
		t.Fatal(err)
	}
	aid, err := codec.IDFromUUID(agent)
	if err != nil {
		t.Fatal(err)
	}
	return "i/" + tid + "/a/" + aid + "/" + suffix
}

// startAuthBroker starts the embedded broker on a free port with the
// edgeplat hook.
func startAuthBroker(t *testing.T) (*Broker, *memStore, *brokerauth.Authorizer) {
	t.Helper()
	store := &memStore{devices: map[string]string{deviceKey: devicePassword}}
	a, err := brokerauth.New(brokerauth.Options{
		Store:        store,
		ServiceUsers: map[string]config.Secret{serviceUser: servicePassword},
		CacheTTL:     time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Bind: "127.0.0.1", Port: 0, Auth: a}, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Stop(context.Background()) })
	return b, store, a
}

// client is a paho client that reports the loss of its connection.
type client struct {
	paho.Client
	lost chan error
}

func dial(addr, user, pass, clientID string, mod func(*paho.ClientOptions)) (*client, error) {
	c := &client{lost: make(chan error, 1)}
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).
		SetUsername(user).SetPassword(pass).SetConnectTimeout(wait).
		SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { c.lost <- err })
	if mod != nil {
		mod(opts)
	}
	c.Client = paho.NewClient(opts)
	tok := c.Connect()
	if !tok.WaitTimeout(wait) {
		return nil, errors.New("connect timed out")
	}
	if err := tok.Error(); err != nil {
		return nil, err
	}
	return c, nil
}

func mustDial(t *testing.T, addr, user, pass, clientID string) *client {
	t.Helper()
	c, err := dial(addr, user, pass, clientID, nil)
	if err != nil {
		t.Fatalf("connect as %s: %v", clientID, err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

// subscribe returns the SUBACK code for filter.
func (c *client) subscribe(t *testing.T, filter string, h paho.MessageHandler) byte {
	t.Helper()
	tok := c.Subscribe(filter, 1, h)
	if !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("subscribe %q: %v", filter, tok.Error())
	}
	// One filter per call: paho keys results by the filter without a
	// $share/{group}/ prefix, so take the only entry.
	res := tok.(*paho.SubscribeToken).Result()
	if len(res) != 1 {
		t.Fatalf("subscribe %q: %d results", filter, len(res))
	}
	for _, code := range res {
		return code
	}
	return 0
}

func (c *client) publish(t *testing.T, topic, payload string) {
	t.Helper()
	if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish %q: %v", topic, tok.Error())
	}
}

// observer is a service-user client subscribed to everything; it records
// messages in arrival order.
type observer struct {
	*client
	msgs chan string
}

func newObserver(t *testing.T, addr string) *observer {
	t.Helper()
	o := &observer{client: mustDial(t, addr, serviceUser, servicePassword, "observer"), msgs: make(chan string, 64)}
	if code := o.subscribe(t, "#", func(_ paho.Client, m paho.Message) {
		o.msgs <- m.Topic() + " " + string(m.Payload())
	}); code != 1 {
		t.Fatalf("service user's subscription to # got SUBACK %#x", code)
	}
	return o
}

func (o *observer) next(t *testing.T) string {
	t.Helper()
	select {
	case m := <-o.msgs:
		return m
	case <-time.After(wait):
		t.Fatal("no message reached the observer")
		return ""
	}
}

// TestEmbeddedBrokerAllowsOwnTopics: a device with the right credentials
// connects, publishes telemetry under its prefix, subscribes to its command
// subtree and receives a command the service user publishes there.
func TestEmbeddedBrokerAllowsOwnTopics(t *testing.T) {
	b, _, _ := startAuthBroker(t)
	obs := newObserver(t, b.Addr())
	dev := mustDial(t, b.Addr(), deviceKey, devicePassword, deviceClientID)

	own := topicOf(t, tenantUUID, agentUUID, "endpoints/modbus")
	dev.publish(t, own, "reading")
	if m := obs.next(t); m != own+" reading" {
		t.Fatalf("observer got %q", m)
	}

	cmds := make(chan string, 4)
	if code := dev.subscribe(t, topicOf(t, tenantUUID, agentUUID, "cmd/#"), func(_ paho.Client, m paho.Message) {
		cmds <- m.Topic() + " " + string(m.Payload())
	}); code != 1 {
		t.Fatalf("device's subscription to its commands got SUBACK %#x", code)
	}
	desired := topicOf(t, tenantUUID, agentUUID, "cmd/desired")
	obs.publish(t, desired, "state-v2")
	select {
	case m := <-cmds:
		if m != desired+" state-v2" {
			t.Errorf("device got %q", m)
		}
	case <-time.After(wait):
		t.Fatal("the device did not receive its command")
	}
}

func TestEmbeddedBrokerRefusesConnects(t *testing.T) {
	b, store, a := startAuthBroker(t)
	foreignWill := func(o *paho.ClientOptions) {
		o.SetWill(topicOf(t, tenantUUID, otherAgentUUID, "state"), "offline", 1, false)
	}
	tests := []struct {
		name     string
		user     string
		pass     string
		clientID string
		mod      func(*paho.ClientOptions)
	}{
		{"anonymous", "", "", deviceClientID, nil},
		{"wrong password", deviceKey, "guess", deviceClientID, nil},
		{"wrong client id", deviceKey, devicePassword, brokerauth.AgentClientID(otherAgentUUID), nil},
		{"free-form client id", deviceKey, devicePassword, "sensor-1", nil},
		{"service user wrong password", serviceUser, "guess", "api", nil},
		{"will on another agent's topic", deviceKey, devicePassword, deviceClientID, foreignWill},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := dial(b.Addr(), tt.user, tt.pass, tt.clientID, tt.mod); err == nil {
				c.Disconnect(100)
				t.Fatal("connect accepted")
			}
		})
	}
	// The same device with its own will topic is accepted, so the will case
	// above failed for its topic.
	ownWill := func(o *paho.ClientOptions) {
		o.SetWill(topicOf(t, tenantUUID, agentUUID, "state"), "offline", 1, false)
	}
	c, err := dial(b.Addr(), deviceKey, devicePassword, deviceClientID, ownWill)
	if err != nil {
		t.Fatalf("device with its own will: %v", err)
	}
	c.Disconnect(100)

	t.Run("store failure", func(t *testing.T) {
		store.mu.Lock()
		store.devices["dk_new"] = "p"
		store.err = errors.New("database is down")
		store.mu.Unlock()
		defer func() { store.mu.Lock(); store.err = nil; store.mu.Unlock() }()
		if c, err := dial(b.Addr(), "dk_new", "p", deviceClientID, nil); err == nil {
			c.Disconnect(100)
			t.Fatal("connect accepted while the store fails")
		}
	})
	t.Run("revoked key", func(t *testing.T) {
		store.mu.Lock()
		delete(store.devices, deviceKey)
		store.mu.Unlock()
		a.Invalidate(deviceKey)
		if c, err := dial(b.Addr(), deviceKey, devicePassword, deviceClientID, nil); err == nil {
			c.Disconnect(100)
			t.Fatal("connect accepted with a revoked key")
		}
	})
}

// TestEmbeddedBrokerRefusesForeignPublishes: mochi disconnects an MQTT 3.1.1
// client whose QoS 1 publish the ACL refuses. The observer then receives a
// marker published after the disconnect as its next message, proving the
// refused message was never delivered.
func TestEmbeddedBrokerRefusesForeignPublishes(t *testing.T) {
	b, _, _ := startAuthBroker(t)
	obs := newObserver(t, b.Addr())
	for _, tt := range []struct{ name, topic string }{
		{"other agent", topicOf(t, tenantUUID, otherAgentUUID, "endpoints/modbus")},
		{"other tenant", topicOf(t, otherTenantUUID, agentUUID, "endpoints/modbus")},
		{"own command subtree", topicOf(t, tenantUUID, agentUUID, "cmd/desired")},
		{"other agent's command subtree", topicOf(t, tenantUUID, otherAgentUUID, "cmd/target-state")},
		{"outside i/", "plant/line1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dev := mustDial(t, b.Addr(), deviceKey, devicePassword, deviceClientID)
			dev.Publish(tt.topic, 1, false, "forged")
			select {
			case <-dev.lost:
			case <-time.After(wait):
				t.Fatal("the broker kept the connection of a client publishing outside its prefix")
			}
			obs.publish(t, tt.topic, "marker")
			if m := obs.next(t); m != tt.topic+" marker" {
				t.Fatalf("observer got %q before the marker: the refused publish was delivered", m)
			}
		})
	}
}

func TestEmbeddedBrokerRefusesForeignSubscriptions(t *testing.T) {
	b, _, _ := startAuthBroker(t)
	dev := mustDial(t, b.Addr(), deviceKey, devicePassword, deviceClientID)
	for _, filter := range []string{
		"#", "i/#", "i/+/a/+/cmd/#", "+/x",
		topicOf(t, tenantUUID, otherAgentUUID, "cmd/#"),
		topicOf(t, otherTenantUUID, agentUUID, "cmd/#"),
		topicOf(t, tenantUUID, agentUUID, "#"),
		"$SYS/#",
		"$share/g/" + topicOf(t, tenantUUID, agentUUID, "cmd/#"),
	} {
		if code := dev.subscribe(t, filter, func(paho.Client, paho.Message) {}); code != 0x80 {
			t.Errorf("subscribe %q: SUBACK %#x, want 0x80 (refused)", filter, code)
		}
	}
	// The connection is still usable: refusals of SUBSCRIBE do not drop it.
	if code := dev.subscribe(t, topicOf(t, tenantUUID, agentUUID, "cmd/jobs/+"), func(paho.Client, paho.Message) {}); code != 1 {
		t.Errorf("own command filter after refusals: SUBACK %#x", code)
	}
}

// TestEmbeddedBrokerWithoutAuthAllowsAll keeps today's behaviour when no
// Authorizer is configured.
func TestEmbeddedBrokerWithoutAuthAllowsAll(t *testing.T) {
	b, err := New(Options{Bind: "127.0.0.1", Port: 0}, newRuntime())
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer b.Stop(context.Background())
	c, err := dial(b.Addr(), "", "", "anyone", nil)
	if err != nil {
		t.Fatalf("anonymous connect without an Authorizer: %v", err)
	}
	defer c.Disconnect(100)
	if code := c.subscribe(t, "#", func(paho.Client, paho.Message) {}); code != 1 {
		t.Errorf("SUBACK %#x", code)
	}
}
