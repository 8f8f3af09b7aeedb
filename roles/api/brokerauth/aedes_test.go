package brokerauth

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	"github.com/edgeplat/edgeplat/config"
	"github.com/edgeplat/edgeplat/core/coretest"
)

// aedesVersion is the aedes release the integration test runs; .ci/run
// installs it.
const aedesVersion = "1.2.0"

const wait = 10 * time.Second

// aedesModule finds node and the aedes package: $EDGEPLAT_NPM_CACHE (or
// ~/.cache/edgeplat-npm)/node_modules/aedes, where .ci/run installs it. It
// skips the test when either is missing, and fails it under CI=true or
// EDGEPLAT_REQUIRE_SERVICES=1.
func aedesModule(t *testing.T) (node, module string) {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: runs the aedes broker, skipped in -short mode")
	}
	node, mods := coretest.NodePackage(t, "aedes")
	module = filepath.Join(mods, "aedes")
	raw, err := os.ReadFile(filepath.Join(module, "package.json"))
	if err != nil {
		coretest.Unavailable(t, "aedes@"+aedesVersion, module, err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(raw, &pkg); err != nil || pkg.Version != aedesVersion {
		coretest.Unavailable(t, "aedes@"+aedesVersion, module, fmt.Errorf("found version %q (%v)", pkg.Version, err))
	}
	return node, module
}

// startAedes runs testdata/aedes-broker.mjs against the callbacks at
// authURL and returns the broker's address.
func startAedes(t *testing.T, node, module, authURL, style, secret string) string {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("testdata", "aedes-broker.mjs"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script)
	cmd.Env = append(os.Environ(),
		"EDGEPLAT_AEDES_MODULE="+module, "AUTH_BASE_URL="+authURL, "AUTH_STYLE="+style, "AUTH_SECRET="+secret)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start aedes: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		// Closing stdin asks the script to stop; kill it if it does not.
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(wait):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("aedes stderr:\n%s", stderr.String())
		}
	})

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if port, ok := strings.CutPrefix(sc.Text(), "LISTENING "); ok {
				lines <- port
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case port := <-lines:
		return "127.0.0.1:" + port
	case <-exited:
		t.Fatalf("aedes exited before listening:\n%s", stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("aedes did not start listening:\n%s", stderr.String())
	}
	return ""
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// mqttClient is a paho client that reports the loss of its connection.
type mqttClient struct {
	paho.Client
	lost chan error
}

func mqttDial(addr, user, pass, clientID string) (*mqttClient, error) {
	c := &mqttClient{lost: make(chan error, 1)}
	opts := paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(clientID).
		SetUsername(user).SetPassword(pass).SetConnectTimeout(wait).
		SetAutoReconnect(false).SetConnectRetry(false).
		SetConnectionLostHandler(func(_ paho.Client, err error) { c.lost <- err })
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

func mustMQTT(t *testing.T, addr, user, pass, clientID string) *mqttClient {
	t.Helper()
	c, err := mqttDial(addr, user, pass, clientID)
	if err != nil {
		t.Fatalf("connect as %s: %v", clientID, err)
	}
	t.Cleanup(func() { c.Disconnect(100) })
	return c
}

func (c *mqttClient) subscribe(t *testing.T, filter string, h paho.MessageHandler) byte {
	t.Helper()
	tok := c.Subscribe(filter, 1, h)
	if !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("subscribe %q: %v", filter, tok.Error())
	}
	res := tok.(*paho.SubscribeToken).Result()
	if len(res) != 1 {
		t.Fatalf("subscribe %q: %d results", filter, len(res))
	}
	for _, code := range res {
		return code
	}
	return 0
}

func (c *mqttClient) publish(t *testing.T, topic, payload string) {
	t.Helper()
	if tok := c.Publish(topic, 1, false, payload); !tok.WaitTimeout(wait) || tok.Error() != nil {
		t.Fatalf("publish %q: %v", topic, tok.Error())
	}
}

func receive(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(wait):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// TestAedesIntegration runs aedes, a third-party broker, with hooks that
// call these handlers in each supported contract, and checks with real
// MQTT clients that devices get exactly their own topics.
func TestAedesIntegration(t *testing.T) {
	node, module := aedesModule(t)
	for _, style := range []string{"goauth-json", "goauth-form", "emqx"} {
		t.Run(style, func(t *testing.T) {
			store := newMemStore()
			store.devices["dk_second"] = memDevice{password: "second-pass", id: store.devices[deviceKey].id}
			a := newAuthorizer(t, store)
			// No allowed networks: every callback must carry the secret.
			srv := httptest.NewServer(newEngine(t, a, config.BrokerAuth{Secret: brokerSecret}))
			defer srv.Close()
			addr := startAedes(t, node, module, srv.URL, style, brokerSecret)
			testAedesRules(t, addr, store)
		})
	}
	t.Run("wrong callback secret", func(t *testing.T) {
		a := newAuthorizer(t, newMemStore())
		srv := httptest.NewServer(newEngine(t, a, config.BrokerAuth{Secret: brokerSecret}))
		defer srv.Close()
		for _, style := range []string{"goauth-json", "emqx"} {
			addr := startAedes(t, node, module, srv.URL, style, "not-the-secret")
			if c, err := mqttDial(addr, deviceKey, devicePassword, deviceClientID); err == nil {
				c.Disconnect(100)
				t.Errorf("%s: a device connected although the broker's callbacks were refused", style)
			}
		}
	})
}

func testAedesRules(t *testing.T, addr string, store *memStore) {
	seen := make(chan string, 64)
	obs := mustMQTT(t, addr, serviceUser, servicePassword, "observer")
	if code := obs.subscribe(t, "#", func(_ paho.Client, m paho.Message) {
		seen <- m.Topic() + " " + string(m.Payload())
	}); code != 1 {
		t.Fatalf("service user's subscription to # got SUBACK %#x", code)
	}

	t.Run("device uses its own topics", func(t *testing.T) {
		dev := mustMQTT(t, addr, deviceKey, devicePassword, deviceClientID)
		own := agentTopic(t, tenantUUID, agentUUID, "endpoints/modbus")
		dev.publish(t, own, "reading")
		if m := receive(t, seen, "the device's telemetry"); m != own+" reading" {
			t.Fatalf("observer got %q", m)
		}
		cmds := make(chan string, 4)
		if code := dev.subscribe(t, agentTopic(t, tenantUUID, agentUUID, "cmd/#"), func(_ paho.Client, m paho.Message) {
			cmds <- m.Topic() + " " + string(m.Payload())
		}); code != 1 {
			t.Fatalf("device's subscription to its commands got SUBACK %#x", code)
		}
		desired := agentTopic(t, tenantUUID, agentUUID, "cmd/desired")
		obs.publish(t, desired, "v2")
		if m := receive(t, cmds, "the command"); m != desired+" v2" {
			t.Errorf("device got %q", m)
		}
		if m := receive(t, seen, "the command at the observer"); m != desired+" v2" {
			t.Errorf("observer got %q", m)
		}
	})

	t.Run("connects refused", func(t *testing.T) {
		for _, tt := range []struct{ name, user, pass, clientID string }{
			{"wrong password", deviceKey, "guess", deviceClientID},
			{"anonymous", "", "", deviceClientID},
			{"wrong client id", deviceKey, devicePassword, "agent-" + otherAgentUUID},
			{"service user wrong password", serviceUser, "guess", "api"},
		} {
			if c, err := mqttDial(addr, tt.user, tt.pass, tt.clientID); err == nil {
				c.Disconnect(100)
				t.Errorf("%s: connect accepted", tt.name)
			}
		}
	})

	t.Run("foreign publishes refused", func(t *testing.T) {
		for _, topic := range []string{
			agentTopic(t, tenantUUID, otherAgentUUID, "endpoints/modbus"),
			agentTopic(t, otherTenantUUID, agentUUID, "endpoints/modbus"),
			agentTopic(t, tenantUUID, agentUUID, "cmd/desired"),
		} {
			dev := mustMQTT(t, addr, deviceKey, devicePassword, deviceClientID)
			dev.Publish(topic, 1, false, "forged")
			select {
			case <-dev.lost:
			case <-time.After(wait):
				t.Fatalf("aedes kept the connection of a device publishing to %s", topic)
			}
			// The marker comes after the refused publish was handled: if
			// that had been delivered, the observer would see it first.
			obs.publish(t, topic, "marker")
			if m := receive(t, seen, "the marker"); m != topic+" marker" {
				t.Fatalf("observer got %q before the marker: the refused publish was delivered", m)
			}
		}
	})

	t.Run("foreign subscriptions refused", func(t *testing.T) {
		dev := mustMQTT(t, addr, deviceKey, devicePassword, deviceClientID)
		for _, filter := range []string{"i/#", "#", "i/+/a/+/cmd/#", agentTopic(t, tenantUUID, otherAgentUUID, "cmd/#"), "$SYS/#"} {
			if code := dev.subscribe(t, filter, func(paho.Client, paho.Message) {}); code != 0x80 {
				t.Errorf("subscribe %q: SUBACK %#x, want 0x80", filter, code)
			}
		}
	})

	t.Run("store failure refuses", func(t *testing.T) {
		store.setErr(errors.New("database is down"))
		if c, err := mqttDial(addr, "dk_second", "second-pass", deviceClientID); err == nil {
			c.Disconnect(100)
			t.Fatal("connect accepted while the store fails")
		}
		store.setErr(nil)
		// Not cached: the same login passes once the store is back.
		c := mustMQTT(t, addr, "dk_second", "second-pass", deviceClientID)
		c.Disconnect(100)
	})
}
